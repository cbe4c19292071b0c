"""Pipeline configuration: one YAML file (``configs/sample.yaml`` by default), validated.

Plain module (no Dagster): the Dagster resource in ``saber_assets.pipeline`` wraps it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from saber_resources.home import data_home as data_home  # where the config's outputs go
from saber_resources.yaml_text import read_yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data"


def resolve_path(p: str) -> Path:
    """A configured path: `~` expanded, a relative one read from the checkout's root."""
    path = Path(p).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path


CONFIG_DIR = REPO_ROOT / "configs"
SQL_DIR = REPO_ROOT / "sql"
DEFAULT_CONFIG = CONFIG_DIR / "sample.yaml"

# Bundled sources: name -> (file, field mapping). Users may declare any other file with a mapping.
BUNDLED_SOURCES: dict[str, tuple[str, dict[str, str]]] = {
    "math": (
        "corpora/math.jsonl.gz",
        {"id": "id", "problem": "problem", "solution": "solution", "category": "type"},
    ),
    "olympiadbench": (
        "corpora/olympiadbench.jsonl.gz",
        {"id": "id", "problem": "question", "solution": "solution", "category": "subfield"},
    ),
    # 270 competition problems, plain-text maths: a corpus the CPU stand-ins were not built on
    "champ": (
        "corpora/champ.jsonl.gz",
        {"id": "id", "problem": "problem", "solution": "solution", "category": "category"},
    ),
}
BUNDLED_ONTOLOGIES = {"mathworld": "ontology/mathworld_tree.json.gz"}


def is_json_nodes(name: str) -> bool:
    """A nodes file named *.json or *.json.gz is one JSON {nodes, edges} document, else a CSV."""
    return name.endswith((".json", ".json.gz"))


# stored share of pairs at the default signal floors, for pod sizing: the signal index reports
# it (`stored_fraction`); measured 0.176 on the bundled sample with CPU annotations and
# 0.11-0.13 on the scale rehearsal's synthetic ones (perf/scale.py), so the default takes
# the larger. At 5% a 70K corpus in 4 shards was sized at 4 GiB and its first shard peaked at
# 4.52 GB.
DEFAULT_STORED_FRACTION = 0.18


# The LLM tasks, as `llm.thinking`, `llm.max_tokens` and `prompts` name them.
LLMTask = Literal["topics", "summaries", "judge", "ordinal", "pointwise", "math_split", "translate"]
# the judge's budget is `tournament.judge_max_tokens`; pointwise reads P(yes) off its one token
BudgetTask = Literal["topics", "summaries", "ordinal", "math_split", "translate"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


Scalar = str | int | float | bool | None


class FieldCondition(_Strict):
    """One condition on a row's field: exactly one of equals, not_equals, in, not_in."""

    equals: Scalar = None  # the field's value is this
    not_equals: Scalar = None  # the field's value is not this
    in_: list[Scalar] | None = Field(default=None, alias="in")  # the value is one of these
    not_in: list[Scalar] | None = None  # the value is none of these

    @model_validator(mode="after")
    def _exactly_one(self) -> FieldCondition:
        if len(self.model_fields_set) != 1:
            raise ValueError("a field condition is exactly one of equals, not_equals, in, not_in")
        return self

    def holds(self, value: Scalar) -> bool:
        (kind,) = self.model_fields_set
        if kind == "equals":
            return value == self.equals
        if kind == "not_equals":
            return value != self.not_equals
        if kind == "in_":
            return value in self.in_
        return value not in self.not_in

    def describe(self) -> str:
        (kind,) = self.model_fields_set
        return f"{kind.rstrip('_')} {getattr(self, kind)!r}"


# a source's id field that is no field: the row's 0-based position in the source (the published
# documents' ids are their row indices)
ROW_NUMBER = "#row"


class SourceConfig(_Strict):
    """One corpus source: a bundled name or a JSONL/Parquet path (or a dataset folder) with a
    field mapping."""

    # the source name: the prefix of its problems' ids (`name:native_id`)
    name: str = Field(pattern=r"^[a-z0-9_\-]+$")
    bundled: str | None = None  # a bundled corpus: `math`, `olympiadbench` or `champ`
    # or a JSONL / JSONL.gz / Parquet file, or a folder: a Hugging Face dataset as
    # snapshot_download leaves it (its data/train-*.parquet shards in order, e.g.
    # SaberMath-documents) or a `saber pull` folder (its documents.parquet)
    path: str | None = None
    # the file's field names for id, problem, solution (and category); an id of `#row` numbers
    # the rows by position from 0 (the published documents' row index)
    fields: dict[str, str] | None = None
    # Higher priority wins inside a near-duplicate cluster (paper: official > NuminaMath > AoPS).
    priority: int = 0
    # Keep a deterministic sample of this many rows (by hash of native id and the pipeline seed).
    sample_size: int | None = Field(default=None, ge=1)
    # Where a source that is not bundled comes from: a build refuses with it until the file is
    # there (configs/paper.yaml names the paper's sources this way).
    obtain: str | None = None
    # Keep only the rows whose fields meet every condition (field -> {equals | not_equals | in |
    # not_in: value}), e.g. NuminaMath-1.5's olympiad, non-synthetic, valid problems; a row left
    # out is counted by the first condition it fails (the corpus's `per_source` metadata)
    where: dict[str, FieldCondition] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_origin(self) -> SourceConfig:
        if (self.bundled is None) == (self.path is None):
            raise ValueError(f"source {self.name!r}: give exactly one of 'bundled' or 'path'")
        if self.bundled is not None and self.bundled not in BUNDLED_SOURCES:
            raise ValueError(
                f"source {self.name!r}: unknown bundled source {self.bundled!r} "
                f"(bundled: {sorted(BUNDLED_SOURCES)})"
            )
        if self.path is not None and not self.fields:
            raise ValueError(f"source {self.name!r}: a 'path' source needs a 'fields' mapping")
        mapping = self.field_mapping()
        missing = {"id", "problem", "solution"} - set(mapping)
        if missing:
            raise ValueError(f"source {self.name!r}: field mapping lacks {sorted(missing)}")
        return self

    def field_mapping(self) -> dict[str, str]:
        base = dict(BUNDLED_SOURCES[self.bundled][1]) if self.bundled else {}
        base.update(self.fields or {})
        return base

    def file(self) -> Path:
        if self.bundled:
            return DATA_DIR / BUNDLED_SOURCES[self.bundled][0]
        path = Path(self.path).expanduser()
        return path if path.is_absolute() else REPO_ROOT / path


class DedupConfig(_Strict):
    # off for a corpus deduplicated already (the published documents are the paper's corpus
    # after its deduplication: a second pass would drop rows the paper kept)
    enabled: bool = True
    n_grams: int = Field(default=5, ge=1)  # MinHash shingles: word n-grams of the statement
    # LSH bands (with hashes_per_bucket: ≈ 0.72 Jaccard threshold)
    num_buckets: int = Field(default=14, ge=1)
    hashes_per_bucket: int = Field(default=8, ge=1)  # hashes per LSH band
    seed: int = 1  # the MinHash permutations' seed


class CorpusConfig(_Strict):
    sources: list[SourceConfig]
    # Size caps: a 5 MB "problem" is a broken row, not a problem.
    max_problem_chars: int = 20_000
    max_solution_chars: int = 50_000
    dedup: DedupConfig = DedupConfig()

    @model_validator(mode="after")
    def _unique_names(self) -> CorpusConfig:
        names = [s.name for s in self.sources]
        if len(names) != len(set(names)):
            raise ValueError(f"corpus.sources: duplicate source names in {names}")
        if not names:
            raise ValueError("corpus.sources: declare at least one source")
        return self


# a tree row costs about 700 bytes in memory
MAX_TREE_NODES = 2_000_000


class OntologyConfig(_Strict):
    bundled: str | None = "mathworld"  # a bundled ontology (`mathworld`)
    # A nested tree JSON, or a DAG as nodes+edges (CSV pair or one JSON {"nodes":…, "edges":…}).
    path: str | None = None
    nodes: str | None = None
    edges: str | None = None
    # First-level node (id, url or title) -> domain name, or "first_level" (each first-level node
    # is a domain named by its title). Default: MathWorld's five domains for the bundled
    # ontology, "first_level" for any other (saber_assets/ontology/domains.py).
    domains: dict[str, str] | Literal["first_level"] | None = None
    # the DAG -> tree expansion copies a topic once per root path, which diamonds multiply: a
    # larger tree is refused with its size (MathWorld's is 17,022 nodes)
    max_tree_nodes: int = Field(default=MAX_TREE_NODES, ge=1)

    @model_validator(mode="after")
    def _one_origin(self) -> OntologyConfig:
        given = [x for x in (self.path, self.nodes) if x]
        if given:
            self.bundled = None
        json_nodes = bool(self.nodes) and is_json_nodes(self.nodes)
        if self.nodes and not self.edges and not json_nodes:
            raise ValueError("ontology: a CSV 'nodes' file needs an 'edges' file")
        if json_nodes and self.edges:
            raise ValueError("ontology: a JSON 'nodes' file carries its own edges; drop 'edges'")
        if self.bundled and self.bundled not in BUNDLED_ONTOLOGIES:
            raise ValueError(f"ontology: unknown bundled ontology {self.bundled!r}")
        if not self.bundled and not given:
            raise ValueError("ontology: give 'bundled', 'path' or 'nodes'+'edges'")
        return self


class LLMConfig(_Strict):
    """Which LLM serves the tasks. `cpu` (default) needs none: deterministic CPU stand-ins."""

    # synthetic: hash-drawn topics and summaries for scale rehearsals (perf/scale.py), the
    # CPU pair judge; never a benchmark to publish
    backend: Literal["cpu", "vllm", "openai", "synthetic"] = "cpu"
    model: str = "cpu"
    base_url: str = "http://127.0.0.1:8000/v1"
    # Name of the environment variable holding the API key (read through dagster.EnvVar).
    api_key_env: str | None = None
    max_concurrency: int = Field(default=8, ge=1)
    max_retries: int = Field(default=4, ge=0)
    timeout_s: float = Field(default=120.0, gt=0)
    # the first retry's wait (doubled per retry, jittered; at least what a Retry-After asks)
    backoff_s: float = Field(default=1.0, gt=0)
    json_mode: Literal["json_schema", "structured_outputs", "none"] = "json_schema"
    # How the server takes constrained output (JSON schemas, a fixed set of answers): vllm
    # (`structured_outputs`), llama.cpp (`response_format` + a GBNF `grammar`), openai (hosted
    # APIs: `response_format` only), or auto: asked once of the server's GET /models.
    server: Literal["auto", "openai", "vllm", "llama.cpp"] = "auto"
    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    # the in-process engine's context length; null: the model's own. It must hold the longest
    # judge prompt plus twice judge_max_tokens (`saber cost` prints what the corpus needs)
    max_model_len: int | None = None
    # A reasoning model (Qwen3 thinks by default) per task: "on" or "off"; a task absent keeps
    # the model's default, and the `judge` default follows its prompt (the paper prompt asks
    # for reasoning: on; the direct one for an immediate digit: off). `thinking_switch` is how
    # the switch reaches the model: Qwen3-style chat templates read `chat_template_kwargs`;
    # "none" (default) sends nothing, for a model without the switch.
    thinking: dict[LLMTask, Literal["on", "off"]] = Field(default_factory=dict)
    thinking_switch: Literal["none", "chat_template_kwargs"] = "none"
    # Output budget per task, in tokens; absent: the task's default, sized for a model that
    # answers at once (topics 64 + 24 per topic, summaries 384, ordinal 2048, ...). A reasoning
    # model (GPT-OSS, Qwen3 thinking) needs its reasoning on top: e.g. 4096. A cut-off answer is
    # retried once with twice the budget. The judge's is tournament.judge_max_tokens.
    max_tokens: dict[BudgetTask, int] = Field(default_factory=dict)
    # Decoding per task where it is not saber's (temperature 0, no reasoning effort, the
    # template's system line). The reference judges at temperature 1.0 with reasoning_effort
    # high and the system line "You are a helpful expert." (configs/paper.yaml). The effort is
    # sent as the OpenAI API's `reasoning_effort` (vLLM's server takes it; llama.cpp and the
    # in-process engine: as a chat-template kwarg, which GPT-OSS templates read).
    temperature: dict[LLMTask, float] = Field(default_factory=dict)
    reasoning_effort: dict[LLMTask, Literal["low", "medium", "high"]] = Field(default_factory=dict)
    system_prompt: dict[LLMTask, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _positive_budgets(self) -> LLMConfig:
        bad = {k: v for k, v in self.max_tokens.items() if v < 1}
        if bad:
            raise ValueError(f"llm.max_tokens must be >= 1 token: {bad}")
        return self

    @property
    def judge_backend(self) -> str:
        """Who judges the tournament: the synthetic backend annotates but judges on the CPU."""
        return "cpu" if self.backend == "synthetic" else self.backend


class AnnotationConfig(_Strict):
    # a child topic is kept when its normalised score is at least τ
    tau: float = Field(default=0.85, ge=0, le=1)
    # Static partitions over problem-id hash buckets: a failure loses only its chunk.
    chunks: int = Field(default=4, ge=1, le=1024)
    # Unparseable answers are retried this many times, then stored as failures with the raw text.
    max_parse_retries: int = Field(default=2, ge=0)
    # Min–max rescale each request's topic scores before τ (the paper's text); false compares
    # the scores as the model gave them (the reference code's)
    rescale_scores: bool = True
    # A core idea over 30 words is a bad answer (retried, then a failure), as the paper's prompt
    # asks; false keeps any length, as the reference code does
    core_idea_word_cap: bool = True
    # How answers are read: `strict` (saber's: the topics under "scores", every label and no
    # other; the five summary fields) or `reference` (the reference code's, which reads the
    # paper's appendix formats: a top-level object with any subset of the labels, a missing one
    # scoring 0, others ignored; a summary's `coreIdea`, none unless `noCoreIdea` is false)
    answer_format: Literal["strict", "reference"] = "strict"


class SignalConfig(_Strict):
    """Pair-signal computation: row-block shards, storage floors, histogram bins."""

    # rows of the pair matrix one shard partition computes
    rows_per_shard: int = Field(default=512, ge=64)
    # Static partition count; the last shard also takes every row past shards * rows_per_shard.
    shards: int = Field(default=4, ge=1, le=4096)
    # The lowest thresholds a derivation considers: from one quantum below these up, i.e.
    # >= 0.498 / 0.196 with these defaults, so the paper's 0.858 / 0.211 are reachable. The
    # shards store only pairs with topic or summary at or above the floors pair_signal_bounds
    # derives from the candidates section (never below these).
    floor_topic: float = Field(default=0.5, ge=0, le=1)
    floor_summary: float = Field(default=0.2, ge=0, le=1)
    # Bins of the per-shard 2-D histograms (the index's plot); thresholds use the exact pairs.
    hist_bins: int = Field(default=16, ge=2, le=64)
    # Bins per signal of the first pass's per-row histograms (pair_signal_bounds): finer bins
    # bound the thresholds closer (fewer pairs stored) for n × bins² × 4 bytes per thread.
    bound_bins: int = Field(default=16, ge=2, le=64)
    # false: store every pair from floor_topic / floor_summary up, no first pass (the store
    # before the bounds; the thresholds and candidates are the same either way)
    bound_floors: bool = True
    # Kernel threads per shard run (the kernel releases the GIL): 2 uses both cores of this box.
    threads: int = Field(default=2, ge=1, le=256)
    # Lin uses the IC of the first computation, so appended problems never invalidate shards.
    freeze_ic: bool = True
    # What an annotation is when IC counts them: a problem's most specific topics (the paper's
    # wording), or every node its traversal accepted, ancestors included (the reference code's,
    # with which the published thresholds were computed: configs/paper.yaml)
    ic_counts: Literal["most_specific", "all_accepted"] = "most_specific"
    # What the shards keep: `pairs`, every pair at or above the floors (read by the thresholds
    # and the candidates); or `summaries`, each row's viability summary (two bytes per topic
    # threshold: which summary thresholds leave it K candidates in each group) from a pass over
    # full rows, the chosen queries' rows computed again for their candidates (no stored pair;
    # twice the kernel work, a fraction of the bytes; given and percentile thresholds are
    # counted over the pairs computed again, each once)
    layout: Literal["pairs", "summaries"] = "pairs"
    # Memory for the threshold sweep's gathered pairs (both directions of a group of rows at a
    # time, one pass over the shard files per group). None: a quarter of what this process may
    # use, at most 4 GiB.
    gather_memory_gib: float | None = Field(default=None, gt=0)


class Stratum(_Strict):
    """Queries drawn from the problems whose domain set is exactly ``domains``."""

    domains: list[str] = Field(min_length=1)  # domain names, as `ontology.domains` gives them
    count: int = Field(ge=0)  # the queries it draws


class CandidateConfig(_Strict):
    """Query viability and candidate groups (paper: Q = 150 per domain, K = 50 per group)."""

    # Q: the viable queries a domain needs at the derived thresholds
    queries_per_domain: int = Field(default=150, ge=1)
    # K: candidates drawn from each of the three groups
    candidates_per_group: int = Field(default=50, ge=1)
    # Leave problems with no topic or no core idea out of both pools (queries and candidates),
    # as the reference drops them before selection (post_process_datasets.py); false keeps them
    # with signal 0 on their missing side, where they are drawn as topic-only or summary-only.
    require_annotations: bool = True
    # Queries drawn per domain (paper: 1000 in all, 200 per domain).
    quota_per_domain: int = Field(default=200, ge=1)
    # Instead of a quota per domain: queries drawn per exact domain set, in this order (the
    # reference's final sampler: 11 strata, single-domain and two-domain). A query in two
    # domains counts in both; its tournament runs in the first of them in the ontology's order.
    # A stratum with fewer viable problems than its count draws them all, and says so.
    strata: list[Stratum] = Field(default_factory=list)
    # Instead of drawing queries: a published benchmark (a `saber pull` folder, e.g.
    # SABER-Math) whose queries found in the corpus (by normalised text, then as a MinHash
    # near-duplicate: the `published_matches` asset) are the queries, each viable one in the
    # first of its domains; its grades are compared with the rebuild's, query by query
    # (`published_grade_agreement`). The quotas and strata are then unused.
    published_queries: str | None = None
    # Given thresholds (0..1), compared exactly (sim > τ: a pair within one quantum of τ is
    # decided on its recomputed value); null derives them from the stored pairs by
    # `threshold_method`: `viability` (per domain the strictest with Q viable queries, exact at
    # 1/255) or `percentile` (the reference code's: the `percentile`-th percentile of all pair
    # similarities, over all pairs or, `percentile_scope: domain`, per domain, then the minimum).
    topic_threshold: float | None = Field(default=None, ge=0, le=1)
    summary_threshold: float | None = Field(default=None, ge=0, le=1)
    threshold_method: Literal["viability", "percentile"] = "viability"
    percentile: float = Field(default=99.0, gt=0, lt=100)
    percentile_scope: Literal["global", "domain"] = "global"
    # How a threshold given as a number (or a percentile) decides: `exact_gt`, the paper's text
    # (sim > τ, exactly), or `float16_ge`, the reference code's (float16(sim) >= float16(τ):
    # the published summary threshold 0.2106 is float16(4/19), so pairs at exactly 4/19 count)
    threshold_rule: Literal["exact_gt", "float16_ge"] = "exact_gt"


# the widest position-bias band: past it a judge that shows the first candidate 9 times in 10
# passes, and [0, 1] holds every interval, switching the check off
MAX_BIAS_BAND = (0.1, 0.9)


class TournamentConfig(_Strict):
    rounds: int = Field(default=20, ge=1)  # Swiss rounds per query
    # swiss (the paper's), adaptive (BT-closest pairs), efficient (soft judgments: P(first better)
    # as a Gaussian measurement, most-uncertain pairs next; README "Tournament policies")
    policy: Literal["swiss", "adaptive", "efficient"] = "swiss"
    # adaptive only: judge at most this many most-uncertain pairs per query and round
    adaptive_budget: int | None = Field(default=None, ge=1)
    # Bradley–Terry prior strength of `ratings.prior: choix` (choix's alpha)
    alpha: float = Field(default=0.1, gt=0)
    judge_chunk: int = Field(default=256, ge=1)  # judgments persisted after every chunk
    max_parse_retries: int = Field(default=2, ge=0)
    # LLM backends: `paper` reasons (technique profiles, comparison, tie-breakers) and ends with
    # \boxed{1|2}; `direct` answers the digit at once (cheap). The CPU backend has its own judge.
    judge_prompt: Literal["paper", "direct"] = "paper"
    # Reasoning budget of the paper judge (see `cut_off` for an answer that runs past it).
    judge_max_tokens: int = Field(default=4096, ge=16)
    # A judge's answer cut off at judge_max_tokens: `retry_doubled` asks once more with twice the
    # budget (saber's); `read_reasoning` takes the first \boxed{1|2} of its reasoning, and one
    # with none there is an unparsed answer, asked again at the same budget while
    # max_parse_retries allow (the reference's: two attempts at 50,000 tokens)
    cut_off: Literal["retry_doubled", "read_reasoning"] = "retry_doubled"
    # Which candidate of a pair is shown first: `random` (per pair, seeded) or `by_id` (the
    # smaller document number, as the reference shows the smaller document index: a corpus of
    # one source numbered by integers, the published documents, keeps its numbers; any other is
    # numbered by a hash of the id, so no source is shown first more often)
    presentation: Literal["random", "by_id"] = "random"
    # Which \boxed{} of a reasoned answer is the choice: the `last` (saber's) or the `first`
    # (the reference's); the reference also retries once (max_parse_retries: 1)
    boxed_answer: Literal["last", "first"] = "last"
    # The judgments' asset check fails (ERROR) when the 95% interval of the share of pairs won
    # by the candidate shown first lies wholly outside this band: a judge that favours a
    # position (the bundled 135M model picks the first every time) makes ratings of noise
    position_bias_band: tuple[float, float] = (0.4, 0.6)
    # Order consistency: this share of each round's pairs (seeded per pair) is judged again with
    # the other candidate shown first; the agreement is reported, the ratings do not read it.
    order_check_share: float = Field(default=0.05, ge=0, le=1)
    # Judge every pair both ways and rate by the two: agreeing answers are one win, a
    # disagreement a tie (twice the judge calls)
    both_orders: bool = False

    @model_validator(mode="after")
    def _band(self) -> TournamentConfig:
        lo, hi = self.position_bias_band
        if not MAX_BIAS_BAND[0] <= lo <= 0.5 <= hi <= MAX_BIAS_BAND[1]:
            raise ValueError(
                f"tournament.position_bias_band {list(self.position_bias_band)}: a band around "
                f"0.5 within {list(MAX_BIAS_BAND)} (a band reaching 0 or 1 holds every interval "
                "and switches the check off)"
            )
        return self


class RatingsConfig(_Strict):
    """The Bradley–Terry prior: `l2` as the published ratings were made (scikit-learn's
    LogisticRegression with `c`, no intercept), or `choix` (its alpha: `tournament.alpha`)."""

    # the Bradley–Terry fit's prior: `l2` (scikit-learn style) or `choix`
    prior: Literal["l2", "choix"] = "l2"
    c: float = Field(default=1.0, gt=0)  # the L2 prior's inverse strength (scikit-learn's C)


class ContaminationConfig(_Strict):
    """The contamination audit of the registry's declared training corpora (its MinHash at the
    corpus stage's defaults; numbers folded, so a copy with new numbers still matches)."""

    fold_numbers: bool = True  # numbers fold to 0 before matching
    n_grams: int = Field(default=5, ge=1)  # MinHash shingles: word n-grams
    num_buckets: int = Field(default=14, ge=1)  # LSH bands
    hashes_per_bucket: int = Field(default=8, ge=1)  # hashes per LSH band
    seed: int = 1  # the MinHash permutations' seed
    # a query counts as contaminated when its statement or one of its `top_candidates`
    # best-rated candidates occurs in the training corpus
    top_candidates: int = Field(default=5, ge=1)
    # a query with a rephrasing of itself among its own candidates (word 3-gram Jaccard at least
    # this, after the audit's folding) is reported; with `exclude_own_matches`, left out of the
    # leaderboard's scores
    own_match_jaccard: float = Field(default=0.5, gt=0, le=1)
    exclude_own_matches: bool = False


class BenchmarkConfig(_Strict):
    # An exchange-format directory to score (e.g. the published SABER-Math files); null = the
    # benchmark this pipeline built.
    path: str | None = None


class RetrieversConfig(_Strict):
    # the registry of retrievers to index and run (a relative path: from the repository)
    registry: str = "retrievers.yaml"
    # the settings each retriever runs in: query text → document text
    settings: list[Literal["statement-statement", "statement-full", "full-full"]] = [
        "statement-statement",
        "statement-full",
        "full-full",
    ]
    full_corpus: bool = True  # also retrieve from all documents (beyond the paper)

    def registry_path(self) -> Path:
        """The registry file; a relative path is relative to the repository."""
        p = Path(self.registry)
        return p if p.is_absolute() else REPO_ROOT / p


class LeaderboardConfig(_Strict):
    k: int = Field(default=10, ge=1)  # the cut-off of nDCG@k
    # bootstrap resamples of the queries for the CIs and rank intervals
    bootstrap_resamples: int = Field(default=1000, ge=10)
    # paired tests between systems: the randomization test's resamples (a pair near its Holm
    # threshold is drawn again with up to 1,000,000), the level (Holm-corrected)
    test_resamples: int = Field(default=10_000, ge=100)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    # tied retriever scores in nDCG: `average` (the expected DCG over the tied group's orders)
    # or `order` (the reference code's: numpy's argsort order decides), rescored from the runs'
    # stored candidate scores (no retriever runs again)
    ties: Literal["average", "order"] = "average"
    # what more judging buys: the joint bootstrap's draws per round count when the board is
    # refitted on the first r Swiss rounds (rounds_resolution.parquet, `saber cost --plan`);
    # 0: no curve
    resolution_draws: int = Field(default=200, ge=0)
    # The full-corpus track's holes (a document in a system's full-corpus top k that no
    # tournament graded) are placed on their query's scale by this many games each against
    # rated candidates spread over it, decided by the tournament's judge (`full_corpus_fill`);
    # 0: no fill, the holes only counted (judged@k, nDCG@k with holes as 0)
    fill_games: int = Field(default=8, ge=0)


class ConfigDeprecation(UserWarning):
    """A config key read from its old place: it still works, the message says where it lives."""


# keys that moved under the package they belong to: (old section, old key) -> (section, key)
MOVED_KEYS = {
    ("leaderboard", "benchmark"): ("benchmark", "path"),
    ("leaderboard", "registry"): ("retrievers", "registry"),
    ("leaderboard", "settings"): ("retrievers", "settings"),
    ("leaderboard", "full_corpus"): ("retrievers", "full_corpus"),
    ("leaderboard", "contamination"): ("contamination", None),  # the whole section
}


def moved_keys(doc: dict) -> dict:
    """``doc`` with every key of ``MOVED_KEYS`` read from its old place into its new one, each
    with a ``ConfigDeprecation`` warning naming both; a key given in both places is an error."""
    import warnings

    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    for (old_section, old_key), (section, key) in MOVED_KEYS.items():
        old = doc.get(old_section)
        if not isinstance(old, dict) or old_key not in old:
            continue
        value = old.pop(old_key)
        new = doc.setdefault(section, {})
        if not isinstance(new, dict):
            raise ValueError(f"{section}: expected a mapping, not {new!r}")
        target = f"{section}.{key}" if key else section
        if (key and key in new) or (not key and new):
            raise ValueError(f"{old_section}.{old_key} and {target} are both given: keep {target}")
        if key:
            new[key] = value
        else:
            new.update(value)
        warnings.warn(
            f"config: {old_section}.{old_key} is now {target} (the old key still reads; move it)",
            ConfigDeprecation,
            stacklevel=2,
        )
    return doc


class AnalysesConfig(_Strict):
    # A published benchmark (a `saber pull` folder) to find in the built corpus: how much of it a
    # rebuild from the sources holds (`published_benchmark_recall`)
    published_benchmark: str | None = None
    # MTEB retrieval scores to correlate with the leaderboard: CSV/Parquet with columns
    # `model` and `score`; a retriever is matched by `model_names[retriever]` or its own name
    mteb_scores: str | None = None
    model_names: dict[str, str] = Field(default_factory=dict)
    recent_models: list[str] = Field(default_factory=list)  # correlated again on their own
    # people's pairwise labels: the stores' human_labels (`saber study pull` / `import`) of
    # the pairs this benchmark rates, of one study (`human_study`, a name given at export) or of
    # all; and/or a file (`human_annotations`): CSV/Parquet with query, a, b, choice in
    # {a, b, tie}, annotator (optional shown_first), or a Label Studio JSON export of a study
    human_study: str | None = None
    human_annotations: str | None = None
    # exhaustive round-robin on a few queries (n(n-1)/2 judge calls each): opt-in
    convergence: bool = False
    convergence_queries: int = Field(default=5, ge=1)
    # math_vs_words: the registry's retrievers by name (default: all but LLM re-rankers) and the
    # settings they are tried in (the paper's: the query statement against the five best
    # candidates' problem and solution text)
    math_vs_words_retrievers: list[str] | None = None
    math_vs_words_settings: list[Literal["statement-statement", "statement-full", "full-full"]] = (
        Field(default_factory=lambda: ["statement-full"])
    )
    # `llm`: the LLM splits every query's math from its prose (the paper's formatting step;
    # template math_split, cached); `latex`: the LaTeX spans do, statements without any are
    # dropped; `auto` (default): llm with an LLM backend, latex on the CPU
    math_segmentation: Literal["auto", "latex", "llm"] = "auto"
    # judging_regimes: seeded candidate pairs judged by an ordinal (0-100) judge and a majority
    # vote of `regime_votes` pairwise draws at `regime_temperature` (a tie when the margin is
    # <= `regime_tie_margin`); 0 pairs turns the analysis off
    regime_pairs: int = Field(default=200, ge=0)
    regime_votes: int = Field(default=5, ge=1)
    regime_tie_margin: int = Field(default=1, ge=0)
    regime_temperature: float = Field(default=0.7, ge=0.0)


class SecondJudgeConfig(_Strict):
    """The second judge of the robustness check. ``auto``: on the CPU backend the evidence score
    without its topic and summary terms (the CPU judge ignores the order shown and has fixed
    weights, so another order or prompt would agree trivially), else the other presentation
    order. ``other-model`` / ``other-prompt`` ask the configured backend with ``model`` or the
    judge prompt ``prompt`` instead."""

    # which second judge (the section's doc)
    variant: Literal["auto", "other-order", "no-signals", "other-model", "other-prompt"] = "auto"
    model: str | None = None  # the model of `other-model`
    prompt: Literal["paper", "direct"] | None = None  # the judge prompt of `other-prompt`


class RobustnessConfig(_Strict):
    """How robust the leaderboard's ordering is (the `leaderboard_robustness` analysis)."""

    judge: SecondJudgeConfig = SecondJudgeConfig()
    judge_share: float = Field(default=0.1, ge=0, le=1)  # of the tournament's judgments; 0: off
    half_splits: int = Field(default=200, ge=1)  # random halves of the queries for the split-half τ


class StoresConfig(_Strict):
    """Where the LLM cache, the embedding cache and the judgments live (several writers)."""

    kind: Literal["duckdb", "postgres"] = "duckdb"  # duckdb: <outputs>/stores.duckdb
    dsn_env: str = "SABER_PG_DSN"  # postgres: the variable holding the DSN (read via EnvVar)


class StorageConfig(_Strict):
    """Where the Parquet assets go: a local folder (default: $SABER_HOME or .saber/) or an
    object-store URI (s3://bucket/prefix, gs://…; fsspec + universal-pathlib, with the
    filesystem's package installed, e.g. s3fs) so that runs on several machines share them."""

    base_uri: str | None = None  # null: the local folder; else an object-store URI


class CostConfig(_Strict):
    """`saber cost`: the throughput of one GPU serving the model, and expected answer lengths.
    Defaults are assumptions for an 8B model on one H200 under vLLM with large batches; replace
    them with your server's measured figures (vLLM /metrics)."""

    # prompt tokens one GPU reads per second
    prefill_tokens_per_s: float = Field(default=25_000, gt=0)
    # answer tokens one GPU writes per second
    decode_tokens_per_s: float = Field(default=3_000, gt=0)
    chars_per_token: float = Field(default=3.6, gt=0)  # English + LaTeX, Qwen-style tokenizers
    judge_reasoning_tokens: int = Field(default=900, ge=1)  # the paper prompt's reasoning
    summary_answer_tokens: int = Field(default=120, ge=1)  # the JSON of the paper's fields
    topic_calls_per_problem: float = Field(default=6.0, gt=0)  # when no annotations are built


class PodSize(_Strict):
    cpu: str = "1"  # CPU request (Kubernetes quantity)
    memory: str = "4Gi"  # memory request and limit (Kubernetes quantity)


class PodsConfig(_Strict):
    """Kubernetes pod requests per job (the `dagster-k8s/config` run tag; ignored by local
    launchers). Signal-shard pods are sized from `expected_problems` and `signals.*`; stages that
    only call the served model get `llm`; `jobs` overrides any job by name."""

    # the corpus size the shard pods are sized for
    expected_problems: int = Field(default=283_000, ge=1)
    # share of all pairs the signal shards store at the floors; the pair_signal_index asset
    # reports the measured `stored_fraction` of a build: set it here for the next one
    stored_fraction: float = Field(default=DEFAULT_STORED_FRACTION, gt=0, le=1)
    default: PodSize = PodSize(cpu="1", memory="4Gi")
    llm: PodSize = PodSize(cpu="500m", memory="2Gi")
    runs: PodSize = PodSize(cpu="2", memory="8Gi")  # retriever runs: indexes, embeddings
    jobs: dict[str, PodSize] = Field(default_factory=dict)


class DiscoveryEndpoint(_Strict):
    """An OpenAI-compatible inference server whose embedding models become registry entries."""

    # short, stable: part of every discovered retriever's name (`<name>--<model id slug>`)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    base_url: str  # …/v1
    api_key_env: str | None = None  # the variable holding its key (never the key itself)
    include: list[str] = Field(default_factory=lambda: ["*"])  # fnmatch patterns on model ids
    exclude: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=10.0, gt=0)
    # what a proposed entry carries besides its endpoint and model: `settings`, `full_corpus`,
    # and dense params (`long_text`, `query_prompt`, `doc_prompt`, `embedder` extras)
    template: dict[str, Any] = Field(default_factory=dict)


class DiscoveryConfig(_Strict):
    # the servers whose embedding models are proposed as entries
    endpoints: list[DiscoveryEndpoint] = Field(default_factory=list)
    # how often the discovery sensor asks the servers
    minimum_interval_seconds: int = Field(default=300, ge=30)

    @model_validator(mode="after")
    def _unique_names(self) -> DiscoveryConfig:
        names = [e.name for e in self.endpoints]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"discovery.endpoints: duplicate names {dupes}")
        return self


# A config's name is a folder under the home and part of SQL identifiers and Dagster names: a
# lower-case slug, so it can neither climb out of the home nor close a quoted string.
CONFIG_NAME = r"^[a-z0-9][a-z0-9_\-]{0,63}$"


class PipelineConfig(_Strict):
    # the benchmark's name: its outputs go under `<home>/<name>/`
    name: str = "sample"
    seed: int = 20261129  # every sampling step derives from it; recorded in metadata
    # k8s_job: a Kubernetes pod per step, sized by its asset's op tags (`pods`), so a run launched
    # from the UI gets the same pods as the build's jobs (the cluster image has dagster-k8s)
    executor: Literal["in_process", "multiprocess", "k8s_job"] = "in_process"
    corpus: CorpusConfig
    ontology: OntologyConfig = OntologyConfig()
    llm: LLMConfig = LLMConfig()
    annotations: AnnotationConfig = AnnotationConfig()
    signals: SignalConfig = SignalConfig()
    candidates: CandidateConfig = CandidateConfig()
    tournament: TournamentConfig = TournamentConfig()
    ratings: RatingsConfig = RatingsConfig()
    benchmark: BenchmarkConfig = BenchmarkConfig()
    retrievers: RetrieversConfig = RetrieversConfig()
    contamination: ContaminationConfig = ContaminationConfig()
    leaderboard: LeaderboardConfig = LeaderboardConfig()
    analyses: AnalysesConfig = AnalysesConfig()
    robustness: RobustnessConfig = RobustnessConfig()
    stores: StoresConfig = StoresConfig()
    storage: StorageConfig = StorageConfig()
    pods: PodsConfig = PodsConfig()
    cost: CostConfig = CostConfig()
    discovery: DiscoveryConfig = DiscoveryConfig()

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        if not re.fullmatch(CONFIG_NAME, name):
            raise ValueError(
                f"name {name!r} is not a safe benchmark name: use 1 to 64 lower-case letters, "
                "digits, '_' and '-', starting with a letter or digit (it names the outputs "
                "folder under the home)"
            )
        return name

    @model_validator(mode="before")
    @classmethod
    def read_moved_keys(cls, data):
        """Old keys of ``MOVED_KEYS`` read from their old place, with a deprecation message."""
        return moved_keys(data) if isinstance(data, dict) else data

    # A template file per LLM task replacing its built-in text (saber_resources/prompt_templates/;
    # README "Prompts"): YAML with system/user, or plain text (the user message).
    prompts: dict[LLMTask, str] = Field(default_factory=dict)

    def prompt_paths(self) -> dict[str, str]:
        """The configured template files, relative paths from the checkout."""
        out = {}
        for task, path in self.prompts.items():
            p = Path(path).expanduser()
            out[task] = str(p if p.is_absolute() else REPO_ROOT / p)
        return out


_ENV_REF = re.compile(r"\$\{([^}:]*)(?::-([^}]*))?\}")
# a variable whose name says it holds a secret (anywhere in the name: SABER_PGPASS, API_KEYS)
_SECRET_NAME = re.compile(r"KEY|TOKEN|PASS|PW|SECRET|DSN|CRED|AUTH|PRIVATE|COOKIE|SESSION")
# values that are secrets whatever their key: credentials in a URL, a secret as a URL
# parameter, and the shapes of the common API tokens
SECRET_VALUES = {
    "a password in a URL": re.compile(r"[a-z][a-z0-9+.\-]*://[^/@\s:]*:[^/@\s]+@", re.I),
    "a secret as a URL parameter": re.compile(
        r"[?&;](password|passwd|pwd|pass|token|access_token|api[_-]?key|key|secret|sig|signature"
        r"|auth)=[^&\s]", re.I),
    "an API key": re.compile(
        r"(?<![A-Za-z0-9])(sk-[A-Za-z0-9_\-]{12,}|hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
        r"|github_pat_[A-Za-z0-9_]{20,}|xox[abpsr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}"
        r"|glpat-[A-Za-z0-9_\-]{16,}|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,})"),
    # libpq's key-value form: host=h password=secret (quoted or not)
    "a password in a connection string": re.compile(
        r"(?<![A-Za-z0-9_])(password|passwd|sslpassword)\s*=\s*(?!\s)[^\s&]", re.I),
    "a bearer token": re.compile(r"\bBearer\s+[A-Za-z0-9\-._~+/]{8,}", re.I),
}  # fmt: skip


def secret_in(value: str) -> str | None:
    """What kind of secret ``value`` holds (``SECRET_VALUES``), or None."""
    return next((what for what, pattern in SECRET_VALUES.items() if pattern.search(value)), None)


def refuse_secret_values(raw, where: str, key: str = "") -> None:
    """Refuse a config that holds a secret as a value, naming the key: a config lands in run
    metadata, the UI and output paths; a secret belongs in the environment, named by a
    ``*_env`` key (read through EnvVar)."""
    if isinstance(raw, dict):
        for k, v in raw.items():
            here = f"{key}.{k}" if key else str(k)
            # a key is written out as a value is (a domain's title, a filter's column)
            if what := secret_in(str(k)):
                raise ValueError(
                    f"invalid config {where}: a key under {key or 'the top'} holds {what}, which "
                    "would be written into metadata and paths; a secret belongs in the "
                    "environment, named by the section's *_env key (api_key_env, dsn_env)"
                )
            if _ENV_REF.search(str(k)):
                raise ValueError(
                    f"invalid config {where}: a key under {key or 'the top'} names a variable "
                    "(${...}); only values are expanded, and a key is written out as it stands"
                )
            refuse_secret_values(v, where, here)
    elif isinstance(raw, list):
        for i, v in enumerate(raw):
            refuse_secret_values(v, where, f"{key}[{i}]")
    elif isinstance(raw, str) and (what := secret_in(raw)):
        raise ValueError(
            f"invalid config {where}: {key} holds {what}, which would be written into metadata "
            "and paths; put the secret in an environment variable and name it with the "
            "section's *_env key (api_key_env, dsn_env)"
        )


def secret_variables(raw) -> set[str]:
    """The variables a config names as holding secrets (its ``*_env`` keys' values)."""
    found: set[str] = set()
    if isinstance(raw, dict):
        for key, value in raw.items():
            if str(key).endswith("_env") and isinstance(value, str):
                found.add(value)
            found |= secret_variables(value)
    elif isinstance(raw, list):
        for value in raw:
            found |= secret_variables(value)
    return found


def expand_env(value, where: str, secrets: frozenset[str] = frozenset()):
    """``${SABER_NAME}`` / ``${SABER_NAME:-default}`` in string values, from the environment.
    Only ``SABER_*`` variables, and never one that holds a secret (named like a key, token or
    DSN, or named by a ``*_env`` key; a secret-shaped value is refused after expansion): a
    config lands in run metadata and output paths, so secrets stay behind the ``*_env`` keys
    (read through EnvVar)."""
    if isinstance(value, dict):
        return {k: expand_env(v, where, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, where, secrets) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if not re.fullmatch(r"SABER_[A-Z0-9_]+", name):
            raise ValueError(
                f"invalid config {where}: ${{{name}}}: only SABER_* variables may be expanded "
                "(secrets go through the *_env keys)"
            )
        if name in secrets or _SECRET_NAME.search(name.removeprefix("SABER_")):
            raise ValueError(
                f"invalid config {where}: ${{{name}}} holds a secret and would be written into "
                "metadata and paths; secrets are read only through the *_env keys"
            )
        got = os.environ.get(name)
        if got is None and default is None:
            raise ValueError(f"invalid config {where}: ${{{name}}} is not set and has no default")
        # a secret-shaped value is refused after expansion with every other value, naming its
        # key (``refuse_secret_values``)
        return got if got is not None else default

    return _ENV_REF.sub(sub, value)


def read_raw_config(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A config file's mapping; ``extends: OTHER.yaml`` (relative to the file) starts from that
    config's, each section merged key by key and anything else (a list, a value) replaced."""
    if not path.exists():
        raise FileNotFoundError(f"config file not found: {path}")
    if path.resolve() in seen:
        chain = " -> ".join(str(p) for p in (*seen, path.resolve()))
        raise ValueError(f"config {path}: `extends` runs in a circle: {chain}")
    raw = read_yaml(path, f"config {path}") or {}
    if not isinstance(raw, dict):
        raise ValueError(
            f"config {path}: a mapping of sections is needed, not {type(raw).__name__}"
        )
    base = raw.pop("extends", None)
    if base is None:
        return raw
    if not isinstance(base, str):
        raise ValueError(f"config {path}: `extends` names one config file, not {base!r}")
    return merged(read_raw_config(path.parent / base, (*seen, path.resolve())), raw)


def merged(base: dict, over: dict) -> dict:
    """``over`` on top of ``base``: mappings merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if both else value
    return out


def load_config(path: str | os.PathLike | None = None) -> PipelineConfig:
    """Read and validate a pipeline config; errors name the file and the offending key."""
    path = Path(path) if path else DEFAULT_CONFIG
    raw = read_raw_config(path)
    raw = expand_env(raw, str(path), frozenset(secret_variables(raw)))
    refuse_secret_values(raw, str(path))
    try:
        return PipelineConfig.model_validate(raw)
    except Exception as exc:  # pydantic's message lists every bad key
        raise ValueError(f"invalid config {path}:\n{exc}") from None
