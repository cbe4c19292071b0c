"""`saber verify`: every number a benchmark publishes, recomputed from its own files.

From the exchange-format folder (queries, documents, judgments, manifest), the TREC runs the
runs stage wrote beside it and the board it published (``leaderboard.parquet``,
``significance.parquet``, ``board.json``), and nothing else — no home, no stores, no cache:

- the bundle: each file's size and sha256 against the manifest (``Benchmark.read``);
- the grades: Bradley–Terry refitted from ``judgments.parquet`` with **scikit-learn**'s logistic
  regression (the published fit's own definition, ``ratings/bradley_terry.py``) or **choix**,
  min–max rescaled, against ``relevance_scores``;
- the judge checks: the first-shown share recounted, its Wilson interval by **scipy**
  (``binomtest``), each domain's verdict re-decided, and the order-consistency count;
- nDCG@k per query by **scikit-learn**'s ``ndcg_score`` (tie-averaged, gain 2^rel − 1 given as
  the true relevance) from the TREC scores; the means per system, setting and domain with their
  query and failure counts; the bootstrap intervals from the board's seeded query draws (equal);
- the paired tests: the mean difference, the t-test from its formula (scipy's t distribution),
  the randomization test by scipy's ``permutation_test`` at ``VERIFY_FLIPS`` (within the
  Monte-Carlo tolerance of both draws), Holm, each ``better``, ``beats`` and the tie groups;
- the joint intervals and rank intervals, re-derived from the bundle's judgments and the runs
  (the board's seeded draws: equal).

A published number that differs beyond its tolerance is a ``Difference``; the verdict passes
when there is none. Pure: no Dagster (``leaderboard/verify_asset.py`` runs it in the build).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.benchmark.data import MANIFEST, Benchmark, BenchmarkFormatError
from saber_assets.leaderboard.board import (
    CI_HIGH,
    CI_HIGH_JOINT,
    CI_LOW,
    CI_LOW_JOINT,
    TABLE,
    TESTS,
    Board,
    BoardSettings,
    domain_ci,
    domain_mean,
    domain_queries,
)
from saber_assets.leaderboard.joint import benchmark_posteriors, joint_intervals
from saber_assets.leaderboard.recompute import (
    bt_strengths_sklearn,
    holm_adjusted,
    min_max,
    monte_carlo_tolerance,
    ndcg_in_order,
    ndcg_sklearn,
    near_alpha,
    seeded_interval,
    sign_flip_p,
    t_test_p,
    wilson,
)
from saber_assets.leaderboard.significance import rank_intervals
from saber_assets.leaderboard.verdict import (
    EXACT,
    RATING_TOLERANCE,
    UNCHECKED,
    VERIFY_FLIPS,
    VERIFY_MAX_FLIPS,
    Verification,
)
from saber_assets.leaderboard.verify_fill import read_trec_file, verify_full_corpus
from saber_assets.ontology.domains import keys_for
from saber_assets.outputs import write_whole
from saber_assets.runs.evaluate import skipped
from saber_assets.runs.files import run_file_parts, stored_runs, trec_files

# ---------------------------------------------------------------- the grades and the judge


def verify_grades(bench: Benchmark, out: Verification) -> dict[str, np.ndarray] | None:
    """Each query's published grades against a refit of its bundled judgments; the refit
    strengths by query (candidate order) where the prior is l2 (the scale the fill's holes are
    placed on), None where the grades could not be refitted."""
    if bench.judgments is None:
        judged = [k for k in ("judge_backend", "tournament", "ratings") if k in bench.manifest]
        if judged:  # a tournament was run: its judgments are what the grades stand on
            out.differ("bundle", "judgments.parquet", "the judgments of the tournament the "
                       f"manifest describes ({', '.join(judged)})", "no judgments.parquet")  # fmt: skip
        else:
            out.skip("judgments", "the bundle has no judgments.parquet and names no judge")
        return None
    fit_cfg = bench.manifest.get("ratings") or {}
    if fit_cfg.get("soft"):
        out.skip("soft-grades", UNCHECKED["soft-grades"])
        return None
    prior, both = fit_cfg.get("prior", "l2"), bool(fit_cfg.get("both_orders"))
    fitted: dict[str, np.ndarray] = {}
    by_query = {k[0]: f for k, f in bench.judgments.partition_by("query_id", as_dict=True).items()}
    for qid, cands, grades in bench.queries.select(
        "id", "candidates", "relevance_scores"
    ).iter_rows():
        index = {c: i for i, c in enumerate(cands)}
        wins, ties = [], []
        judged = by_query.get(qid)
        rows = (
            judged.select(
                "shown_first",
                "shown_second",
                "winner",
                "swapped_winner" if "swapped_winner" in judged.columns else pl.lit(None, pl.Int64),
            ).iter_rows()  # fmt: skip
            if judged is not None
            else []
        )
        for first, second, winner, swapped in rows:
            if both and winner is not None and swapped is not None and winner != swapped:
                ties.append((index[first], index[second]))
                continue
            decided = winner if winner is not None else (swapped if both else None)
            if decided is not None:
                loser = second if decided == first else first
                wins.append((index[decided], index[loser]))
        if prior == "choix":
            if ties:
                out.skip("choix-ties", f"grades of {qid}: choix's prior with tied pairs")
                continue
            import choix  # at use: it loads scipy.stats, 0.3 s of every run worker's start

            strengths = (
                choix.mm_pairwise(
                    len(cands),
                    wins,
                    alpha=float(fit_cfg.get("alpha", 0.1)),
                    max_iter=100_000,
                    tol=1e-12,
                )  # fmt: skip
                if wins
                else np.zeros(len(cands))
            )
        else:
            strengths = bt_strengths_sklearn(len(cands), wins, ties, float(fit_cfg.get("c", 1.0)))
            fitted[qid] = np.asarray(strengths, dtype=np.float64)
        refit = min_max(np.asarray(strengths, dtype=np.float64))
        gap = np.abs(refit - np.asarray(grades))
        out.count("grade", len(cands))
        bad = np.flatnonzero(gap > RATING_TOLERANCE)
        if bad.size:  # the largest gap of the query, named, and how many more
            worst = int(bad[np.argmax(gap[bad])])
            out.differ("grade", f"query {qid}, candidate {cands[worst]} ({bad.size} of "
                       f"{len(cands)} candidates differ)", float(grades[worst]),
                       float(refit[worst]), f"± {RATING_TOLERANCE:g}")  # fmt: skip
    return fitted


def verify_judge_checks(bench: Benchmark, out: Verification) -> None:
    """The position-bias checks the manifest records, re-decided from their counts, and their
    counts summed against the bundle's judgments; the order-consistency count."""
    checks = [
        c for c in bench.manifest.get("checks") or []
        if isinstance(c, dict) and c.get("check") == "judge_position_bias"
    ]  # fmt: skip
    band = (bench.manifest.get("tournament") or {}).get("position_bias_band")
    counted = [c for c in checks if "first_wins" in c and "decided" in c]
    for c in counted:
        lo, hi = wilson(int(c["first_wins"]), int(c["decided"]))
        biased = band is not None and c["decided"] > 0 and (lo > band[1] or hi < band[0])
        out.same("position-bias verdict", f"domain {c.get('domain')}", c.get("passed"), not biased)
    j = bench.judgments
    if j is None:  # verify_grades said why: a difference, or `judgments` unchecked
        return
    decided = j.filter(pl.col("winner").is_not_null())
    first = int((decided["winner"] == decided["shown_first"]).sum())
    if "domain" in j.columns and j["domain"].is_not_null().all():  # each domain's own counts
        by_domain = {
            d: (int(w), int(n))
            for d, w, n in decided.group_by("domain")
            .agg((pl.col("winner") == pl.col("shown_first")).sum(), pl.len())
            .iter_rows()
        }
        for c in counted:
            w, n = by_domain.get(c.get("domain"), (0, 0))
            out.same("position-bias count", f"first-shown wins, {c.get('domain')}",
                     int(c["first_wins"]), w)  # fmt: skip
            out.same("position-bias count", f"decided judgments, {c.get('domain')}",
                     int(c["decided"]), n)  # fmt: skip
    if counted:
        out.same("position-bias count", "first-shown wins, all domains",
                 sum(int(c["first_wins"]) for c in counted), first)  # fmt: skip
        out.same("position-bias count", "decided judgments, all domains",
                 sum(int(c["decided"]) for c in counted), decided.height)  # fmt: skip
    elif checks:
        out.differ("position-bias count", "the manifest's judge_position_bias checks",
                   "first-shown wins and decided judgments", "no counts")  # fmt: skip
    recorded = bench.manifest.get("order_consistency")
    if isinstance(recorded, dict) and "swapped_winner" in j.columns:
        both = j.filter(pl.col("winner").is_not_null() & pl.col("swapped_winner").is_not_null())
        agree = int((both["winner"] == both["swapped_winner"]).sum())
        out.same("order consistency", "pairs judged in both orders", recorded.get("both"),
                 both.height)  # fmt: skip
        out.same("order consistency", "of them agreeing", recorded.get("agree"), agree)


# ---------------------------------------------------------------- the runs and nDCG


def scored_runs(
    bench: Benchmark, runs_dir: Path, k: int, excluded: Iterable[str], out: Verification,
    on_board: set[tuple[str, str]] | None = None, ties: str = "average",
) -> pl.DataFrame:  # fmt: skip
    """retriever, setting, query_id, domains, failed, scores (candidate order), ndcg: every query
    of every domain a retriever's files cover in a setting, from its TREC lines (a query with
    none failed: nDCG 0, as the board counts it). A query in two domains' files is read from the
    first, as the board reads its runs."""
    doc_ids = bench.documents["id"].to_list()
    key_of = keys_for(bench.domain_list())
    title_of = {v: t for t, v in key_of.items()}
    excluded = set(excluded)
    queries = [
        row for row in bench.queries.select("id", "candidates", "relevance_scores", "domains")
        .iter_rows() if row[0] not in excluded
    ]  # fmt: skip
    rows = []
    for retriever, files in trec_files(runs_dir).items():
        seen: dict[str, set[str]] = {}
        for path in files:
            setting = run_file_parts(path)[1]
            if on_board is not None and (retriever, setting) not in on_board:
                continue  # ``on_board``: the (retriever, setting) pairs read, None for all
            read = read_trec_file(path, title_of, out, "run file")
            if read is None:
                continue
            domain, _, tagged = read
            run = {q: docs for r in tagged.values() for q, docs in r.items()}
            done = seen.setdefault(setting, set())
            for qid, cands, grades, domains in queries:
                if domain not in domains or qid in done:
                    continue
                done.add(qid)
                ranked = run.get(qid)
                scores = None
                if ranked:
                    listed = [ranked.get(doc_ids[c]) for c in cands]
                    if None in listed or len(ranked) != len(cands):
                        out.differ("run file", f"{path}: query {qid}",
                                   f"{len(cands)} candidates scored",
                                   f"{len(ranked)} lines, {listed.count(None)} candidates missing")  # fmt: skip
                        continue
                    scores = listed
                ndcg_of = ndcg_in_order if ties == "order" else ndcg_sklearn
                s, g = np.array(scores or []), np.array(grades)
                ndcg = ndcg_of(s, g, k) if scores else 0.0
                # the linear gain: 2^gain − 1 = grade, so the gain is log2(1 + grade)
                linear = ndcg_of(s, np.log2(1.0 + g), k) if scores else 0.0
                rows.append((retriever, setting, qid, domains, scores is None, scores, ndcg,
                             linear))  # fmt: skip
    return pl.DataFrame(
        rows, orient="row",
        schema={"retriever": pl.String, "setting": pl.String, "query_id": pl.String,
                "domains": pl.List(pl.String), "failed": pl.Boolean,
                "scores": pl.List(pl.Float64), "ndcg": pl.Float64, "ndcg_linear": pl.Float64},
    )  # fmt: skip


def verify_systems(on_board: set[tuple[str, str]], runs_dir: Path, settings: BoardSettings,
                   out: Verification) -> None:  # fmt: skip
    """Every system with TREC runs beside the board has its row: one dropped from the board is a
    difference, unless the board's settings name it off the board (a retriever that left the
    registry), and then the verdict says so."""
    off_board = set(settings.off_board)
    for retriever, files in trec_files(runs_dir).items():
        settings_run = sorted({run_file_parts(f)[1] for f in files})
        for setting in settings_run:
            out.count("system on the board")
            if (retriever, setting) in on_board:
                continue
            if retriever in off_board:
                out.not_checked.append(f"off the board: {retriever} ({setting}) has runs and "
                                       "no row; the board names it off the board")  # fmt: skip
                continue
            out.differ("system on the board", f"{retriever} {setting}", "a row",
                       "TREC runs and no row")  # fmt: skip


def skipped_queries(runs_dir: Path) -> set[tuple[str, str, str]]:
    """(retriever, setting, query) of every query a retriever skipped by its own rule, from the
    per-query files the runs stage stored beside its TREC runs (a TREC file has no line for a
    skipped query, as for a failed one; the board leaves a skipped one out of its means)."""
    runs = stored_runs(runs_dir, columns=["query_id", "setting", "error"])
    if runs.is_empty():
        return set()
    return set(runs.filter(skipped(runs)).select("retriever", "setting", "query_id").iter_rows())


def verify_per_query(runs: pl.DataFrame, runs_dir: Path, out: Verification) -> None:
    """The per-query nDCG the runs stage stored (``RETRIEVER/DOMAIN.parquet``), where present."""
    for retriever in runs["retriever"].unique().sort().to_list():
        stored = stored_runs(runs_dir, [retriever], ["query_id", "setting", "ndcg"])
        if stored.is_empty():
            out.skip("per-query", f"{retriever}: no per-query files beside its TREC runs")
            continue
        stored = stored.drop("retriever").unique(["query_id", "setting"], keep="first")
        mine = runs.filter(pl.col("retriever") == retriever).select("query_id", "setting", "ndcg")
        joined = mine.join(stored, on=["query_id", "setting"], how="left", suffix="_stored")
        for qid, setting, ndcg, published in joined.iter_rows():
            out.close("per-query nDCG", f"{retriever} {setting} {qid}", published, ndcg, EXACT)


def verify_board_rows(board: pl.DataFrame, runs: pl.DataFrame, domains: list[str],
                      settings: BoardSettings, out: Verification) -> None:  # fmt: skip
    """Each board row's means, counts and intervals, overall and per domain."""
    k, resamples, seed = settings.k, settings.bootstrap_resamples, settings.seed
    metric = f"ndcg@{k}"
    for row in board.iter_rows(named=True):
        retriever, setting = row["retriever"], row["setting"]
        where = f"{retriever} {setting}"
        mine = runs.filter((pl.col("retriever") == retriever) & (pl.col("setting") == setting))
        mine = mine.sort("query_id")
        if mine.height == 0:
            out.differ("run", where, f"{row.get('queries')} queries", "no TREC run")
            continue
        out.same("query count", where, row.get("queries"), mine.height)
        out.same("failure count", where, row.get("failed"), int(mine["failed"].sum()))
        if "skipped" in mine.columns:  # left out of the means (``evaluate.score_table``)
            out.same("skipped count", where, row.get("skipped", 0), int(mine["skipped"].sum()))
            mine = mine.filter(~pl.col("skipped"))
        v = mine["ndcg"].to_numpy()
        out.close("nDCG", where, row.get(metric), float(v.mean()), EXACT)
        if f"{metric}_linear" in row:
            out.close("linear nDCG", where, row[f"{metric}_linear"],
                      float(mine["ndcg_linear"].mean()), 1e-9)  # fmt: skip
        lo, hi = seeded_interval(v, resamples, seed)
        out.close("bootstrap interval", f"{where} (low)", row.get(CI_LOW), lo, EXACT)
        out.close("bootstrap interval", f"{where} (high)", row.get(CI_HIGH), hi, EXACT)
        for d in domains:
            if d not in row:
                continue
            part = np.array(
                [n for n, ds in zip(v, mine["domains"].to_list(), strict=True) if d in ds]
            )
            out.same("query count", f"{where} {d}", row.get(domain_queries(d)), len(part))
            out.close("nDCG", f"{where} {d}", row.get(domain_mean(d)), float(part.mean()) if len(part)
                      else float("nan"), EXACT)  # fmt: skip
            if domain_ci(d) in row:
                d_lo, d_hi = seeded_interval(part, resamples, seed)
                out.same("domain interval", f"{where} {d}", row[domain_ci(d)],
                         f"[{d_lo:.3f}, {d_hi:.3f}]" if len(part) else "")  # fmt: skip


# ---------------------------------------------------------------- the tests and the tie groups


def pair_matrix(runs: pl.DataFrame, setting: str, domain: str | None):
    """(systems, queries × systems nDCG) over the queries every system of the setting scored."""
    part = runs.filter(pl.col("setting") == setting)
    if domain is not None:
        part = part.filter(pl.col("domains").list.contains(domain))
    wide = part.pivot(on="retriever", index="query_id", values="ndcg").drop_nulls()
    names = sorted(c for c in wide.columns if c != "query_id")
    return names, wide.sort("query_id").select(names).to_numpy().astype(np.float64)


def verify_tests(tests: pl.DataFrame, runs: pl.DataFrame, settings: BoardSettings,
                 out: Verification, flips: int = VERIFY_FLIPS) -> None:  # fmt: skip
    """Each published pair's difference and p-values, the Holm family (every pair of the
    setting's systems, none dropped), and its ``better`` by verify's own draws alone: a pair
    whose Holm p lies near α is drawn again with ten times the flips, up to ``VERIFY_MAX_FLIPS``;
    one still undecidable there must be one the board marks ``near_threshold``."""
    alpha = settings.alpha
    undecided = 0  # decisions neither verify nor the board can make at their caps
    if "randomization_resamples" not in tests.columns:  # a board from before they could grow
        tests = tests.with_columns(pl.lit(settings.test_resamples).alias("randomization_resamples"))
    if "near_threshold" not in tests.columns:
        tests = tests.with_columns(pl.lit(False).alias("near_threshold"))
    for (setting, domain), group in tests.group_by(["setting", "domain"], maintain_order=True):
        names, m = pair_matrix(runs, setting, None if domain == "Overall" else domain)
        col = {n: i for i, n in enumerate(names)}
        family = len(names) * (len(names) - 1) // 2
        out.same("Holm family", f"{setting} {domain}: pairs tested", group.height, family)
        pairs = list(group.select("a", "b", "mean_diff", "p_ttest", "p_randomization",
                                  "randomization_resamples", "better", "near_threshold")
                     .iter_rows())  # fmt: skip
        # a domain's tests decide no tie group or `beats`: a fifth of the flips (scipy's test
        # costs ~0.3 s a pair at 10,000 flips of 500 queries; the full config has ~1,000 pairs)
        here = flips if domain == "Overall" else max(1_000, flips // 5)
        diffs, p_v, used, p_t = [], [], [], []
        for a, b, diff, p_pub, p_r, drawn, *_ in pairs:
            where = f"{setting} {domain}: {a} vs {b}"
            if a not in col or b not in col:
                out.differ("paired test", where, "two systems with runs", "no run for one")
                continue
            d = m[:, col[a]] - m[:, col[b]]
            out.close("mean difference", where, diff, float(d.mean()), EXACT)
            p_t.append(t_test_p(d))
            out.close("t-test p", where, p_pub, p_t[-1], 1e-9)
            diffs.append(d)
            p_v.append(sign_flip_p(d, here, settings.seed))
            used.append(here)
            # verify's own draws set the tolerance: a count the bundle states never widens it
            tol = monte_carlo_tolerance(max(p_v[-1], p_r), max(int(drawn), here), here)
            out.count("randomization p")
            both_at_floor = p_r <= 1 / (max(int(drawn), here) + 1) and p_v[-1] <= 5 / (here + 1)
            if not both_at_floor and abs(p_r - p_v[-1]) > tol:
                out.differ("randomization p", where, p_r, p_v[-1], f"± {tol:.2g} (Monte Carlo)")
        if len(diffs) != len(pairs):
            continue
        # as far as the board draws; ten times further where the board claims a decision its
        # own draws made, so that verify's error is the smaller one where the two meet
        caps = [VERIFY_MAX_FLIPS * (1 if marked else 10) for *_, marked in pairs]
        near = near_alpha(p_v, used, alpha)
        while redo := [k for k in range(len(pairs)) if near[k] and used[k] < caps[k]]:
            for k in redo:
                used[k] = min(used[k] * 10, caps[k])
                p_v[k] = sign_flip_p(diffs[k], used[k], settings.seed)
            near = near_alpha(p_v, used, alpha)
        for name, published, recomputed in (
            ("t-test Holm p", group["p_ttest_holm"], holm_adjusted(p_t)),
            ("randomization Holm p", group["p_randomization_holm"],
             holm_adjusted(group["p_randomization"].to_list())),
        ):  # fmt: skip
            for (a, b, *_), x, y in zip(pairs, published, recomputed, strict=True):
                out.close(name, f"{setting} {domain}: {a} vs {b}", x, y, 1e-9)
        adjusted = holm_adjusted(p_v)
        for k, (a, b, diff, *_, better, marked) in enumerate(pairs):
            p_vh = adjusted[k]
            decided = (a if diff > 0 else b) if p_vh < alpha and diff != 0 else None
            where = f"{setting} {domain}: {a} vs {b}"
            out.count("better")
            if near[k]:  # undecidable by verify at its cap: only where the board says so too
                if marked:
                    undecided += 1
                else:
                    out.differ("better", where, better, "undecided at "
                               f"{used[k]:,} flips (Holm p {p_vh:.4g})",
                               "the board marks it near_threshold")  # fmt: skip
                continue
            if decided != better:
                out.differ("better", where, better, decided,
                           f"Holm p {p_vh:.4g} vs α {alpha} at {used[k]:,} flips")  # fmt: skip
    if undecided:
        out.count("undecided decision", undecided)
    tested = set(tests.filter(pl.col("domain") == "Overall")["setting"].to_list())
    for setting in sorted(set(runs["setting"].to_list()) - tested):
        n = len(pair_matrix(runs, setting, None)[0])
        if n > 1:  # every setting's systems are tested in pairs: none may vanish
            out.same("Holm family", f"{setting} Overall: pairs tested", 0, n * (n - 1) // 2)


def verify_tie_groups(board: pl.DataFrame, tests: pl.DataFrame, settings: BoardSettings,
                      out: Verification, column: str = "tie_group") -> None:  # fmt: skip
    """``beats`` and ``tie_group`` of each row from the overall tests' decisions (``column``
    ``tie_group_joint``: the joint test's groups, ``better`` its decisions; no ``beats``)."""
    metric = f"ndcg@{settings.k}"
    overall = tests.filter(pl.col("domain") == "Overall")
    for (setting,), part in board.sort(metric, descending=True).group_by(
        "setting", maintain_order=True
    ):
        decided = {
            frozenset((a, b)): w
            for s, a, b, w in overall.select("setting", "a", "b", "better").iter_rows()
            if s == setting
        }
        group, top = 0, None
        for name, tie_group in part.select("retriever", column).iter_rows():
            if top is None or decided.get(frozenset((top, name))) == top:
                group, top = group + 1, name
            out.same(column.replace("_", " "), f"{setting} {name}", tie_group, group)
        if column != "tie_group":
            continue
        for name, beats in part.select("retriever", "beats").iter_rows():
            losers = sorted((set(pair) - {name}).pop() for pair, w in decided.items() if w == name)
            out.same("beats", f"{setting} {name}", beats or "", ", ".join(losers))
        if "undecided" in part.columns and "near_threshold" in overall.columns:
            near = overall.filter((pl.col("setting") == setting) & pl.col("near_threshold"))
            pairs = [(a, b) for a, b in near.select("a", "b").iter_rows()]
            for name, shown in part.select("retriever", "undecided").iter_rows():
                mine = sorted({b if a == name else a for a, b in pairs if name in (a, b)})
                out.same("undecided", f"{setting} {name}", shown or "", ", ".join(mine))


def verify_joint(bench: Benchmark, board: pl.DataFrame, runs: pl.DataFrame, settings: BoardSettings,
                 out: Verification, tests: pl.DataFrame | None = None) -> None:  # fmt: skip
    """The joint intervals, rank intervals and judge shares re-derived from the bundle's
    judgments and the runs (the board's seeded draws)."""
    columns = [CI_LOW_JOINT, CI_HIGH_JOINT, "judge_noise_share"]
    if not set(columns) <= set(board.columns) or board[CI_LOW_JOINT].is_null().all():
        if benchmark_posteriors(bench)[1] is None:  # they could be drawn: a board drops none
            out.differ("joint interval", "the board", "joint intervals", "none")
        return
    joint, _, why = joint_intervals(
        bench, runs, k=settings.k, ties="numpy" if settings.ties == "order" else "average",
        resamples=settings.bootstrap_resamples, curve_draws=0, seed=settings.seed,
        alpha=settings.alpha,
    )  # fmt: skip
    if joint is None:
        out.differ("joint interval", "the board", "joint intervals", f"none: {why}")
        return
    mine = {(r["setting"], r["retriever"]): r for r in joint.rows.iter_rows(named=True)}
    carried = [c for c in joint.rows.columns if c in board.columns and c not in
               ("setting", "retriever", "rank_ci_joint")]  # fmt: skip
    for row in board.iter_rows(named=True):
        key = (row["setting"], row["retriever"])
        where = f"{key[1]} {key[0]}"
        if key not in mine:
            out.differ("joint interval", where, row[CI_LOW_JOINT], "no row")
            continue
        for c in carried:  # the intervals, the corrected score, the judge's share and its error
            out.close("joint interval", f"{where} ({c})", row[c], mine[key][c], EXACT)
        out.same("joint rank interval", where, row.get("rank_ci_joint"), mine[key]["rank_ci_joint"])
    if tests is None or tests.is_empty() or "better_joint" not in tests.columns:
        return
    near = "near_threshold_joint"
    mine_tests = joint.tests if near in joint.tests.columns else joint.tests.with_columns(
        pl.lit(None, pl.Boolean).alias(near))  # fmt: skip
    theirs = {(s, a, b): (ph, bj, nj) for s, a, b, ph, bj, nj in mine_tests.select(
        "setting", "a", "b", "p_joint_holm", "better_joint", near).iter_rows()}  # fmt: skip
    overall = tests.filter(pl.col("domain") == "Overall")
    if near not in overall.columns:
        overall = overall.with_columns(pl.lit(None, pl.Boolean).alias(near))
    for s, a, b, ph, bj, nj in overall.select("setting", "a", "b", "p_joint_holm",
                                              "better_joint", near).iter_rows():  # fmt: skip
        where = f"{s}: {a} vs {b}"
        got = theirs.get((s, a, b))
        if got is None:
            out.differ("joint test", where, bj, "no joint test")
            continue
        out.close("joint test Holm p", where, ph, got[0], EXACT)
        out.same("joint better", where, bj, got[1])
        out.same("joint near threshold", where, nj, got[2])
    if "tie_group_joint" in board.columns:
        verify_tie_groups(
            board,
            overall.drop("better").rename({"better_joint": "better"}),
            settings,
            out,
            column="tie_group_joint",
        )


def verify_rank_intervals(board: pl.DataFrame, runs: pl.DataFrame, settings: BoardSettings,
                          out: Verification) -> None:  # fmt: skip
    """Each row's rank interval from the board's seeded query draws over the shared queries."""
    for (setting,), part in board.group_by("setting", maintain_order=True):
        names, m = pair_matrix(runs, setting, None)
        if len(names) < 2:
            continue
        ranks = rank_intervals(m, names, settings.bootstrap_resamples, settings.seed)
        mine = dict(ranks.select("retriever", "rank_ci").iter_rows())
        for name, rank_ci in part.select("retriever", "rank_ci").iter_rows():
            out.same("rank interval", f"{setting} {name}", rank_ci, mine.get(name))


# ---------------------------------------------------------------- the whole


def verify_manifest_facts(bench: Benchmark, out: Verification) -> None:
    """What the manifest states of the build that the bundle itself holds: the tournament's
    rounds (its judgments' last round) and K (each query's 3K candidates)."""
    k = bench.manifest.get("candidates_per_group")
    if isinstance(k, int) and bench.queries.height:
        sizes = sorted(set(bench.queries["candidates"].list.len().to_list()))
        out.same("candidates per query", "every query", [3 * k], sizes)
    rounds = (bench.manifest.get("tournament") or {}).get("rounds")
    j = bench.judgments
    if isinstance(rounds, int) and j is not None and j.height:
        out.same("tournament rounds", "the judgments' last round", rounds, int(j["round"].max()))


def verify_bundle_files(bench_dir: Path, out: Verification) -> None:
    """The manifest hashes every file of the bundle: a manifest without ``files``, or a table
    it does not list, verifies nothing (its hashes are what make an edit visible)."""
    try:
        listed = json.loads((bench_dir / "manifest.json").read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    if not isinstance(listed, dict) or not listed:
        out.differ("bundle", f"{bench_dir}/manifest.json", "a sha256 for every file",
                   "no `files`: nothing in the bundle is hashed")  # fmt: skip
        return
    out.count("bundle file", len(listed))
    for path in sorted(bench_dir.glob("*.parquet")):
        if path.name not in listed:
            out.differ("bundle", str(path), "listed in the manifest's files", "not listed")


def verify(bench_dir: Path, runs_dir: Path, board_dir: Path, flips: int = VERIFY_FLIPS,
           allowed: Iterable[str] = ()) -> Verification:  # fmt: skip
    """Every number the benchmark in ``bench_dir`` publishes with its runs (``runs_dir``) and
    its board (``board_dir``), recomputed from those files; ``allowed``: the ``UNCHECKED``
    names the reader accepts unchecked."""
    unknown = sorted(set(allowed) - set(UNCHECKED))
    if unknown:
        raise ValueError(f"--allow-unchecked {unknown}: not one of {sorted(UNCHECKED)}")
    out = Verification(allowed=frozenset(allowed))
    try:
        bench = Benchmark.read(bench_dir)
    except BenchmarkFormatError as exc:
        out.differ("bundle", str(bench_dir), "a whole benchmark", str(exc))
        return out
    verify_bundle_files(Path(bench_dir), out)
    verify_manifest_facts(bench, out)
    strengths = verify_grades(bench, out)
    verify_judge_checks(bench, out)
    if not Board.exists(board_dir):
        if bench.queries.height:  # a benchmark without queries publishes no board
            out.skip("board", f"no {TABLE} in {board_dir}")
        return out
    try:
        settings = Board.read_settings(board_dir)
    except BenchmarkFormatError as exc:
        out.differ("board settings", str(board_dir), "the board's settings", str(exc))
        return out
    if settings.ties not in ("average", "order"):
        out.differ("board settings", str(board_dir), "ties 'average' or 'order'",
                   repr(settings.ties))  # fmt: skip
        return out
    board = Board.read_table(board_dir)
    # the board's systems only: a retriever that left the registry keeps its run files
    on_board = set(board.select("retriever", "setting").iter_rows())
    runs = scored_runs(bench, runs_dir, settings.k, settings.excluded_queries, out,
                       on_board, settings.ties)  # fmt: skip
    verify_per_query(runs, runs_dir, out)
    verify_systems(on_board, runs_dir, settings, out)
    left_out = skipped_queries(runs_dir)
    runs = runs.with_columns(
        skipped=pl.Series(
            [
                key in left_out
                for key in runs.select("retriever", "setting", "query_id").iter_rows()
            ],
            dtype=pl.Boolean,
        )
    )
    verify_board_rows(board, runs, bench.domain_list(), settings, out)
    # nor in the tests and rank intervals; the joint intervals count one as 0 (joint.py)
    scored = runs.filter(~pl.col("skipped"))
    verify_rank_intervals(board, scored, settings, out)
    tests = Board.read_tests(board_dir)
    if tests is not None and tests.height:
        verify_tests(tests, scored, settings, out, flips)
        verify_tie_groups(board, tests, settings, out)
    else:
        paired = [s for s in board["setting"].unique().sort().to_list()
                  if board.filter(pl.col("setting") == s).height > 1]  # fmt: skip
        if paired:  # a board of two systems or more publishes their paired tests
            out.differ("paired test", str(board_dir / TESTS),
                       f"the paired tests of {', '.join(paired)}", "none")  # fmt: skip
    verify_joint(bench, board, runs, settings, out, tests)
    verify_full_corpus(bench, runs_dir, board_dir, board, settings, strengths, out, flips)
    depth = [c for c in board.columns if c.startswith("full_ndcg'@") or c.startswith("full_recall")]
    if any(board[c].is_not_null().any() for c in depth):
        out.skip("full-corpus depth", UNCHECKED["full-corpus depth"])
    return out


VERIFICATION = "verification.json"  # beside the board: the whole verdict


def record_verdict(verdict: Verification, bench_dirs: list[Path], board_dir: Path) -> None:
    """The verdict into each benchmark folder's manifest (``verification``, and a ``checks``
    entry of ERROR severity, which ``saber push`` refuses when failed) and
    ``verification.json`` beside the board. A manifest is rewritten whole; the bundle's files
    are untouched."""
    board_dir.mkdir(parents=True, exist_ok=True)  # an empty benchmark's board wrote nothing
    write_whole(board_dir / VERIFICATION, json.dumps(verdict.to_dict(), indent=2))
    for bench_dir in bench_dirs:
        path = bench_dir / MANIFEST
        manifest = with_verdict(json.loads(path.read_text()), verdict)
        write_whole(path, json.dumps(manifest, indent=2, default=str))


def with_verdict(manifest: dict, verdict: Verification) -> dict:
    """``manifest`` with the verdict as its ``verification`` and an ERROR ``checks`` entry (the
    one before replaced)."""
    record = verdict.to_dict()
    out = dict(manifest)
    out["verification"] = {k: v for k, v in record.items() if k != "first_differences"}
    out["verification"]["first_differences"] = record["first_differences"][:10]
    out["checks"] = [
        c for c in manifest.get("checks") or []
        if not (isinstance(c, dict) and c.get("check") == "verification")
    ] + [{"check": "verification", "domain": "all", "passed": verdict.passed,
          "severity": "ERROR", "description": verdict.summary()}]  # fmt: skip
    return out
