"""`saber cost`: the call counts have known answers; tokens follow the real prompts."""

import pytest

from saber_assets.cli import main
from saber_assets.config import REPO_ROOT, load_config
from saber_assets.cost import build_cost, cost_table, tournament_calls


def _cfg(**tournament):
    cfg = load_config(REPO_ROOT / "configs" / "sample.yaml")
    cand = cfg.candidates.model_copy(update={"quota_per_domain": 200, "candidates_per_group": 50})
    tour = cfg.tournament.model_copy(update={"rounds": 20, **tournament})
    return cfg.model_copy(update={"candidates": cand, "tournament": tour})


def test_the_papers_tournament_is_one_and_a_half_million_calls():
    # 1000 queries (200 per domain), 150 candidates, 20 Swiss rounds of 75 pairs
    assert tournament_calls(_cfg(), n_domains=5) == 1_500_000


def test_costs_follow_the_prompts_and_scale_with_the_corpus():
    short = [("Solve $x+1=2$.", "Subtract 1.")] * 3
    long = [("Solve $x+1=2$. " * 80, "Subtract 1. " * 80)] * 3
    cfg = _cfg()
    a = {s.stage: s for s in build_cost(cfg, 1000, short, 5, 6.0)}
    b = {s.stage: s for s in build_cost(cfg, 2000, short, 5, 6.0)}
    c = {s.stage: s for s in build_cost(cfg, 1000, long, 5, 6.0)}
    topics = "annotations: topics"
    assert a[topics].calls == 6000 and b[topics].calls == 12000
    assert b[topics].prompt_tokens == pytest.approx(2 * a[topics].prompt_tokens)
    assert c[topics].prompt_tokens > 2 * a[topics].prompt_tokens  # longer problems, longer prompts
    judge = "tournament (paper judge)"
    assert a[judge].calls == b[judge].calls == 1_500_000  # the tournament does not grow with N
    direct = {s.stage: s for s in build_cost(_cfg(judge_prompt="direct"), 1000, short, 5, 6.0)}
    direct_judge = direct["tournament (direct judge)"]
    assert direct_judge.answer_tokens == 2 * 1_500_000
    assert direct_judge.prompt_tokens < a[judge].prompt_tokens  # no reasoning instructions
    table = cost_table(list(a.values()), cfg)
    assert table["stage"][-1] == "total" and table["calls"][-1] == 6000 + 1000 + 1_500_000
    with pytest.raises(ValueError, match="at least one sample"):
        build_cost(cfg, 10, [], 5)


def test_saber_cost_cli(capsys):
    assert main(["cost", "--problems", "283000"]) == 0
    out = capsys.readouterr().out
    assert "283,000 problems" in out and "gpu_hours" in out and "the paper: ≈1.5 M" in out


def test_the_paper_config_builds_from_the_sources_and_waits_for_them(capsys, tmp_path, monkeypatch):
    """configs/paper.yaml: the reference's choices on a corpus made from the paper's sources
    (not the published candidate pool), costed at what it reads beside the paper's 1.5 M judge
    calls; a build refuses before any step, naming each missing source and where to get it. The
    published-pool build extends it and changes only its corpus."""
    cfg = load_config(REPO_ROOT / "configs" / "paper.yaml")
    assert (cfg.candidates.topic_threshold, cfg.candidates.summary_threshold) == (0.8579, 0.2106)
    assert cfg.candidates.require_annotations and cfg.signals.ic_counts == "all_accepted"
    # the reference's decoding for every task it runs, and each of its choices (#66)
    assert cfg.llm.temperature == {"judge": 1.0, "topics": 1.0, "summaries": 1.0}
    assert set(cfg.llm.reasoning_effort.values()) == {"high"} and len(cfg.llm.reasoning_effort) == 3
    assert cfg.candidates.threshold_rule == "float16_ge" and len(cfg.candidates.strata) == 11
    assert sum(s.count for s in cfg.candidates.strata) == 1000
    assert (cfg.tournament.presentation, cfg.tournament.boxed_answer) == ("by_id", "first")
    assert cfg.leaderboard.ties == "order" and not cfg.annotations.rescale_scores
    assert not cfg.annotations.core_idea_word_cap
    # free text read as JSON, four attempts, as the reference's tagger and idea extractor
    assert cfg.llm.json_mode == "none" and cfg.annotations.max_parse_retries == 3
    # the corpus: the sources in the paper's priority (official > NuminaMath > AoPS), deduplicated
    assert [(s.name, s.priority) for s in cfg.corpus.sources] == [
        ("olympiadbench", 3),
        ("math", 3),
        ("numinamath", 2),
        ("aops", 1),
    ]
    assert set(cfg.corpus.sources[2].where) == {"source", "synthetic", "question_type",
                                                "problem_is_valid", "solution_is_valid"}  # fmt: skip
    assert cfg.corpus.dedup.enabled
    assert cfg.signals.shards * cfg.signals.rows_per_shard >= cfg.pods.expected_problems
    # the build over the published candidate pool: every other choice the same (`extends`)
    pool = load_config(REPO_ROOT / "configs" / "paper-published-pool.yaml")
    (published,) = pool.corpus.sources
    assert published.field_mapping()["id"] == "#row" and not pool.corpus.dedup.enabled
    assert pool.model_dump(exclude={"name", "corpus", "pods", "signals"}) == cfg.model_dump(
        exclude={"name", "corpus", "pods", "signals"}
    )
    assert pool.signals.shards * pool.signals.rows_per_shard >= 71_117
    assert cfg.tournament.judge_max_tokens == 50_000 and cfg.tournament.rounds == 20
    assert cfg.retrievers.registry == "retrievers.paper.yaml"
    paper = str(REPO_ROOT / "configs" / "paper.yaml")
    assert main(["cost", "--config", paper]) == 0
    out = capsys.readouterr().out
    assert "800,000 problems" in out and "not there: numinamath, aops" in out
    assert "1500000" in out and "the paper: ≈1.5 M judge calls" in out
    monkeypatch.setenv("SABER_HOME", str(tmp_path))
    assert main(["build", "--config", paper]) == 2
    err = capsys.readouterr().err
    assert "source 'numinamath'" in err and "AI-MO/NuminaMath-1.5" in err
    assert "source 'aops'" in err and "source 'math'" not in err
    pool_path = str(REPO_ROOT / "configs" / "paper-published-pool.yaml")
    assert main(["build", "--config", pool_path]) == 2
    err = capsys.readouterr().err
    assert "source 'sabermath'" in err and "saber pull data/paper/sabermath" in err
    assert not (tmp_path / "dagster_home").exists()  # refused before any step
