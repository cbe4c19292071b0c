"""`saber verify`: every published number recomputed from the benchmark's own files, and a
changed qrel, run line, judgment, board figure or truncated file named."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from saber_assets.benchmark.data import Benchmark
from saber_assets.leaderboard.recompute import (
    bt_strengths_sklearn,
    holm_adjusted,
    min_max,
    ndcg_sklearn,
    sign_flip_p,
    t_test_p,
)
from saber_assets.leaderboard.significance import holm
from saber_assets.leaderboard.verify import verify
from saber_assets.ratings.bradley_terry import Prior, fit, rescale
from saber_assets.runs.metrics import ndcg_at_k

REPO = Path(__file__).resolve().parent.parent
FLIPS = 20_000  # the verifier's flips in the tests (its default is 100,000)


@pytest.fixture
def published(shared_build, tmp_path) -> Path:
    """A copy of the tiny build's benchmark, runs and board (the home's layout)."""
    home = shared_build("tiny").home / "tiny"
    for part in ("evaluation_benchmark", "runs", "leaderboard"):
        shutil.copytree(home / part, tmp_path / part)
    return tmp_path


def verdict(root: Path):
    return verify(root / "evaluation_benchmark", root / "runs", root / "leaderboard", flips=FLIPS)


def saber_verify(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "saber_assets.cli", "verify", str(root / "evaluation_benchmark"),
         "--flips", str(FLIPS)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def checks_named(v, check: str) -> list:
    return [d for d in v.differences if d.check == check]


def test_the_build_verifies_itself_and_records_the_verdict(shared_build, published):
    """The build ran the verification as its last leaderboard step: the manifest says passed,
    with a check entry; the CLI recomputes every kind of number and agrees."""
    built = shared_build("tiny")
    manifest = json.loads((built.home / "tiny/evaluation_benchmark/manifest.json").read_text())
    assert manifest["verification"]["passed"] is True, manifest["verification"]
    assert {"check": "verification", "passed": True}.items() <= next(
        c for c in manifest["checks"] if c["check"] == "verification"
    ).items()
    assert "verify:    Verified: " in built.log
    v = verdict(published)
    assert v.passed, v.table()
    for kind in ("grade", "per-query nDCG", "nDCG", "bootstrap interval", "query count",
                 "t-test p", "randomization p", "better", "tie group", "beats", "rank interval",
                 "joint interval", "position-bias verdict", "position-bias count",
                 "order consistency", "linear nDCG", "domain interval", "joint test Holm p",
                 "joint better", "tie group joint", "Holm family", "t-test Holm p",
                 "randomization Holm p", "system on the board", "undecided"):  # fmt: skip
        assert v.checked.get(kind, 0) > 0, (kind, v.checked)
    proc = saber_verify(published)
    assert proc.returncode == 0, proc.stderr
    assert "all agree" in proc.stdout


def test_a_changed_qrel_is_named(published):
    """A grade edited in place tears the bundle (its sha256); written whole, the judgments
    refit it back and the board's nDCG no longer follows."""
    bench_dir = published / "evaluation_benchmark"
    bench = Benchmark.read(bench_dir)
    q = bench.queries
    scores = q["relevance_scores"].to_list()
    row = 0
    top = int(np.argmax(scores[row]))
    scores[row][top] = 0.0  # the best candidate graded irrelevant
    edited = q.with_columns(pl.Series("relevance_scores", scores))
    edited.write_parquet(bench_dir / "queries.parquet")
    v = verdict(published)
    assert [d.check for d in v.differences] == ["bundle"]
    assert "queries.parquet" in v.differences[0].recomputed
    proc = saber_verify(published)
    assert proc.returncode == 1 and "queries.parquet" in proc.stderr

    shutil.rmtree(bench_dir)
    Benchmark(edited, bench.documents, bench.manifest, judgments=bench.judgments).write(bench_dir)
    v = verdict(published)
    qid = q["id"][row]
    grade = checks_named(v, "grade")
    assert len(grade) == 1 and f"query {qid}," in grade[0].where
    assert grade[0].published == "0" and float(grade[0].recomputed) > 4
    assert any(qid in d.where for d in checks_named(v, "per-query nDCG"))
    assert checks_named(v, "nDCG")


def test_a_changed_run_line_is_named(published):
    """One candidate's score in one TREC file: the query's nDCG and its system's mean differ
    from what the board and the runs stage published."""
    bench = Benchmark.read(published / "evaluation_benchmark")
    qid, cands, grades = bench.queries.select("id", "candidates", "relevance_scores").row(0)
    best = bench.documents["id"][cands[int(np.argmax(grades))]]
    path = next((published / "runs/bm25").glob("*.statement-statement.trec"))
    lines = path.read_text().splitlines()
    hits = [n for n, line in enumerate(lines) if line.split()[:3] == [qid, "Q0", best]]
    if not hits:  # the query is in another domain's file
        path = next(
            p for p in (published / "runs/bm25").glob("*.statement-statement.trec")
            if f"{qid} Q0 {best} " in p.read_text()
        )  # fmt: skip
        lines = path.read_text().splitlines()
        hits = [n for n, line in enumerate(lines) if line.split()[:3] == [qid, "Q0", best]]
    parts = lines[hits[0]].split()
    parts[4] = "-1000.0"  # the best candidate ranked last
    lines[hits[0]] = " ".join(parts)
    path.write_text("\n".join(lines) + "\n")
    v = verdict(published)
    per_query = checks_named(v, "per-query nDCG")
    assert [d.where for d in per_query] == [f"bm25 statement-statement {qid}"]
    assert any(d.where == "bm25 statement-statement" for d in checks_named(v, "nDCG"))


def test_a_flipped_judgment_is_named(published):
    """One judgment's winner swapped, the bundle written whole: the refit grades of that
    query no longer are the published ones."""
    bench_dir = published / "evaluation_benchmark"
    bench = Benchmark.read(bench_dir)
    j = bench.judgments
    decided = j.with_row_index("row").filter(pl.col("winner").is_not_null())
    row, qid = decided["row"][0], decided["query_id"][0]
    first, second, winner = j.select("shown_first", "shown_second", "winner").row(row)
    flipped = j.with_columns(
        pl.when(pl.int_range(pl.len()) == row)
        .then(pl.lit(second if winner == first else first))
        .otherwise(pl.col("winner"))
        .alias("winner")
    )
    shutil.rmtree(bench_dir)
    Benchmark(bench.queries, bench.documents, bench.manifest, judgments=flipped).write(bench_dir)
    v = verdict(published)
    grade = checks_named(v, "grade")
    assert [d.where.split(",")[0] for d in grade] == [f"query {qid}"], v.table()
    # the first-shown count moved by one against the manifest's checks
    assert checks_named(v, "position-bias count")


def test_a_truncated_file_is_named(published):
    path = published / "evaluation_benchmark/documents.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    v = verdict(published)
    assert [d.check for d in v.differences] == ["bundle"]
    assert "documents.parquet" in v.differences[0].recomputed


def test_a_changed_board_figure_is_named(published):
    """A mean nudged by 0.001 and a `better` turned round: each named on its row."""
    board_path = published / "leaderboard/leaderboard.parquet"
    board = pl.read_parquet(board_path)
    nudged = board.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.col("ndcg@10") + 0.001)
        .otherwise(pl.col("ndcg@10")).alias("ndcg@10")
    )  # fmt: skip
    nudged.write_parquet(board_path)
    tests_path = published / "leaderboard/significance.parquet"
    tests = pl.read_parquet(tests_path)
    a, b = tests["a"][0], tests["b"][0]
    # the first pair said to be separable the other way round (or separable at all)
    tests.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.lit(b if tests["better"][0] == a else a))
        .otherwise(pl.col("better")).alias("better")
    ).write_parquet(tests_path)  # fmt: skip
    v = verdict(published)
    row = board.row(0, named=True)
    assert any(d.where == f"{row['retriever']} {row['setting']}" for d in checks_named(v, "nDCG"))
    assert any(f"{a} vs {b}" in d.where for d in checks_named(v, "better")), v.table()
    # the verdict recorded (as the build does): `saber push` refuses the benchmark
    from saber_assets.cli import main
    from saber_assets.leaderboard.verify import record_verdict

    bench_dir = published / "evaluation_benchmark"
    record_verdict(v, [bench_dir], published / "leaderboard")
    recorded = json.loads((published / "leaderboard/verification.json").read_text())
    assert recorded["passed"] is False and recorded["differences"] == len(v.differences)
    staged = published / "staged"
    assert main(["push", str(bench_dir), "--repo-prefix", "me/b", "--stage-only", str(staged)]) == 1
    assert not staged.exists()
    assert Benchmark.read(bench_dir).failed_checks()[0].startswith("verification (all): NOT")


# ---------------------------------------------------------------- the independent parts


def test_the_independent_fit_is_the_published_one():
    """scikit-learn's logistic regression on mirrored half-weight rows maximises the same
    penalised likelihood as the project's Newton fit, ties included; min–max as rescale."""
    rng = np.random.default_rng(3)
    n = 12
    wins = [tuple(rng.choice(n, 2, replace=False)) for _ in range(60)]
    ties = [tuple(rng.choice(n, 2, replace=False)) for _ in range(5)]
    for c in (1.0, 0.2):
        ours = fit(n, wins, Prior("l2", c=c), ties=ties)
        theirs = bt_strengths_sklearn(n, wins, ties, c)
        assert np.abs(rescale(np.asarray(ours)) - min_max(theirs)).max() < 1e-5
    # a different C is a different fit: the comparison can fail
    assert np.abs(min_max(bt_strengths_sklearn(n, wins, ties, 0.05)) - rescale(
        np.asarray(fit(n, wins, Prior("l2", c=1.0), ties=ties)))).max() > 1e-3  # fmt: skip


def test_scikit_learns_ndcg_is_the_boards():
    """Tie-averaged nDCG@k with exponential gain, two implementations, on tied scores too."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        grades = rng.uniform(0, 5, 30)
        scores = rng.integers(0, 6, 30).astype(float)  # many ties
        assert abs(ndcg_sklearn(scores, grades, 10) - ndcg_at_k(scores, grades, 10)) < 1e-12


def test_the_tests_written_out():
    rng = np.random.default_rng(8)
    a, b = rng.uniform(size=40), rng.uniform(size=40)
    from scipy.stats import ttest_rel

    assert abs(t_test_p(a - b) - ttest_rel(a, b).pvalue) < 1e-12
    p = rng.uniform(size=20)
    assert np.allclose(holm_adjusted(list(p)), holm(p))
    # two-sided: a difference favouring b is as significant as one favouring a
    d = rng.normal(0.05, 0.1, 40)
    assert abs(sign_flip_p(d, 20_000, 1) - sign_flip_p(-d, 20_000, 1)) < 1e-12
    assert sign_flip_p(np.zeros(5), 100, 1) == 1.0


def test_the_monte_carlo_tolerance_is_that_of_a_two_sided_p():
    """A two-sided p near 1 is twice a tail near 0.5: across seeds it spreads ~2·√(q(1 − q)/R),
    five times what √(p(1 − p)/R) says (the sample's jaccard vs jaccard-no-tok: 0.975 on the
    board, 0.947 with another seed, both from 10,000 flips). The verifier's own count is
    scipy's definition, and its tolerance holds every seed's p."""
    from saber_assets.leaderboard.recompute import monte_carlo_tolerance
    from saber_assets.leaderboard.significance import randomization_p

    rng = np.random.default_rng(4)
    a = rng.uniform(0.3, 0.9, 100)
    b = a + rng.normal(0, 0.05, 100)
    b -= (b - a).mean() * 0.97  # a mean difference near 0: p near 1
    ps = np.array([randomization_p(a, b, 2000, seed) for seed in range(30)])
    p = float(ps.mean())
    assert p > 0.8
    naive = np.sqrt(p * (1 - p) / 2000)
    assert ps.std() > 2 * naive
    assert ps.max() - ps.min() < monte_carlo_tolerance(p, 2000, 2000)
    ours = sign_flip_p(a - b, 100_000, 0)
    assert abs(ours - p) < monte_carlo_tolerance(p, 2000, 100_000)


def test_runs_of_a_retriever_off_the_board_are_not_read(published):
    """A retriever that left the registry keeps its run files (one domain's here): the board's
    systems are verified on their own queries, not on the queries it shares with them."""
    gone = published / "runs" / "gone"
    gone.mkdir()
    first = sorted((published / "runs" / "bm25").glob("*.statement-statement.trec"))[0]
    shutil.copy(first, gone / first.name)
    v = verdict(published)  # a system with runs and no row: dropped, until the board says why
    assert [d.where for d in checks_named(v, "system on the board")] == [
        "gone statement-statement"
    ], v.table()
    settings_path = published / "leaderboard/board.json"
    settings = json.loads(settings_path.read_text())
    assert settings["off_board"] == []  # the build's own: every system with runs has its rows
    settings_path.write_text(json.dumps({**settings, "off_board": ["gone"]}))
    v = verdict(published)
    assert v.passed, v.table()
    assert "off the board" in v.unchecked and "not checked: off the board" in v.summary()


def test_a_query_marked_skipped_leaves_the_rederived_means(published):
    """A query its retriever skipped (the stored per-query file says so) is left out of the
    re-derived means as the board leaves it out; a board that still counts it differs, named."""
    path = sorted((published / "runs/bm25").glob("*.parquet"))[0]
    frame = pl.read_parquet(path)
    qid = frame.filter(pl.col("setting") == "statement-statement")["query_id"][0]
    hit = (pl.col("query_id") == qid) & (pl.col("setting") == "statement-statement")
    marked = frame.with_columns(
        error=pl.when(hit).then(pl.lit("skipped: md5 planted")).otherwise(pl.col("error"))
    )
    marked.write_parquet(path)
    v = verdict(published)
    where = "bm25 statement-statement"
    assert [(d.where, d.published, d.recomputed) for d in checks_named(v, "skipped count")] == [
        (where, "0", "1")
    ]
    # the TREC file still holds the query: the board's mean, which counted it, now differs
    assert any(d.where == where for d in checks_named(v, "nDCG"))


# ---------------------------------------------------------------- forged bundles (#90)


def rehash(bench_dir: Path) -> None:
    """The forger's step: the manifest's hashes rewritten to the files as they now are."""
    import hashlib

    path = bench_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    files = manifest.get("files") or {}
    for name in list(files):
        if not (bench_dir / name).exists():
            del files[name]
            continue
        data = (bench_dir / name).read_bytes()
        files[name] = {
            **files[name],
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    path.write_text(json.dumps(manifest))


def test_a_bundle_cannot_switch_verification_off(published):
    """Each escape hatch that verified before: no `files` in the manifest (nothing hashed),
    the judgments deleted with their hash (grades inverted), `ratings.soft` set; each now
    fails, named. An unchecked category passes only where the reader allows it by name."""
    bench_dir = published / "evaluation_benchmark"
    manifest_path = bench_dir / "manifest.json"
    original = manifest_path.read_text()
    manifest = json.loads(original)
    del manifest["files"]
    manifest_path.write_text(json.dumps(manifest))
    v = verdict(published)
    assert not v.passed and any("no `files`" in d.recomputed for d in v.differences), v.table()
    manifest_path.write_text(original)

    judgments = bench_dir / "judgments.parquet"
    saved = judgments.read_bytes()
    judgments.unlink()
    rehash(bench_dir)
    v = verdict(published)
    assert any(d.where == "judgments.parquet" for d in checks_named(v, "bundle")), v.table()
    judgments.write_bytes(saved)
    manifest_path.write_text(original)

    manifest = json.loads(original)
    manifest["ratings"] = {**(manifest.get("ratings") or {}), "soft": True}
    manifest_path.write_text(json.dumps(manifest))
    v = verdict(published)  # the board's joint intervals, which soft grades cannot have, differ
    assert v.refused == ["soft-grades"] and not v.passed
    manifest_path.write_text(original)

    (published / "leaderboard/leaderboard.parquet").unlink()
    v = verdict(published)
    assert not v.differences and v.refused == ["board"] and not v.passed
    assert "board could not be checked" in v.summary()
    allowed = verify(bench_dir, published / "runs", published / "leaderboard", flips=FLIPS,
                     allowed=["board"])  # fmt: skip
    assert allowed.passed and "not checked: board" in allowed.summary()
    proc = saber_verify(published)
    assert proc.returncode == 1 and "--allow-unchecked" in proc.stderr
    with pytest.raises(ValueError, match="not one of"):
        verify(bench_dir, published / "runs", published / "leaderboard", allowed=["grades"])


def test_the_order_tie_rule_is_re_derived_not_waved_through(published):
    """`ties: order` in board.json with a board mean moved by 0.2 verified before ("all
    agree"); now the nDCG is recomputed in numpy's order and the mean is named."""
    settings_path = published / "leaderboard/board.json"
    settings = json.loads(settings_path.read_text())
    settings["ties"] = "order"
    settings_path.write_text(json.dumps(settings))
    board_path = published / "leaderboard/leaderboard.parquet"
    board = pl.read_parquet(board_path)
    board.with_columns(pl.col("ndcg@10") + 0.2).write_parquet(board_path)
    v = verdict(published)
    assert len(checks_named(v, "nDCG")) >= board.height, v.table()


def test_forged_decisions_and_a_shrunk_holm_family_are_named(published):
    """A `better` on a pair verify finds far from significant, its row claiming 100 flips (the
    tolerance once grew from that count); and the least significant pairs deleted, which
    shrinks the Holm family: each named."""
    tests_path = published / "leaderboard/significance.parquet"
    tests = pl.read_parquet(tests_path)
    overall = tests.filter(pl.col("domain") == "Overall")
    weakest = overall.sort("p_randomization", descending=True).row(0, named=True)
    forged = tests.with_columns(
        pl.when((pl.col("a") == weakest["a"]) & (pl.col("b") == weakest["b"])
                & (pl.col("domain") == "Overall") & (pl.col("setting") == weakest["setting"]))
        .then(pl.struct(better=pl.col("a"), p_randomization=pl.lit(0.0001),
                        randomization_resamples=pl.lit(100, dtype=pl.Int64)))
        .otherwise(pl.struct("better", "p_randomization", "randomization_resamples"))
        .struct.unnest()
    )  # fmt: skip
    forged.select(tests.columns).write_parquet(tests_path)
    v = verdict(published)
    where = f"{weakest['a']} vs {weakest['b']}"
    assert any(where in d.where for d in checks_named(v, "better")), v.table()
    assert any(where in d.where for d in checks_named(v, "randomization p")), v.table()
    tests.write_parquet(tests_path)
    keep = tests.filter(
        ~((pl.col("domain") == "Overall") & (pl.col("setting") == weakest["setting"])
          & (pl.col("a") == weakest["a"]) & (pl.col("b") == weakest["b"]))
    )  # fmt: skip
    keep.write_parquet(tests_path)
    v = verdict(published)
    family = checks_named(v, "Holm family")
    assert [d.where for d in family] == [f"{weakest['setting']} Overall: pairs tested"], v.table()


def test_a_system_dropped_from_the_board_is_named(published):
    """Cherry-picking: a system's rows and tests removed from the board (verify once read only
    the board's own systems): its runs are still beside the board, and it is named."""
    board_path = published / "leaderboard/board.json"
    board = pl.read_parquet(published / "leaderboard/leaderboard.parquet")
    dropped = board["retriever"][0]
    board.filter(pl.col("retriever") != dropped).write_parquet(
        published / "leaderboard/leaderboard.parquet"
    )
    tests_path = published / "leaderboard/significance.parquet"
    tests = pl.read_parquet(tests_path)
    tests.filter((pl.col("a") != dropped) & (pl.col("b") != dropped)).write_parquet(tests_path)
    v = verdict(published)
    named = checks_named(v, "system on the board")
    assert named and {d.where.split()[0] for d in named} == {dropped}, v.table()
    assert board_path.exists()


def test_columns_once_unchecked_are_re_derived(published):
    """`ndcg@10_linear` set to 0.99, `ndcg_corrected` moved, a domain's interval string and a
    joint decision forged: each verified before, each is named now."""
    from saber_assets.leaderboard.board import domain_ci

    board_path = published / "leaderboard/leaderboard.parquet"
    board = pl.read_parquet(board_path)
    domain = next(c for c in board.columns if c.endswith(" ci") and board[c][0])
    forged = board.with_columns(
        pl.lit(0.99).alias("ndcg@10_linear"),
        (pl.col("ndcg_corrected") + 0.1).alias("ndcg_corrected"),
        pl.lit("[0.001, 0.999]").alias(domain),
    )
    forged.write_parquet(board_path)
    tests_path = published / "leaderboard/significance.parquet"
    tests = pl.read_parquet(tests_path)
    first = tests.filter(pl.col("domain") == "Overall").row(0, named=True)
    flipped = first["a"] if first["better_joint"] != first["a"] else first["b"]
    tests.with_columns(
        pl.when((pl.col("domain") == "Overall") & (pl.col("a") == first["a"])
                & (pl.col("b") == first["b"]) & (pl.col("setting") == first["setting"]))
        .then(pl.lit(flipped)).otherwise(pl.col("better_joint")).alias("better_joint")
    ).write_parquet(tests_path)  # fmt: skip
    v = verdict(published)
    kinds = {d.check for d in v.differences}
    assert {"linear nDCG", "joint interval", "domain interval", "joint better"} <= kinds, v.table()
    assert domain_ci(domain[: -len(" ci")]) == domain


def test_manifest_facts_are_checked_against_the_bundle(published):
    """Rounds 4 → 40 and K 3 → 50 in the manifest verified before; now each is named. The
    per-query files deleted once dropped their checks silently; now that is unchecked, named."""
    bench_dir = published / "evaluation_benchmark"
    manifest_path = bench_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["tournament"]["rounds"] *= 10
    manifest["candidates_per_group"] = 50
    manifest_path.write_text(json.dumps(manifest))
    v = verdict(published)
    assert {"tournament rounds", "candidates per query"} <= {d.check for d in v.differences}
    for path in (published / "runs").rglob("*.parquet"):
        path.unlink()
    v = verdict(published)
    assert "per-query" in v.refused


def test_each_domains_position_bias_counts_are_recounted(published):
    """The judgments carry the domain partition they were made in: a manifest whose per-domain
    counts were shuffled between domains (same sums, which once was all verify checked) is
    named, domain by domain."""
    bench_dir = published / "evaluation_benchmark"
    assert "domain" in pl.read_parquet(bench_dir / "judgments.parquet").columns
    manifest_path = bench_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    bias = [c for c in manifest["checks"] if c["check"] == "judge_position_bias"]
    bias[0]["first_wins"], bias[1]["first_wins"] = bias[1]["first_wins"], bias[0]["first_wins"]
    if bias[0]["first_wins"] == bias[1]["first_wins"]:  # equal counts: move one win across
        bias[0]["first_wins"] += 1
        bias[1]["first_wins"] -= 1
    manifest_path.write_text(json.dumps(manifest))
    v = verdict(published)
    named = {d.where for d in checks_named(v, "position-bias count")}
    assert f"first-shown wins, {bias[0]['domain']}" in named, v.table()


def test_the_banner_names_what_was_not_checked():
    """The sentence the report, the explorer and the card print, read off the verdict: its
    count, and the names of what was not checked (the banner once ignored them)."""
    from saber_assets.benchmark.data import verification_line
    from saber_assets.leaderboard.verdict import Verification

    v = Verification(allowed=frozenset({"board"}))
    v.count("grade", 1234)
    v.skip("board", "no leaderboard.parquet")
    manifest = {"verification": v.to_dict()}
    assert verification_line(manifest) == (
        "Verified: 1,234 published numbers recomputed from the benchmark's own files "
        "(`saber verify`), all agree. Not checked: board."
    )
    refused = Verification()
    refused.count("grade", 7)
    refused.skip("soft-grades", "probabilities")
    line = verification_line({"verification": refused.to_dict()})
    assert line.startswith("NOT verified: 7 published numbers agree") and "soft-grades" in line
    refused.differ("grade", "q1", 1.0, 2.0)
    line = verification_line({"verification": refused.to_dict()})
    assert line.startswith("NOT verified: 1 of 7 published numbers differ")


def fill_verdict(root: Path):
    """verify's full-corpus part alone on ``root`` (the whole verdict is the first test's)."""
    from saber_assets.benchmark.data import Benchmark
    from saber_assets.leaderboard.board import Board
    from saber_assets.leaderboard.verdict import Verification
    from saber_assets.leaderboard.verify import verify_grades
    from saber_assets.leaderboard.verify_fill import verify_full_corpus

    out = Verification()
    bench = Benchmark.read(root / "evaluation_benchmark")
    strengths = verify_grades(bench, out)
    board_dir = root / "leaderboard"
    board = Board.read_table(board_dir)
    verify_full_corpus(bench, root / "runs", board_dir, board, Board.read_settings(board_dir),
                       strengths, out, FLIPS)  # fmt: skip
    return out


def forge(path: Path, change) -> None:
    change(pl.read_parquet(path)).write_parquet(path)


def test_the_filled_board_is_re_derived_and_each_forgery_named(published, tmp_path):
    """The full-corpus track re-derived from the runs' top 10s, the judgments and the fill's
    games: it agrees as built; a hole's grade raised, a hole's row dropped, a game's outcome
    flipped, a filled score raised, a `beats_filled` invented, a top 10 changed and the fill's
    files deleted are each named."""
    clean = fill_verdict(published)
    assert clean.passed and not clean.differences, clean.table()
    for kind in ("judged@10", "full_ndcg@10", "pooled by", "fill opponents", "fill games",
                 "fill grade", "judged@10_filled", "full_ndcg@10_filled", "leave-one-out drop",
                 "beats (filled)"):  # fmt: skip
        assert clean.checked.get(kind, 0) > 0, (kind, clean.checked)

    def copy() -> Path:
        root = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(published, root)
        return root

    def named(root: Path) -> set[str]:
        return {d.check for d in fill_verdict(root).differences}

    fill = "leaderboard/full_corpus_fill.parquet"
    board = "leaderboard/full_corpus_board.parquet"
    first = pl.col("document_id") == pl.read_parquet(published / fill)["document_id"][0]
    root = copy()
    forge(root / fill, lambda f: f.with_columns(
        pl.when(first).then(pl.col("grade") + 1.0).otherwise(pl.col("grade")).alias("grade")))  # fmt: skip
    assert "fill grade" in named(root)
    root = copy()
    forge(root / fill, lambda f: f.filter(~first))
    assert "fill" in named(root)
    root = copy()
    forge(root / fill, lambda f: f.with_columns(
        pl.when(first).then(pl.col("outcomes").list.eval(1.0 - pl.element()))
        .otherwise(pl.col("outcomes")).alias("outcomes")))  # fmt: skip
    assert {"fill games", "fill grade"} & named(root)
    root = copy()
    forge(root / board, lambda b: b.with_columns(pl.col("full_ndcg@10_filled") + 0.05))
    assert "full_ndcg@10_filled" in named(root)
    root = copy()
    systems = pl.read_parquet(published / board)
    loser, winner = systems["retriever"][-1], systems["retriever"][0]
    forge(root / board, lambda b: b.with_columns(
        pl.when(pl.col("retriever") == loser).then(pl.lit(winner))
        .otherwise(pl.col("beats_filled")).alias("beats_filled")))  # fmt: skip
    assert "beats (filled)" in named(root)
    root = copy()
    run = sorted((root / "runs").glob("*/full-corpus/*.trec"))[0]  # the file read first
    lines = run.read_text().splitlines()
    qid, q0, _, rank, score, tag = lines[0].split()
    run.write_text("\n".join([f"{qid} {q0} planted-document {rank} {score} {tag}", *lines[1:]]))
    assert {"judged@10", "full_ndcg@10", "fill"} & named(root)
    root = copy()
    (root / fill).unlink()
    assert "full-corpus board" in named(root)
