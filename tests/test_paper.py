"""Standing on the published benchmark: the paper's roster as a registry, its baselines as the
reference code ran them, the reference evaluation's protocol, and the comparison with its tables."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from saber_assets.benchmark.data import QUERY_SCHEMA, Benchmark
from saber_assets.cli import main
from saber_assets.leaderboard.paper import (
    DOMAIN_CI_NOTE,
    apply_protocol,
    compare,
    disagreements,
    domain_cells,
    paper_figures,
)
from saber_assets.leaderboard.scores import score_table
from saber_assets.retrievers.base import RetrieverFailed
from saber_assets.retrievers.lexical import BM25Retriever, TfidfRetriever
from saber_assets.retrievers.registry import (
    build_retriever,
    load_registry,
    unavailable_reason,
)
from saber_assets.retrievers.tokenize import sklearn_tokens, whitespace_tokens
from saber_assets.runs.evaluate import evaluate
from saber_assets.stages import STAGES

REPO = Path(__file__).resolve().parent.parent
ROSTER = REPO / "data" / "reference" / "saber_math_paper_roster.csv"
PAPER_REGISTRY = REPO / "retrievers.paper.yaml"


# ----------------------------------------------------------------------------- the roster


def test_paper_registry_is_the_roster_with_the_reference_protocol():
    entries = load_registry(PAPER_REGISTRY)
    roster = {r["system"]: r for r in csv.DictReader(ROSTER.open())}
    reference = [e for e in entries if not e.opt_in]
    assert sorted(e.meta.paper_system for e in reference) == sorted(roster)  # 25, once each
    assert len(reference) == 25
    for e in reference:
        r = roster[e.meta.paper_system]
        assert e.meta.variant == "reference" and e.meta.revision is None
        assert e.meta.access == r["access"] and e.full_corpus is False
        p = e.params
        if e.kind == "dense":
            assert p["model"] == r["model_id"] == e.meta.model_id
            # no instruction or prefix, except the Jina v5 models' default 'Document: ' prompt
            prompts = (p.get("query_prompt", ""), p.get("doc_prompt", ""))
            want = ("Document: ", "Document: ") if "jina" in r["model_id"] else ("", "")
            assert prompts == want, e.name
            # chunk-and-average only where the reference did it
            lt = p.get("long_text", "average")
            if "averaged" in r["length_handling"]:
                assert lt == "average", e.name
                assert p["window_pooling"] == "raw", e.name  # unnormalised windows, averaged
            elif "truncated" in r["length_handling"]:
                assert lt == "truncate", e.name
            elif r["runner_in_reference_code"] != "gemini-api":
                assert lt == "whole", e.name
    by = {e.meta.paper_system: e for e in reference}
    assert by["BM25"].params == {"tokenizer": "whitespace", "method": "rank_bm25", "k1": 1.5,
                                 "b": 0.75, "epsilon": 0.25}  # fmt: skip
    assert by["TF-IDF"].params == {"tokenizer": "sklearn", "sublinear_tf": False}
    assert by["Jaccard"].params == {"tokenizer": "whitespace"}
    assert by["Approach Zero"].params == {"candidates": "own-index", "query": "reference",
                                          "skip": "reference"}  # fmt: skip
    # the vendors' prompts are a second, opt-in variant, named so
    vendor = [e for e in entries if e.opt_in]
    assert vendor and all(e.name.endswith("-vendor-prompts") for e in vendor)
    assert all(e.meta.variant == "vendor-prompts" for e in vendor)
    e5 = next(e for e in vendor if "e5" in e.name)
    assert (e5.params["query_prompt"], e5.params["doc_prompt"]) == ("query: ", "passage: ")


def test_unavailable_backends_are_named_not_crashed(monkeypatch):
    entries = load_registry(PAPER_REGISTRY)
    by = {e.name: e for e in entries}
    assert "Gemini" in unavailable_reason(by["gemini-embedding-2"], entries)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert unavailable_reason(by["text-embedding-3-large"], entries) == (
        "no OPENAI_API_KEY in the environment"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert unavailable_reason(by["text-embedding-3-large"], entries) is None
    for name in ("bm25-okapi", "tf-idf", "jaccard-whitespace", "approach-zero"):
        assert unavailable_reason(by[name], entries) is None


# ------------------------------------------------------------------ baselines as the reference


def test_reference_tokenizers():
    text = "Let $x^2+y=3$, so X is A b."
    assert whitespace_tokens(text) == ["let", "$x^2+y=3$,", "so", "x", "is", "a", "b."]
    # scikit-learn's default analyzer: words of two or more word characters
    from sklearn.feature_extraction.text import TfidfVectorizer

    assert sklearn_tokens(text) == TfidfVectorizer().build_analyzer()(text)


def _okapi(query: list[str], docs: list[list[str]], k1=1.5, b=0.75, eps=0.25) -> list[float]:
    """BM25 Okapi written out: IDF ln((N − df + .5)/(df + .5)), a negative one floored at
    ε × the mean IDF over the vocabulary."""
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    vocab = sorted({t for d in docs for t in d})
    idf = {t: math.log(n - sum(t in d for d in docs) + 0.5) - math.log(sum(t in d for d in docs) + 0.5) for t in vocab}  # fmt: skip
    floor = eps * (sum(idf.values()) / len(idf))
    idf = {t: (v if v >= 0 else floor) for t, v in idf.items()}
    out = []
    for d in docs:
        s = 0.0
        for t in query:
            tf = d.count(t)
            s += idf.get(t, 0.0) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
        out.append(s)
    return out


def test_bm25_okapi_is_rank_bm25_and_not_bm25s():
    docs = ["the prime p divides n", "the prime square", "the circle", "the sum of the primes",
            "THE prime prime"]  # fmt: skip
    q = "the prime prime n"
    r = BM25Retriever("b", tokenizer="whitespace", method="rank_bm25")
    got = r.score(q, docs)
    # "the" is in all five documents: a negative IDF, floored at 0.25 × the mean
    want = _okapi(q.split(), [d.lower().split() for d in docs])
    assert np.allclose(got, want, rtol=1e-12, atol=0)
    lucene = BM25Retriever("b", tokenizer="whitespace").score(q, docs)
    assert not np.allclose(got, lucene)  # a different BM25: named apart
    assert r.score("", docs).tolist() == [0.0] * 5  # no query terms: zeros, as the reference


def test_tfidf_defaults_are_the_reference_pipeline():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    docs = ["Find the sum of the primes below 10.", "Sum sum sum of squares.", "A circle.",
            "Primes and squares: the sum."]  # fmt: skip
    q = "sum of primes"
    vec = TfidfVectorizer()
    d = vec.fit_transform(docs)
    want = cosine_similarity(vec.transform([q]), d)[0]
    got = TfidfRetriever("t", tokenizer="sklearn", sublinear_tf=False).score(q, docs)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-15)
    sub = TfidfRetriever("t", tokenizer="sklearn").score(q, docs)
    assert not np.allclose(sub, want)  # sublinear tf is another weighting


# ----------------------------------------------------------------- the reference's protocol


def _two_query_bench() -> Benchmark:
    docs = pl.DataFrame({"id": [f"d{i}" for i in range(6)], "problem": [f"p{i}" for i in range(6)],
                         "solution": [f"s{i}" for i in range(6)]})  # fmt: skip
    queries = pl.DataFrame(
        [
            {"id": "q0", "problem": "tied", "solution": "", "candidates": [0, 1, 2, 3],
             "relevance_scores": [0.0, 1.0, 4.0, 2.0], "domains": ["A"]},
            {"id": "q1", "problem": "fails", "solution": "", "candidates": [4, 5],
             "relevance_scores": [5.0, 0.0], "domains": ["A"]},
        ],
        schema=QUERY_SCHEMA,
    )  # fmt: skip
    return Benchmark(queries, docs, {"domains": ["A"]})


class TiesAndFailure:
    """Query "tied": the first three candidates tie above the fourth; query "fails": fails."""

    name = "ties"

    def score(self, query, docs):
        if query == "fails":
            raise RetrieverFailed("the engine crashed")
        return np.array([1.0, 1.0, 1.0, 0.0])


def _dcg(gains):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def test_reference_protocol_differs_exactly_on_tied_scores_and_scores_a_failure_as_zero():
    bench = _two_query_bench()
    runs = evaluate(TiesAndFailure(), bench, "statement-statement", 10, full_corpus=False)
    g = [2**r - 1 for r in (0.0, 1.0, 4.0, 2.0)]  # 0, 1, 15, 3
    idcg = _dcg(sorted(g, reverse=True))
    # saber: the three tied candidates share their mean gain over ranks 1-3; the failure counts 0
    tied = sum(g[:3]) / 3
    saber_q0 = (_dcg([tied, tied, tied]) + g[3] / math.log2(5)) / idcg
    # reference: numpy.argsort(-scores) keeps the tie in listed order (0, 1, 2); the engine's
    # failure scores 0 there too (only the reference's md5 list is left out: RetrieverSkipped)
    ref_q0 = _dcg([g[0], g[1], g[2], g[3]]) / idcg
    assert np.argsort(-np.array([1.0, 1.0, 1.0, 0.0])).tolist() == [0, 1, 2, 3]
    relevance = dict(
        zip(bench.queries["id"], bench.queries["relevance_scores"].to_list(), strict=True)
    )
    ours = score_table(runs, ["A"], 50, 0)
    ref = score_table(apply_protocol(runs, relevance, 10, "reference"), ["A"], 50, 0)
    assert ours["ndcg@10"][0] == pytest.approx((saber_q0 + 0.0) / 2, abs=1e-12)
    assert ref["ndcg@10"][0] == pytest.approx((ref_q0 + 0.0) / 2, abs=1e-12)
    assert ours["failed"][0] == ref["failed"][0] == 1  # still counted
    assert ref_q0 != pytest.approx(saber_q0)  # the two differences are each real
    # saber's own protocol is left as it is
    assert apply_protocol(runs, relevance, 10, "saber") is runs
    with pytest.raises(ValueError, match="--protocol"):
        apply_protocol(runs, relevance, 10, "trec")


# ------------------------------------------------------------------- beside the paper's tables


def test_paper_figures_and_their_disagreements():
    fig = paper_figures()
    assert fig.height == 650
    assert set(fig["table"]) == {"main", "ci", "additional"}
    d = disagreements(fig)
    assert d.height == 28  # the README's count
    az = d.filter((pl.col("system") == "Approach Zero") & (pl.col("setting") == "statement-full")
                  & (pl.col("domain") == "Overall"))  # fmt: skip
    assert (az["low"][0], az["high"][0]) == (0.446, 0.468)


def test_compare_puts_ours_beside_the_paper_and_flags_what_it_cannot_match():
    fig = paper_figures()
    ours = pl.DataFrame(
        {
            "system": ["BM25", "BM25", "Approach Zero", "my-model"],
            "setting": ["statement-full", "statement-full", "statement-full", "statement-full"],
            "domain": ["Overall", "NumberTheory", "Overall", "Overall"],
            "ours": [0.5, 0.1, 0.45, 0.7],
        }
    )
    main_t = compare(ours, fig, "main")
    bm25 = fig.filter((pl.col("table") == "main") & (pl.col("system") == "BM25")
                      & (pl.col("setting") == "statement-full"))  # fmt: skip
    paper_overall = bm25.filter(pl.col("domain") == "Overall")["ndcg10"][0]
    paper_nt = bm25.filter(pl.col("domain") == "Number Theory")["ndcg10"][0]
    rows = {(r["system"], r["domain"]): r for r in main_t.iter_rows(named=True)}
    assert rows[("BM25", "Overall")]["paper"] == paper_overall
    assert rows[("BM25", "Overall")]["diff"] == pytest.approx(0.5 - paper_overall)
    # MathWorld's ids match the paper's titles ("NumberTheory" = "Number Theory")
    assert rows[("BM25", "NumberTheory")]["paper"] == paper_nt
    assert rows[("BM25", "Overall")]["in_paper_ci"] is None  # Table 1 has no intervals
    assert rows[("Approach Zero", "Overall")]["flag"].startswith("paper disagrees with itself")
    assert rows[("my-model", "Overall")]["flag"] == "not in this table"
    ci_t = compare(ours, fig, "ci")
    ci = fig.filter((pl.col("table") == "ci") & (pl.col("system") == "BM25")
                    & (pl.col("domain") == "Overall"))  # fmt: skip
    lo, hi = ci["ndcg10"][0] - ci["ci_minus"][0], ci["ndcg10"][0] + ci["ci_plus"][0]
    inside = ci_t.filter((pl.col("system") == "BM25") & (pl.col("domain") == "Overall"))
    assert inside["in_paper_ci"][0] == (lo <= 0.5 <= hi) and inside["flag"][0] == ""
    # a domain's interval is beside a note: it was drawn from more queries than the domain holds
    nt = ci_t.filter((pl.col("system") == "BM25") & (pl.col("domain") == "NumberTheory"))
    assert nt["flag"][0].endswith(DOMAIN_CI_NOTE) and nt["in_paper_ci"][0] is not None
    assert DOMAIN_CI_NOTE not in main_t["flag"].to_list()
    with pytest.raises(ValueError, match="--table"):
        compare(ours, fig, "nope")


def sample_benchmark(n_queries: int = 12, n_cands: int = 30, seed: int = 0) -> Benchmark:
    """Real problems from the bundled MATH sample, with seeded ratings: a small benchmark in the
    exchange format that is not the published one."""
    import gzip

    path = REPO / "data" / "corpora" / "math.jsonl.gz"
    rows = []
    with gzip.open(path, "rt") as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) >= 200:
                break
    docs = pl.DataFrame({"id": [r["id"] for r in rows], "problem": [r["problem"] for r in rows],
                         "solution": [r["solution"] for r in rows]})  # fmt: skip
    rng = np.random.default_rng(seed)
    doms = ["Algebra", "Geometry", "NumberTheory", "Combinatorics", "CalculusandAnalysis"]
    q = []
    for i in range(n_queries):
        cands = rng.choice(np.arange(n_queries, len(rows)), n_cands, replace=False).tolist()
        q.append({"id": rows[i]["id"], "problem": rows[i]["problem"], "solution": rows[i]["solution"],
                  "candidates": cands, "relevance_scores": rng.uniform(0, 5, n_cands).round(3).tolist(),
                  "domains": [doms[i % 5]]})  # fmt: skip
    return Benchmark(
        pl.DataFrame(q, schema=QUERY_SCHEMA), docs, {"name": "sample", "domains": doms}
    )


def test_compare_paper_runs_the_roster_that_can_run_here(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SABER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    bench_dir = sample_benchmark().write(tmp_path / "bench")
    rc = main(["evaluate", "--registry", str(PAPER_REGISTRY), "--compare-paper", "--benchmark",
               str(bench_dir), "--resamples", "50"])  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "4 retrievers ran, 28 did not" in out
    assert "not run: text-embedding-3-large: no OPENAI_API_KEY in the environment" in out
    assert "not run: qwen3-embedding-0.6b-vendor-prompts: an opt-in variant" in out
    assert "this benchmark is not the published SABER-Math" in out
    # every runnable system, every setting, Overall and each domain, beside the paper's figure
    lines = [
        ln
        for ln in out.splitlines()
        if ln.startswith("  BM25 ") or ln.startswith("  Approach Zero ")
    ]
    assert len(lines) == 2 * 3 * 6
    assert any("paper disagrees with itself" in ln for ln in lines if "Approach Zero" in ln)
    rc = main(["evaluate", "--registry", str(PAPER_REGISTRY), "--compare-paper", "--benchmark",
               str(bench_dir), "--resamples", "50", "--json", "--protocol", "reference",
               "--table", "additional", "--setting", "full-full"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert data["protocol"] == "reference" and len(data["retrievers"]) == 4
    cells = [c for c in data["compare_paper"] if c["system"] == "TF-IDF"]
    assert {c["domain"] for c in cells} == {"Overall", "Algebra", "Geometry", "NumberTheory",
                                            "Combinatorics", "CalculusandAnalysis"}  # fmt: skip
    assert all(c["paper"] is not None for c in cells if c["domain"] != "Overall")


def test_a_named_unavailable_entry_is_refused_with_its_reason(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SABER_HOME", str(tmp_path / "home"))
    bench_dir = sample_benchmark(4, 10).write(tmp_path / "bench")
    rc = main(["evaluate", "bge-m3", "--registry", str(PAPER_REGISTRY), "--benchmark",
               str(bench_dir)])  # fmt: skip
    assert rc == 2
    assert "'bge-m3' cannot run here: vLLM is not installed" in capsys.readouterr().err


def test_paper_lexical_entries_score_like_the_reference_processors():
    """bm25-okapi, tf-idf and jaccard-whitespace of the paper registry give the reference
    processors' scores on real problems (rank_bm25, scikit-learn defaults, whitespace sets)."""
    from rank_bm25 import BM25Okapi
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    bench = sample_benchmark(3, 20)
    entries = {e.name: e for e in load_registry(PAPER_REGISTRY)}
    for qid, prob, cands in bench.queries.select("id", "problem", "candidates").iter_rows():
        docs = [
            f"Problem: {p}\n\nSolution: {s}"
            for p, s in bench.documents[cands].select("problem", "solution").iter_rows()
        ]
        bm = BM25Okapi([d.lower().split() for d in docs]).get_scores(prob.lower().split())
        got = build_retriever(entries["bm25-okapi"]).score(prob, docs)
        assert np.allclose(got, bm, rtol=1e-12, atol=0), qid
        vec = TfidfVectorizer()
        dv = vec.fit_transform(docs)
        tf = cosine_similarity(vec.transform([prob]), dv)[0]
        assert np.allclose(build_retriever(entries["tf-idf"]).score(prob, docs), tf, atol=1e-12)
        qs = set(prob.lower().split())
        jac = [len(qs & set(d.lower().split())) / len(qs | set(d.lower().split())) for d in docs]
        assert build_retriever(entries["jaccard-whitespace"]).score(prob, docs).tolist() == jac


def test_domain_cells_is_overall_and_each_domain():
    rep = pl.DataFrame({"setting": ["statement-full"], "ndcg@10": [0.5], "A": [0.4],
                        "B": [float("nan")]})  # fmt: skip
    cells = domain_cells(rep, "sys", ["A", "B"])
    assert cells.rows() == [("sys", "statement-full", "Overall", 0.5),
                            ("sys", "statement-full", "A", 0.4),
                            ("sys", "statement-full", "B", None)]  # fmt: skip


def test_a_build_on_the_paper_registry_leaves_out_what_cannot_run_here(monkeypatch):
    from saber_assets.orchestration.plan import runnable_entries

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    entries = load_registry(PAPER_REGISTRY)
    said: list[str] = []
    names = [e.name for e in runnable_entries(entries, said.append)]
    assert names == ["approach-zero", "tf-idf", "jaccard-whitespace", "bm25-okapi"]
    out = "\n".join(said)
    assert "retriever bge-m3 not built: vLLM is not installed" in out
    assert (
        "retriever e5-vendor" not in out
        and "multilingual-e5-large-vendor-prompts not built: an opt-in variant" in out
    )
    assert runnable_entries(entries) and len(said) == len(set(said))  # silent unless asked


def test_math_vs_words_tries_an_entry_only_where_the_leaderboard_runs_it():
    """The default registry limits e5 to statements (its cost on CPU): in the analysis's
    default setting (statement-full) it is left out with that reason, not run there for the
    analysis alone; where the settings meet, it is tried; named, it is an error saying why."""
    from saber_assets.analyses.math_vs_words import choose_retrievers

    entries = load_registry()
    assert {e.name: e.settings for e in entries}["dense-e5"] == ["statement-statement"]
    chosen, not_run = choose_retrievers(entries, None, ["statement-full"])
    assert "dense-e5" not in {e.name for e in chosen} and "bm25" in {e.name for e in chosen}
    why = dict(not_run)["dense-e5"]
    assert why == "runs only in statement-statement (its registry entry), not in statement-full"
    chosen, _ = choose_retrievers(entries, None, ["statement-statement", "statement-full"])
    assert "dense-e5" in {e.name for e in chosen}
    with pytest.raises(ValueError, match=r"cannot run here: \['dense-e5 \(runs only in"):
        choose_retrievers(entries, ["dense-e5"], ["statement-full"])


def test_math_vs_words_tries_only_what_can_run_here(monkeypatch):
    """On the paper registry (most entries need a GPU or a key) the analysis takes the runnable
    entries instead of failing on the first one without its backend (found by a build)."""
    from saber_assets.analyses.math_vs_words import choose_retrievers

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    entries = load_registry(PAPER_REGISTRY)
    chosen, not_run = choose_retrievers(entries, None)
    assert [e.name for e in chosen] == [
        "approach-zero",
        "tf-idf",
        "jaccard-whitespace",
        "bm25-okapi",
    ]
    assert (
        "bge-m3",
        unavailable_reason({e.name: e for e in entries}["bge-m3"], entries),
    ) in not_run
    with pytest.raises(ValueError, match=r"cannot run here: \['bge-m3 \(vLLM is not installed"):
        choose_retrievers(entries, ["bge-m3", "tf-idf"])
    with pytest.raises(ValueError, match="not in the registry"):
        choose_retrievers(entries, ["nope"])


# ------------------------------------------------------------- the published documents as corpus


def test_a_build_on_the_published_documents_keeps_their_row_numbers(tiny_config, tmp_path):
    """The build over the published candidate pool (configs/paper-published-pool.yaml) on a
    folder shaped like SaberMath-documents, built end to end (the CPU backends): the corpus ids are the published rows in order, the benchmark's
    candidate numbers are those rows, and ``by_id`` shows the smaller row first."""
    from saber_assets.config import read_raw_config
    from saber_testing.published import published_rows, write_published_documents

    folder = write_published_documents(tmp_path / "sabermath", published_rows(330), shards=3)
    corpus = read_raw_config(REPO / "configs" / "paper-published-pool.yaml")["corpus"]
    corpus["sources"][0]["path"] = str(folder)
    tournament = {"rounds": 4, "presentation": "by_id", "order_check_share": 0}
    cfg = tiny_config(corpus=corpus, tournament=tournament)
    # up to the benchmark: the stages after it read the corpus through it
    aliases = [s.alias for s in STAGES]
    jobs = aliases[: aliases.index("benchmark") + 1]
    assert main(["build", "--config", str(cfg), *(a for j in jobs for a in ("--select", j))]) == 0
    home = tmp_path / "home" / "tiny"
    built = pl.read_parquet(home / "parquet" / "corpus.parquet")
    assert built["id"].to_list() == [f"sabermath:{k}" for k in range(330)]
    bench = Benchmark.read(home / "benchmark")
    rows = bench.documents["id"].to_list()
    numbers = [c for cands in bench.queries["candidates"] for c in cands]
    assert numbers and all(rows[c] == f"sabermath:{c}" for c in numbers)
    judged = pl.read_parquet(home / "parquet" / "tournament_judgments")
    number = pl.col("shown_first").str.split(":").list.last().cast(pl.Int64)
    smaller = pl.min_horizontal(
        *(pl.col(c).str.split(":").list.last().cast(pl.Int64) for c in ("a", "b"))
    )
    assert judged.height and judged.select((number == smaller).all()).item()


# ------------------------------------------------------------------ Approach Zero as the reference


def test_approach_zero_as_the_reference_runs_it():
    """The reference's query (every prose stretch and formula, in reading order) and its skip
    list (md5 of the query text; left out of the means, counted as skipped), from the paper
    registry's entry."""
    import hashlib

    from saber_assets.leaderboard.significance import score_matrix
    from saber_assets.retrievers.approach0 import (
        REFERENCE_SKIP,
        Approach0Retriever,
        reference_keywords,
    )

    from .test_leaderboard import toy_benchmark

    query = (
        r"Find $x$ such that $$x^2=1$$ holds, and \(y\) with \[ y+1 \] "
        r"\begin{align*}a&=b\end{align*} end."
    )
    assert reference_keywords(query) == [
        {"type": "term", "str": "Find"}, {"type": "tex", "str": "x"},
        {"type": "term", "str": "such that"}, {"type": "tex", "str": "x^2=1"},
        {"type": "term", "str": "holds, and"}, {"type": "tex", "str": "y"},
        {"type": "term", "str": "with"}, {"type": "tex", "str": "y+1"},
        {"type": "tex", "str": "a&=b"}, {"type": "term", "str": "end."},
    ]  # fmt: skip
    assert reference_keywords("a\x00b \ud800") == [{"type": "term", "str": "a b ?"}]
    entry = next(e for e in load_registry(PAPER_REGISTRY) if e.kind == "approach0")
    az = build_retriever(entry)
    assert az.query == "reference" and az.skip == REFERENCE_SKIP and len(az.skip) == 29
    # saber's own query keeps 12 words and 6 formulas; the reference's sends them all
    long = " ".join(f"word{k} $x_{{{k}}}$" for k in range(20))
    assert len(az.query_keywords(long)) == 40
    assert len(Approach0Retriever(candidates="own-index").query_keywords(long)) == 18
    # on the toy benchmark: the engine answers the reference's query (the renamed twin first)
    bench = toy_benchmark()
    run = evaluate(az, bench, "statement-statement", full_corpus=False)
    assert not run["failed"][0] and int(np.argmax(run["scores"][0].to_list())) == 3
    # a query on the skip list is not searched, and leaves the means and the paired tests
    text = bench.queries["problem"][0]
    az.skip = frozenset({hashlib.md5(text.encode()).hexdigest()})
    skipped = evaluate(az, bench, "statement-statement", full_corpus=False)
    assert skipped["failed"][0] and skipped["error"][0].startswith("skipped: md5 ")
    two = pl.concat([run, run.with_columns(pl.col("query_id") + "b")])
    mixed = pl.concat([skipped, run.with_columns(pl.col("query_id") + "b")])
    board, board_mixed = score_table(two, ["Number Theory"]), score_table(mixed, ["Number Theory"])
    assert (board["skipped"][0], board_mixed["skipped"][0], board_mixed["failed"][0]) == (0, 1, 1)
    assert board_mixed["ndcg@10"][0] == pytest.approx(run["ndcg"][0])  # the other query alone
    assert board_mixed["Number Theory queries"][0] == 1
    other = mixed.with_columns(retriever=pl.lit("a")).vstack(
        two.with_columns(retriever=pl.lit("b")).select(mixed.columns + ["retriever"])
    )
    ids, names, _ = score_matrix(other, "statement-statement")
    assert ids == ["q0b"] and names == ["a", "b"]
