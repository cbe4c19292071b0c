"""End-to-end: the `saber build` command and the Dagster code location."""

import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
import yaml

from saber_assets.benchmark.data import Benchmark
from saber_assets.cli import main
from saber_assets.config import REPO_ROOT
from saber_resources.cpu_tasks import techniques_of


def test_saber_build_runs_every_stage(shared_build, tmp_path, monkeypatch, capsys):
    """The session's tiny build (`shared_build`): what it printed and what it wrote; the report
    and `saber evaluate` on a copy of it."""
    built = shared_build("tiny")
    out = built.log
    assert "CHECK FAILED" not in out
    # a row count where an asset is a table; none printed where it is not (an index, runs)
    assert "rows=None" not in out
    # a stage of many partitions is one summary line in a log, not a line per partition
    assert not re.search(r"^  \S+ \[.+\]", out, re.M), out[:3000]
    assert re.search(
        r"^  \d+ partitions \(bm25, .*\): retriever_index \(build_indexes ok in ", out, re.M
    )
    assert re.search(
        r"^  5 partitions \(Algebra, .*\): query_candidates rows=\d+, "
        r"tournament_judgments rows=\d+, relevance_ratings rows=\d+ \(build_domains ok",
        out,
        re.M,
    )
    # its last lines: who leads each setting, and where the explorer is
    assert re.search(r"^leaders: +full-full: \S+.*\(ndcg@10 0\.\d{3}; ", out, re.M)
    assert re.search(r"^ +statement-statement: \S+.*\(ndcg@10 0\.\d{3}; ", out, re.M)
    assert "(served: uv run saber report --serve)" in out
    assert re.search(r"corpus_quarantine\s+rows=1\n", out) and re.search(
        r"ontology_tree\s+rows=17022\n", out
    )
    home = built.home / "tiny"
    corpus = pl.read_parquet(home / "parquet" / "corpus.parquet")
    assert 300 <= corpus.height <= 330 and corpus["id"].str.starts_with("math:").sum() <= 300
    ann = pl.read_parquet(home / "parquet" / "problem_annotations.parquet")
    assert ann["id"].to_list() == corpus["id"].to_list()  # corpus order
    assert ann["topic_status"].is_in(["ok", "no_topics"]).all()
    ratings = pl.read_parquet(home / "parquet" / "relevance_ratings")
    assert ratings.height > 0 and ratings["rating"].min() == 0 and ratings["rating"].max() == 5
    board = pl.read_csv(home / "leaderboard" / "leaderboard.csv")
    assert board.height == 6 and set(board["retriever"]) == {"bm25", "jaccard-no-tok"}
    assert set(board["judge_backend"]) == {"cpu"}
    # whether the leader leads: a rank interval per row, the paired tests beside the board
    assert board["rank_ci"].null_count() == 0 and "beats" in board.columns
    assert board["row_id"].n_unique() == board.height
    tests = pl.read_parquet(home / "leaderboard" / "significance.parquet")
    assert set(tests.filter(pl.col("domain") == "Overall")["setting"]) == set(board["setting"])
    robust = pl.read_parquet(home / "parquet" / "leaderboard_robustness.parquet")
    assert {"linear", "scale3", "ranks", "judge", "halves"} <= set(robust["check"])
    assert "significantly better than" in (home / "leaderboard" / "leaderboard.md").read_text()
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as conn:
        assert (
            conn.execute("SELECT sum(problems) FROM corpus_by_source").fetchone()[0]
            == corpus.height
        )
        assert conn.execute("SELECT count(*) FROM ontology_tree").fetchone()[0] == 17022
        assert conn.execute("SELECT count(*) FROM leaderboard WHERE rank = 1").fetchone()[0] >= 3
        assert conn.execute("SELECT count(*) FROM judgments").fetchone()[0] > 0
    # each retriever's index built once, by its own step, and read by its runs
    assert re.search(r"^  2 partitions \(bm25, jaccard-no-tok\): retriever_index \(", out, re.M)
    # one index per document side (statement; full for statement→full and full→full)
    assert len(list((home / "indexes").glob("*/*/manifest.json"))) == 4
    # each run's TREC file: every scored query, its candidates ranked by the stored scores
    from saber_assets.runs.outside import read_run

    docs = Benchmark.read(home / "evaluation_benchmark").documents["id"].to_list()
    scored = pl.read_parquet(home / "runs" / "bm25" / "Algebra.parquet").filter(
        pl.col("setting") == "statement-statement", pl.col("scores").is_not_null()
    )
    cands = Benchmark.read(home / "evaluation_benchmark").queries.select("id", "candidates")
    want = {
        q: dict(zip([docs[c] for c in cs], s, strict=True))
        for q, s, cs in scored.join(cands, left_on="query_id", right_on="id")
        .select("query_id", "scores", "candidates").iter_rows()
    }  # fmt: skip
    assert want and read_run(home / "runs" / "bm25" / "Algebra.statement-statement.trec") == {
        "bm25-statement-statement": want
    }
    # Run history is kept in the project-local Dagster home.
    assert (built.home / "dagster_home" / "dagster.yaml").exists()
    # every analysis says how long it took (which one is the build's long one)
    from dagster import AssetKey, DagsterInstance

    from saber_assets.stages import ANALYSES

    with DagsterInstance.from_config(str(built.home / "dagster_home")) as instance:
        for name in ANALYSES:
            event = instance.get_latest_materialization_event(AssetKey(name))
            assert event is not None, name
            seconds = event.asset_materialization.metadata["seconds"].value
            assert 0 <= seconds < 600, (name, seconds)
        # a retriever's domains in one Dagster run, each domain's partition materialised with
        # its own metadata
        from dagster import DagsterRunStatus, RunsFilter

        runs = instance.get_runs(RunsFilter(job_name="build_runs"))
        assert len(runs) == 2 and all(r.status == DagsterRunStatus.SUCCESS for r in runs)
        ranges = sorted(
            (
                r.tags["dagster/asset_partition_range_start"],
                r.tags["dagster/asset_partition_range_end"],
            )
            for r in runs
        )
        assert [(a.split("|")[1], b.split("|")[1]) for a, b in ranges] == [
            ("bm25", "bm25"), ("jaccard-no-tok", "jaccard-no-tok")
        ]  # fmt: skip
        records = instance.fetch_materializations(AssetKey("retriever_runs"), limit=100).records
        by_partition = {r.partition_key: r.asset_materialization.metadata for r in records}
        assert len(by_partition) == 10
        for key, meta in by_partition.items():
            domain_key, retriever = key.split("|")
            assert meta["retriever"].value == retriever and meta["queries"].value >= 0
            assert meta["partitions_in_this_run"].value == 5
        assert len({meta["domain"].value for meta in by_partition.values()}) == 5
    # one candidate selection for every domain partition, each partition its own part of it
    [selection] = list((home / "signals" / "selection").glob("*.parquet"))
    chosen = pl.read_parquet(selection).select("domain", "query_id", "candidate_id", "group")
    cands = pl.read_parquet(home / "parquet" / "query_candidates")
    assert cands.height == chosen.height > 0
    assert cands.select(chosen.columns).sort(chosen.columns).equals(chosen.sort(chosen.columns))
    # no problem without a topic or a core idea in either pool (candidates.require_annotations),
    # and the tiny corpus has such problems to leave out
    unannotated = ann.filter(
        (pl.col("topics").list.len() == 0) | pl.col("summary").is_null() | (pl.col("summary") == "")
    )["id"]
    assert unannotated.len() > 0
    assert not cands["query_id"].is_in(unannotated).any()
    assert not cands["candidate_id"].is_in(unannotated).any()
    _ratings_follow_shared_technique(home)
    assert f"report:    {home / 'report' / 'index.html'}" in out
    cfg = built.copy_to(tmp_path, monkeypatch)
    _report_is_self_contained(cfg, tmp_path / "home" / "tiny", capsys)
    _evaluate_reproduces_the_leaderboard(cfg, tmp_path / "home" / "tiny", board, capsys)


def _report_is_self_contained(cfg, home, capsys):
    """The benchmark report: written by the build, found by `saber report`, nothing fetched."""
    path = home / "report" / "index.html"
    capsys.readouterr()
    assert main(["report", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    explorer = home / "explorer"
    assert f"report:   {path}\n" in out and f"explorer: {explorer / 'index.html'}\n" in out
    for site_page in [explorer / "index.html", explorer / "compare.html",
                      *sorted((explorer / "queries").glob("*.html"))[:5]]:  # fmt: skip
        assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", site_page.read_text())
    page = path.read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "<script" not in page
    assert page.count('src="data:image/png;base64,') >= 4
    for title in ("Tournament", "Leaderboard", "Judging regimes", "Math vs words"):
        assert f">{title}</h2>" in page
    assert "bm25" in page and "jaccard-no-tok" in page  # the leaderboard's retrievers
    # the header says whether its numbers were verified from the benchmark's own files
    assert re.search(r'<p class="verdict" id="verification">Verified: [\d,]+ published', page)
    readings = pl.read_parquet(home / "parquet" / "benchmark_report.parquet")
    assert readings.height == 11 and readings["reading"].str.len_chars().min() > 20
    assert ">Robustness of the ordering</h2>" in page


def _ratings_follow_shared_technique(home):
    """Content, not counts: in the built benchmark, candidates whose solution names a technique
    the query's solution names are rated above those sharing none (an upside-down tournament,
    a swapped export or a broken rescale would reverse or flatten this)."""
    bench = Benchmark.read(home / "benchmark")
    tech = [techniques_of(s) for s in bench.documents["solution"].to_list()]
    row_of = {d: i for i, d in enumerate(bench.documents["id"].to_list())}
    wins = comparable = 0
    for qid, cands, rel in bench.queries.select("id", "candidates", "relevance_scores").iter_rows():
        q = tech[row_of[qid]]
        shared = [r for c, r in zip(cands, rel, strict=True) if q and tech[c] & q]
        other = [r for c, r in zip(cands, rel, strict=True) if not (tech[c] & q)]
        if shared and other:
            comparable += 1
            wins += np.mean(shared) > np.mean(other)
    assert comparable >= 3 and wins / comparable >= 0.7, (wins, comparable)


def _evaluate_reproduces_the_leaderboard(cfg, home, board, capsys):
    """The exported benchmark round-trips through `saber evaluate` to the leaderboard's numbers."""
    capsys.readouterr()
    assert main(["evaluate", "bm25", "--config", str(cfg), "--json", "--resamples", "100"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert Path(report["benchmark"]) == home / "evaluation_benchmark"
    for r in report["settings"]:
        row = board.filter((pl.col("retriever") == "bm25") & (pl.col("setting") == r["setting"]))
        assert row["ndcg@10"][0] == pytest.approx(r["ndcg@10"], abs=1e-12), r["setting"]
        assert row["ci_low"][0] == pytest.approx(r["ci_low"], abs=1e-12)


def test_a_failed_run_of_a_retrievers_domains_keeps_the_domains_that_work(
    shared_build, tmp_path, monkeypatch, capsys
):
    """A range run materialises all its domains or none: when one domain fails, the build runs
    the range's domains one by one, so the others are recorded and the failure is the one
    domain's (a crashed partition does not lose finished work)."""
    from dagster import AssetKey, DagsterInstance

    from saber_assets.cli import main
    from saber_assets.runs import assets as run_assets

    cfg = shared_build("tiny").copy_to(tmp_path, monkeypatch)
    real = run_assets._domain_run

    def geometry_fails(context, pipeline, stores, llm, name, domain_key):
        if domain_key == "Geometry" and name == "bm25":
            raise RuntimeError("planted: the bm25 index of Geometry is unreadable")
        return real(context, pipeline, stores, llm, name, domain_key)

    monkeypatch.setattr(run_assets, "_domain_run", geometry_fails)
    assert main(["build", "--select", "runs", "--force", "--config", str(cfg), "--steps"]) == 1
    out = capsys.readouterr()
    first, last = "Algebra|bm25", "Calculus and Analysis|bm25"  # the tiny ontology's order
    assert f"build_runs [{first} … {last}] failed: its partitions one run each" in out.out
    # the failure in its own words, with its partition, not Dagster's wrapper around it
    assert (
        "FAILED step retriever_runs [Geometry|bm25]: RuntimeError: planted: the bm25 index of "
        "Geometry is unreadable"
    ) in out.err
    with DagsterInstance.get() as instance:
        records = instance.fetch_materializations(AssetKey("retriever_runs"), limit=200).records
    latest: dict[str, int] = {}
    for r in records:
        latest.setdefault(r.partition_key, r.storage_id)
    newest = sorted(latest.values())[-9:]  # this build's: every partition but Geometry|bm25
    fresh = {k for k, v in latest.items() if v in newest}
    assert len(fresh) == 9 and "Geometry|bm25" not in fresh
    assert {k.split("|")[1] for k in fresh} == {"bm25", "jaccard-no-tok"}


def test_saber_build_reports_a_bad_ontology(tiny_config, tmp_path, capsys):
    dag = tmp_path / "cyc.json"
    dag.write_text(
        json.dumps(
            {
                "nodes": [{"id": k, "title": k} for k in "RAB"],
                "edges": [["R", "A"], ["A", "B"], ["B", "A"]],
            }
        )
    )
    # its first level names the domains, so the ontology is read (and refused) before any run
    assert main(["build", "--config", str(tiny_config(ontology={"nodes": str(dag)}))]) == 2
    err = capsys.readouterr().err
    assert "cyc.json: the ontology has a cycle" in err and "Traceback" not in err


def test_bad_config_is_reported_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncorpus: {sources: [{name: a, bundled: math, priorty: 3}]}\n")
    assert main(["build", "--config", str(bad)]) == 2
    assert "Extra inputs are not permitted" in capsys.readouterr().err


def test_dagster_definitions_validate():
    proc = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.e2e
def test_build_on_a_foreign_ontology_uses_its_domains(tiny_config, tmp_path, capsys):
    """A subject classification given as nodes + edges, with real ontologies' titles (commas,
    slashes, brackets, a pipe; one title under two ids): its first level becomes the domains,
    every stage partitions by safe keys, and every output a person reads shows the titles."""
    data = REPO_ROOT / "tests" / "data"
    titles = {
        "11": "Number theory, arithmetic / primes",
        "05": "Combinatorics [discrete | finite]",
        "12": "Real functions",  # the title of 26 as well: one domain
    }
    nodes = pl.read_csv(data / "msc_nodes.csv", schema_overrides={"id": pl.String})
    nodes = nodes.with_columns(
        pl.col("id").replace_strict(titles, default=pl.col("title")).alias("title")
    )
    nodes.write_csv(tmp_path / "nodes.csv")
    ontology = {"nodes": str(tmp_path / "nodes.csv"), "edges": str(data / "msc_edges.csv")}
    cfg = tiny_config(ontology=ontology)
    assert main(["build", "--config", str(cfg)]) == 0, capsys.readouterr().err
    domains = [
        "Number theory, arithmetic / primes",
        "Combinatorics [discrete | finite]",
        "Probability theory",
        "Geometry",
        "Real functions",
    ]
    home = tmp_path / "home" / "tiny"
    tree = pl.read_parquet(home / "parquet" / "ontology_tree.parquet")
    first = tree.filter(pl.col("depth") == 1)
    assert list(dict.fromkeys(first["domain"].to_list())) == domains
    assert first.filter(pl.col("domain") == "Real functions").height == 2  # 12 and 26
    cands = pl.read_parquet(home / "parquet" / "query_candidates")
    with_queries = set(cands["domain"].unique())
    assert with_queries <= set(domains) and len(with_queries) >= 3, with_queries
    keys = {p.stem for p in (home / "parquet" / "query_candidates").glob("*.parquet")}
    assert keys == {
        "Number-theory-arithmetic-primes",
        "Combinatorics-discrete-finite",
        "Probability theory",
        "Geometry",
        "Real functions",
    }
    board = pl.read_csv(home / "leaderboard" / "leaderboard.csv")
    manifest = json.loads((home / "benchmark" / "manifest.json").read_text())
    assert manifest["domains"] == domains
    assert set(domains) <= set(board.columns) and "Algebra" not in board.columns
    page = (home / "report" / "index.html").read_text()
    assert (
        "Number theory, arithmetic / primes" in page and "Combinatorics [discrete | finite]" in page
    )


def _steps(out: str) -> tuple[int, int]:
    m = re.search(r"steps:\s+(\d+) run, (\d+) up to date", out)
    return int(m.group(1)), int(m.group(2))


def test_incremental_build_runs_only_what_changed(shared_build, tmp_path, monkeypatch, capsys):
    built = shared_build("tiny")
    first = built.log
    ran, skipped = _steps(first)
    assert skipped == 0 and ran > 10
    # nothing changed, only moved (a copy, its inputs elsewhere: versions see content, not
    # paths): nothing runs
    cfg = built.copy_to(tmp_path, monkeypatch)
    assert main(["build", "--config", str(cfg)]) == 0
    assert _steps(capsys.readouterr().out) == (0, ran)
    # a new retriever and a fusion of it: their runs (one per domain; the fusion's after the
    # retriever's, though its name sorts first), the leaderboard and the analyses, nothing else
    registry = tmp_path / "retrievers.yaml"
    registry.write_text(
        registry.read_text() + "  - {name: tfidf, kind: tfidf}\n"
        "  - {name: rrf, kind: fusion, params: {retrievers: [bm25, tfidf]}}\n"
    )
    assert main(["build", "--config", str(cfg), "--steps"]) == 0  # a line per partition
    out = capsys.readouterr().out
    n_domains = int(re.search(r"(\d+) partitions \([^)]*\): query_candidates", first).group(1))
    ran = re.findall(r"retriever_runs \[[^|\]]+\|(\S+)\]", out)
    assert ran == ["tfidf"] * n_domains + ["rrf"] * n_domains
    # a fusion's index partition holds nothing, but it is the registry entry's partition too
    assert sorted(re.findall(r"retriever_index \[(\S+)\]", out)) == ["rrf", "tfidf"]
    assert _steps(out)[0] == 2 * n_domains + 4 and "leaderboard " in out
    _fusion_read_its_components(cfg, tmp_path / "home", registry)
    # a changed entry: its index and runs again (its own entry is part of their fingerprints),
    # and the fusion's, which reads its new runs
    registry.write_text(
        registry.read_text().replace("kind: tfidf}", "kind: tfidf, params: {tokenizer: plain}}")
    )
    assert main(["build", "--config", str(cfg), "--steps"]) == 0
    out = capsys.readouterr().out
    ran = re.findall(r"retriever_runs \[[^|\]]+\|(\S+)\]", out)
    assert ran == ["tfidf"] * n_domains + ["rrf"] * n_domains
    assert sorted(re.findall(r"retriever_index \[(\S+)\]", out)) == ["rrf", "tfidf"]
    _fusion_read_its_components(cfg, tmp_path / "home", registry)
    # more tournament rounds: tests/test_ui.py builds that change (and the UI shows it unsynced)
    # --force runs everything again; --select limits it
    assert main(["build", "--config", str(cfg), "--select", "leaderboard", "--force"]) == 0
    assert _steps(capsys.readouterr().out)[0] == 1
    _training_data_is_audited_and_scored_clean(cfg, tmp_path, capsys)


def _fusion_read_its_components(cfg: Path, home: Path, registry: Path) -> None:
    """Every domain's fusion run read both components' scores from their runs
    (``runs.saved``) and holds the scores of the fusion that runs them itself."""
    from dagster import AssetKey, AssetRecordsFilter, DagsterInstance

    from saber_assets.config import load_config
    from saber_assets.ontology.domains import domain_keys
    from saber_assets.retrievers.registry import (
        RetrieverResources,
        build_retriever,
        load_registry,
    )
    from saber_assets.runs.evaluate import evaluate

    setting = "statement-statement"
    bench = Benchmark.read(home / "tiny" / "evaluation_benchmark")
    entries = load_registry(registry)
    runs = pl.concat(
        [pl.read_parquet(f) for f in (home / "tiny" / "runs" / "rrf").glob("*.parquet")]
    )
    with DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        for title, key in domain_keys(load_config(cfg).ontology).items():
            rows = [i for i, ds in enumerate(bench.queries["domains"].to_list()) if title in ds]
            if not rows:
                continue
            where = AssetRecordsFilter(AssetKey("retriever_runs"), [f"{key}|rrf"])
            [record] = instance.fetch_materializations(where, limit=1).records
            lines = record.asset_materialization.metadata[f"components {setting}"].value
            assert lines == "\n".join(
                f"- {c}: {len(rows)} of {len(rows)} queries' scores read from its run"
                for c in ("bm25", "tfidf")
            )
            fresh = build_retriever(entries[-1], RetrieverResources(entries=entries))
            want = evaluate(fresh, bench, setting, 10, rows, full_corpus=False)
            got = runs.filter(pl.col("partition_domain") == title, pl.col("setting") == setting)
            assert got["scores"].to_list() == want["scores"].to_list()


def _training_data_is_audited_and_scored_clean(cfg, tmp_path, capsys):
    """Declared training data: one audit per corpus with text, then the leaderboard and the
    analyses; no index or run again (the description of a model is not what it computes)."""
    from saber_assets.config import load_config
    from saber_assets.leaderboard.scores import score_table

    registry = tmp_path / "retrievers.yaml"
    src = tmp_path / "mine.jsonl"
    registry.write_text(
        registry.read_text().replace(
            "{name: bm25, kind: bm25}",
            "{name: bm25, kind: bm25, meta: {training_data: [numina-by-name, "
            f"{{name: mine, path: '{src}', fields: {{id: id, problem: problem}}}}, "
            "{name: math-geometry, bundled: math, id_prefix: 'train/geometry/'}]}}",
        )
    )
    assert main(["build", "--config", str(cfg), "--steps"]) == 0
    out = capsys.readouterr().out
    assert sorted(re.findall(r"contamination \[(\S+)\]", out)) == ["math-geometry", "mine"]
    assert "retriever_runs" not in out and "retriever_index" not in out
    assert "leaderboard " in out and "benchmark_report" in out
    home = tmp_path / "home" / "tiny"
    bench = Benchmark.read(home / "evaluation_benchmark")
    doc_ids = bench.documents["id"].to_list()
    items = set(bench.queries["id"]) | {
        doc_ids[c] for cs in bench.queries["candidates"] for c in cs
    }
    matched = {
        n: set(pl.read_parquet(home / "contamination" / n / "matches.parquet")["item"])
        for n in ("mine", "math-geometry")
    }
    # each corpus holds its benchmark items verbatim: every one is found, none of the other's
    for name, prefix in (("mine", "mine:"), ("math-geometry", "math:train/geometry/")):
        assert {i for i in items if i.startswith(prefix)} <= matched[name]
    assert any(i.startswith("math:train/geometry/") for i in items)
    assert not any(i.startswith("mine:") for i in matched["math-geometry"])
    # contaminated: a query whose statement or one of its five best-rated candidates is found
    found = matched["mine"] | matched["math-geometry"]
    want = set()
    for qid, cands, rel in bench.queries.select("id", "candidates", "relevance_scores").iter_rows():
        best = [doc_ids[c] for _, _, c in sorted(zip(rel, range(len(rel)), cands, strict=True),
                                                  key=lambda t: (-t[0], t[1]))[:5]]  # fmt: skip
        if qid in found or found & set(best):
            want.add(qid)
    assert 0 < len(want) < bench.queries.height
    board = pl.read_csv(home / "leaderboard" / "leaderboard.csv")
    bm25 = board.filter(pl.col("retriever") == "bm25").sort("setting")
    assert bm25["contaminated_share"].to_list() == [len(want) / bench.queries.height] * 3
    assert set(bm25["training_checked"]) == {"mine, math-geometry"}
    assert set(bm25["training_declared_only"]) == {"numina-by-name"}
    other = board.filter(pl.col("retriever") != "bm25")
    assert other["contaminated_share"].is_null().all() and other["ndcg@10_clean"].is_null().all()
    c = load_config(cfg)
    runs = pl.concat([pl.read_parquet(f) for f in (home / "runs" / "bm25").glob("*.parquet")])
    clean = score_table(
        runs.filter(~pl.col("query_id").is_in(sorted(want))),
        bench.domain_list(), c.leaderboard.bootstrap_resamples, c.seed, k=c.leaderboard.k,
    ).sort("setting")  # fmt: skip
    assert bm25["ndcg@10_clean"].to_list() == pytest.approx(clean["ndcg@10"].to_list(), abs=1e-12)
    assert bm25["ci_low_clean"].to_list() == pytest.approx(clean["ci_low"].to_list(), abs=1e-12)
    page = (home / "report" / "index.html").read_text()
    assert "Training data checked on the text" in page and "ndcg@10 clean [95% CI]" in page
    assert (home / "contamination" / "own_candidate_matches.parquet").exists()
    _own_candidate_matches_can_be_left_out(cfg, home, capsys)


def _own_candidate_matches_can_be_left_out(cfg, home, capsys):
    """Queries with a near-copy of themselves among their candidates, left out of every score
    when asked: only the check, the leaderboard and the analyses run again."""
    import yaml

    data = yaml.safe_load(cfg.read_text())
    data["contamination"] = {"own_match_jaccard": 0.05, "exclude_own_matches": True}
    cfg.write_text(yaml.safe_dump(data))
    assert main(["build", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+own_candidate_matches\s+rows=[1-9]", out, re.M)
    assert "retriever_runs" not in out and "contamination [" not in out
    excluded = set(
        pl.read_parquet(home / "contamination" / "own_candidate_matches.parquet")["query"]
    )
    n = Benchmark.read(home / "evaluation_benchmark").queries.height
    assert 0 < len(excluded) < n
    board = pl.read_csv(home / "leaderboard" / "leaderboard.csv")
    assert set(board["queries"]) == {n - len(excluded)}
    # the full-corpus board leaves them out too: neither scored nor pooled into the fill
    filled = pl.read_parquet(home / "leaderboard" / "full_corpus_board.parquet")
    assert set(filled["queries"]) == {n - len(excluded)}
    fills = pl.read_parquet(home / "leaderboard" / "full_corpus_fill.parquet")
    assert fills.height and not set(fills["query_id"]) & excluded


@pytest.mark.e2e
def test_a_model_that_finds_no_core_idea_leaves_an_empty_pool_and_the_build_goes_on(tmp_path):
    """Every summary "no core idea" (a 135M model on the real server answered so for all four
    problems under load): no problem is left in the signal pool, and the signal stages and the
    candidates still materialise, empty, instead of failing on a table with no columns, and the
    build ends with an empty benchmark and leaderboard."""
    from saber_testing.fake_openai import CORE_IDEA, FakeOpenAI, chat_body, varied_answer
    from saber_testing.rehearsal import build_process, rehearsal_config
    from saber_testing.tiny import write_tiny_inputs

    def no_idea(body: dict):
        if "core idea" in body["messages"][-1]["content"]:
            return 200, chat_body(
                json.dumps({**CORE_IDEA, "has_core_idea": False, "core_idea": ""})
            )
        return varied_answer(body)

    write_tiny_inputs(tmp_path)
    with FakeOpenAI(answer=no_idea) as srv:
        cfg = rehearsal_config(tmp_path, srv.url, problems=10)
        build = build_process(cfg, tmp_path / "home")
        out, _ = build.communicate(timeout=600)
    assert build.returncode == 0, out[-3000:]
    parquet = tmp_path / "home" / "tiny" / "parquet"
    assert pl.read_parquet(parquet / "problem_annotations.parquet")["summary"].is_null().all()
    index = pl.read_parquet(parquet / "pair_signal_index.parquet")
    assert index.height == 0 and "pairs_stored" in index.columns
    assert re.search(r"query_candidates( \[Algebra\])?\s+rows=0", out), out[-3000:]
    home = tmp_path / "home" / "tiny"
    assert pl.read_parquet(home / "evaluation_benchmark" / "queries.parquet").height == 0
    assert "the benchmark has no queries" in out


def test_an_empty_benchmark_skips_the_analyses_instead_of_failing_them(tmp_path):
    """A model that leaves no viable query (a 135M model on the real server did) gives an empty
    benchmark: the build reports that the analyses have nothing to read instead of failing."""
    from saber_assets.orchestration.launch import no_queries
    from saber_assets.outputs import Outputs

    out = Outputs(tmp_path)
    bench = out.evaluation_benchmark
    assert not no_queries(out)  # not built yet: nothing to decide
    bench.mkdir()
    pl.DataFrame({"id": pl.Series([], dtype=pl.String)}).write_parquet(bench / "queries.parquet")
    assert no_queries(out)
    pl.DataFrame({"id": ["q1"]}).write_parquet(bench / "queries.parquet")
    assert not no_queries(out)


def test_a_judge_that_always_picks_the_first_shown_stops_the_build_and_push(
    shared_build, tmp_path, monkeypatch, capsys
):
    """The position-bias check fails at ERROR severity: the build stops after the tournament
    and says which check and why; a second build is refused at the benchmark; with
    --accept-failed-checks the benchmark is built and records the failure, which `saber push`
    refuses unless given the same flag, and then the card says so (#75)."""
    from saber_resources.cpu_tasks import CPUPairJudge
    from saber_resources.llm_tasks import Outcome

    cfg = shared_build("algebra").copy_to(tmp_path, monkeypatch)
    home = tmp_path / "home" / "tiny"
    before = json.loads((home / "benchmark" / "manifest.json").read_text())
    assert before["checks"] and all(c["passed"] for c in before["checks"])

    def first_always(self, items, sample=0, temperature=0.7):
        return [Outcome(1, p_first=0.99) for _ in items]

    # another judge version: its judgments are asked afresh, not read from the stores; and a
    # config change, as another judge brings one, so that what is built on them is unsynced
    monkeypatch.setattr(CPUPairJudge, "compare_batch", first_always)
    monkeypatch.setattr(CPUPairJudge, "version", "always-first/v1")
    doc = yaml.safe_load(cfg.read_text())
    doc["tournament"]["position_bias_band"] = [0.39, 0.61]
    cfg.write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["build", "--config", str(cfg), "--select", "domains"]) == 1
    out, err = capsys.readouterr()
    assert "CHECK FAILED: tournament_judgments / judge_position_bias" in out
    assert "STOPPED BY failed check tournament_judgments / judge_position_bias" in err
    assert re.search(r"the first-shown candidate won (\d+) of \1 judgments", err), err
    assert "saber build STOPPED" in err and "--accept-failed-checks" in err
    # the next build of the benchmark (in a run of its own, as the UI's) is refused on them
    assert main(["build", "--config", str(cfg), "--select", "benchmark"]) == 1
    out, err = capsys.readouterr()
    assert "FAILED step benchmark_export" in err and "refused: the grades come from" in err
    assert json.loads((home / "benchmark" / "manifest.json").read_text()) == before
    # accepted: built, and the failure recorded where a publisher reads it
    assert main(["build", "--config", str(cfg), "--select", "benchmark",
                 "--accept-failed-checks"]) == 0  # fmt: skip
    manifest = json.loads((home / "benchmark" / "manifest.json").read_text())
    assert [c["passed"] for c in manifest["checks"]] == [False]
    assert main(["push", str(home / "benchmark"), "--repo-prefix", "me/b",
                 "--stage-only", str(tmp_path / "staged")]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "saber push: refused: " in err and "judge_position_bias (Algebra)" in err
    # push verified it afresh: the rebuilt benchmark's grades are not its judgments' fit
    assert "verification (all): NOT verified" in err
    assert not (tmp_path / "staged").exists()
    assert main(["push", str(home / "benchmark"), "--repo-prefix", "me/b",
                 "--stage-only", str(tmp_path / "staged"), "--accept-failed-checks"]) == 0  # fmt: skip
    card = (tmp_path / "staged").rglob("README.md").__next__().read_text()
    assert "## Failed checks: published anyway" in card and "judge_position_bias (Algebra)" in card
    # rebuilt, its numbers were verified again by push, and failed: the card says so
    assert "NOT verified: " in card
