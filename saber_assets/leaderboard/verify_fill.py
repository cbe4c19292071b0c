"""`saber verify` for the full-corpus track: judged@k and nDCG@k with holes as 0 on the board,
and the filled board (``holes.py``) re-derived from the bundle's judgments, each system's
full-corpus TREC run (``RETRIEVER/full-corpus/DOMAIN.SETTING.trec``, its top k) and the fill's
games (``full_corpus_fill.parquet`` beside the board):

- the holes: every document of some top k that the query's candidates lack, pooled anew, each
  with a row in the fill and the systems that pooled it, nothing more or less;
- each hole's opponents spread over the query's scale (their refit grades where the spread
  puts them) and its games counted; its strength placed again by **scipy**'s bounded scalar
  minimiser against the refit candidates' strengths under the ratings' l2 prior, and read on
  the query's min–max: its grade, within ``RATING_TOLERANCE``;
- the filled board from verify's own grades: judged@k and nDCG@k before and after, the seeded
  bootstrap interval (equal), Zobel's leave-one-out drop, and ``beats_filled`` by scipy's
  sign-flip test with Holm, re-drawn near α as the board's own tests are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark, BenchmarkFormatError
from saber_assets.leaderboard.board import (
    CI_HIGH,
    CI_LOW,
    FILL_BOARD,
    FILL_SETTINGS,
    FILL_TABLE,
    BoardSettings,
)
from saber_assets.leaderboard.recompute import (
    holm_adjusted,
    min_max,
    near_alpha,
    seeded_interval,
    sign_flip_p,
)
from saber_assets.leaderboard.verdict import (
    EXACT,
    RATING_TOLERANCE,
    VERIFY_FLIPS,
    VERIFY_MAX_FLIPS,
    Verification,
)
from saber_assets.ontology.domains import keys_for
from saber_assets.runs.files import FULL_CORPUS, run_file_parts, trec_files
from saber_assets.runs.outside import read_run

Tops = dict[tuple[str, str], dict[str, list[str]]]  # (retriever, setting) -> query -> top k


def read_tops(bench: Benchmark, runs_dir: Path, k: int, out: Verification) -> Tops:
    """Each system's full-corpus top ``k`` per query from its TREC files, best first (by score,
    ties in the file's order); a query in two domains' files is read from the first, as the
    board reads its runs."""
    title_of = {v: t for t, v in keys_for(bench.domain_list()).items()}
    tops: Tops = {}
    for retriever, files in trec_files(runs_dir, FULL_CORPUS).items():
        for path in files:
            read = read_trec_file(path, title_of, out, "full-corpus run")
            if read is None:
                continue
            _, setting, tagged = read
            mine = tops.setdefault((retriever, setting), {})
            for run in tagged.values():
                for qid, docs in run.items():
                    if qid in mine:
                        continue
                    if len(docs) > k:
                        out.differ("full-corpus run", f"{path}: query {qid}",
                                   f"a top {k}", f"{len(docs)} documents")  # fmt: skip
                    ranked = sorted(docs.items(), key=lambda item: -item[1])
                    mine[qid] = [d for d, _ in ranked[:k]]
    return tops


def read_trec_file(path: Path, title_of: dict[str, str], out: Verification,
                   check: str) -> tuple[str, str, dict] | None:  # fmt: skip
    """(domain, setting, its runs by tag) of a TREC file named ``DOMAIN.SETTING.trec``, or None
    with the difference named (``check``): a domain key that names no domain, an unreadable
    file."""
    domain_key, setting = run_file_parts(path)
    domain = title_of.get(domain_key)
    if domain is None:
        out.differ(check, str(path), "a run of a benchmark domain",
                   f"domain key {domain_key!r} names none")  # fmt: skip
        return None
    try:
        return domain, setting, read_run(path)
    except BenchmarkFormatError as exc:
        out.differ(check, str(path), "a readable TREC run", str(exc))
        return None


def candidate_grades(bench: Benchmark) -> dict[str, dict[str, float]]:
    """Query -> candidate document id -> its published grade."""
    doc_ids = bench.documents["id"].to_list()
    return {
        qid: {doc_ids[c]: float(g) for c, g in zip(cands, grades, strict=True)}
        for qid, cands, grades in bench.queries.select("id", "candidates", "relevance_scores")
        .iter_rows()
    }  # fmt: skip


def ndcg_of_top(top: list[str], grades: Mapping[str, float], k: int) -> float:
    """nDCG@k of a top k against graded documents (an ungraded one gains 0; the ideal ranks
    every graded one), gain 2^g − 1, written out."""
    gains = np.array([2.0 ** grades.get(d, 0.0) - 1.0 for d in top[:k]])
    ideal = np.sort(np.array([2.0**g - 1.0 for g in grades.values()]))[::-1][:k]
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    best = float(ideal @ discount[: len(ideal)])
    return float(gains @ discount[: len(gains)]) / best if best > 0 else 0.0


def judged_share(top: list[str], grades: Mapping[str, float], k: int) -> float:
    return sum(d in grades for d in top[:k]) / k


def verify_track_columns(board: pl.DataFrame, tops: Tops, grades: dict, k: int,
                         excluded: set[str], out: Verification) -> None:  # fmt: skip
    """The board's judged@k and nDCG@k with holes as 0, from each system's full-corpus top k,
    over the queries the board scores (``excluded``: those it leaves out)."""
    judged, zero = f"judged@{k}", f"full_ndcg@{k}"
    if judged not in board.columns:
        return
    for row in board.iter_rows(named=True):
        if row[judged] is None:
            continue
        where = f"{row['retriever']} {row['setting']} (full corpus)"
        top = tops.get((row["retriever"], row["setting"]))
        if not top:
            out.differ("full-corpus run", where, "a full-corpus top k", "no TREC file")
            continue
        queries = [q for q in sorted(top) if q in grades and q not in excluded]
        out.close(
            judged,
            where,
            row[judged],
            float(np.mean([judged_share(top[q], grades[q], k) for q in queries])),
            EXACT,
        )
        out.close(zero, where, row.get(zero),
                  float(np.mean([ndcg_of_top(top[q], grades[q], k) for q in queries])), EXACT)  # fmt: skip


def pooled(tops: Tops, grades: dict, k: int) -> dict[tuple[str, str], list[str]]:
    """(query, document) -> the systems (``retriever/setting``) whose top k holds it, for each
    document no candidate grade covers."""
    out: dict[tuple[str, str], set[str]] = {}
    for (retriever, setting), by_query in tops.items():
        for qid, top in by_query.items():
            if qid not in grades:
                continue
            for d in top[:k]:
                if d not in grades[qid]:
                    out.setdefault((qid, d), set()).add(f"{retriever}/{setting}")
    return {key: sorted(who) for key, who in out.items()}


def placed_strength(opponents: np.ndarray, outcomes: np.ndarray, c: float) -> float:
    """The strength maximising Σ log σ(±(s − o)) − s²/(2C) over the answered games, by scipy's
    bounded scalar minimiser (concave: one maximum)."""

    def loss(s: float) -> float:
        z = s - opponents
        return float(np.sum(outcomes * np.logaddexp(0, -z) + (1 - outcomes) * np.logaddexp(0, z))
                     + s * s / (2 * c))  # fmt: skip

    from scipy.optimize import minimize_scalar  # at use: as recompute's scikit-learn

    span = float(np.abs(opponents).max(initial=0.0)) + 50.0
    return float(minimize_scalar(loss, bounds=(-span, span), method="bounded",
                                 options={"xatol": 1e-10}).x)  # fmt: skip


def spread_grades(grades: np.ndarray, games: int) -> list[float]:
    """The grades at the places the fill's spread takes: evenly from the weakest to the
    strongest, the median for one game, every one where there are fewer."""
    order = np.sort(grades)
    if games >= len(order):
        return order.tolist()
    if games == 1:
        return [float(order[len(order) // 2])]
    picks = sorted(set(np.round(np.linspace(0, len(order) - 1, games)).astype(int).tolist()))
    return [float(order[p]) for p in picks]


def verify_placements(
    bench: Benchmark, fills: pl.DataFrame, holes: dict, strengths: dict[str, np.ndarray] | None,
    settings: dict, out: Verification,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """Each pooled hole's row and grade; returns verify's own grades of the holes (query ->
    document -> grade) for the board."""
    games = int(settings["games"])
    rows = {(r["query_id"], r["document_id"]): r for r in fills.iter_rows(named=True)}
    for key in sorted(set(holes) - set(rows) if games else ()):
        out.differ("fill", f"query {key[0]} document {key[1]}", "none",
                   "a pooled hole: a row of the fill")  # fmt: skip
    for key in sorted(set(rows) - set(holes)):
        out.differ("fill", f"query {key[0]} document {key[1]}", "a row of the fill",
                   "no system's top k pools it ungraded")  # fmt: skip
    doc_ids = bench.documents["id"].to_list()
    cands = {q: [doc_ids[c] for c in cs] for q, cs in bench.queries.select("id", "candidates")
             .iter_rows()}  # fmt: skip
    own: dict[str, dict[str, float]] = {}
    scales: dict[str, tuple] = {}  # query -> (candidate index, grades, the spread's grades)
    for (qid, doc), row in sorted(rows.items()):
        if (qid, doc) not in holes:
            continue
        where = f"query {qid} document {doc}"
        out.same("pooled by", where, list(row["pooled_by"] or []), holes[(qid, doc)])
        if strengths is None or qid not in strengths:
            continue  # the grades were not refitted: their skip is said already
        if qid not in scales:  # every hole of a query is read on the same scale
            grades_now = min_max(strengths[qid])
            scales[qid] = ({d: i for i, d in enumerate(cands[qid])}, grades_now,
                           spread_grades(grades_now, games))  # fmt: skip
        index, scale, spread = scales[qid]
        opps, outcomes = list(row["opponents"] or []), list(row["outcomes"] or [])
        if (
            any(o not in index for o in opps)
            or len(outcomes) != len(opps)
            or any(w not in (0.0, 1.0, None) for w in outcomes)
        ):
            out.differ("fill games", where, f"{len(opps)} opponents with outcomes 1, 0 or none",
                       f"{len(outcomes)} outcomes, opponents among the candidates: "
                       f"{all(o in index for o in opps)}")  # fmt: skip
            continue
        theta = strengths[qid]
        out.count("fill opponents")
        shown = sorted(float(scale[index[o]]) for o in opps)
        if len(opps) != min(games, len(theta)) or not np.allclose(
            shown, spread, atol=RATING_TOLERANCE, rtol=0
        ):
            out.differ("fill opponents", where, f"{len(opps)} opponents at grades "
                       f"{[round(g, 3) for g in shown]}", "the spread over the scale: "
                       f"{[round(g, 3) for g in spread]}")  # fmt: skip
        answered = [(theta[index[o]], w) for o, w in zip(opps, outcomes, strict=True)
                    if w is not None]  # fmt: skip
        out.same("fill games", where, (row["games"], row["wins"]),
                 (len(answered), sum(w == 1.0 for _, w in answered)))  # fmt: skip
        grade = None
        if answered:
            o, w = (np.array(x, dtype=np.float64) for x in zip(*answered, strict=True))
            s = placed_strength(o, w, float(settings["prior"]["c"]))
            lo, hi = float(theta.min()), float(theta.max())
            grade = 2.5 if hi - lo < 1e-12 else float(np.clip(5 * (s - lo) / (hi - lo), 0, 5))
            own.setdefault(qid, {})[doc] = grade
        out.close("fill grade", where, row["grade"], grade, RATING_TOLERANCE)
    return own


def verify_fill_tests(board: pl.DataFrame, after: pl.DataFrame, settings: BoardSettings,
                      out: Verification, flips: int = VERIFY_FLIPS) -> None:  # fmt: skip
    """``beats_filled`` by verify's own sign-flip tests, Holm over each setting's pairs; a pair
    whose Holm p lies near α at verify's cap is counted undecided, not compared."""
    alpha, seed = settings.alpha, settings.seed
    undecided = 0
    for (setting,), part in after.group_by("setting", maintain_order=True):
        wide = part.pivot(on="retriever", index="query_id", values="ndcg").drop_nulls()
        names = sorted(c for c in wide.columns if c != "query_id")
        if len(names) < 2 or wide.height < 2:
            continue
        m = wide.sort("query_id").select(names).to_numpy().astype(np.float64)
        pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
        diffs = [m[:, i] - m[:, j] for i, j in pairs]
        used = [flips] * len(pairs)
        p = [sign_flip_p(d, flips, seed) for d in diffs]
        near = near_alpha(p, used, alpha)
        while redo := [n for n in range(len(pairs)) if near[n] and used[n] < VERIFY_MAX_FLIPS]:
            for n in redo:
                used[n] = min(used[n] * 10, VERIFY_MAX_FLIPS)
                p[n] = sign_flip_p(diffs[n], used[n], seed)
            near = near_alpha(p, used, alpha)
        holm = holm_adjusted(p)
        won: dict[str, set[str]] = {n: set() for n in names}
        open_pairs: dict[str, set[str]] = {n: set() for n in names}
        for n, (i, j) in enumerate(pairs):
            a, b = names[i], names[j]
            if near[n]:
                open_pairs[a].add(b)
                open_pairs[b].add(a)
                undecided += 1
            elif holm[n] < alpha and diffs[n].mean() != 0:
                winner, loser = (a, b) if diffs[n].mean() > 0 else (b, a)
                won[winner].add(loser)
        shown = dict(board.filter(pl.col("setting") == setting)
                     .select("retriever", "beats_filled").iter_rows())  # fmt: skip
        for name in names:
            said = {x for x in (shown.get(name) or "").split(", ") if x} - open_pairs[name]
            out.same("beats (filled)", f"{setting} {name}", sorted(said), sorted(won[name]))
    if undecided:
        out.count("undecided decision (filled)", undecided)


def verify_filled_board(board: pl.DataFrame, tops: Tops, grades: dict, filled: dict,
                        holes: dict, settings: BoardSettings, out: Verification,
                        flips: int = VERIFY_FLIPS) -> None:  # fmt: skip
    """The filled board's rows from verify's own grades (``filled``: query -> document ->
    grade, the candidates' and the placed holes')."""
    k, resamples, seed = settings.k, settings.bootstrap_resamples, settings.seed
    rows = {(r["retriever"], r["setting"]): r for r in board.iter_rows(named=True)}
    for key in sorted(set(tops) ^ set(rows)):
        out.differ("full-corpus board", f"{key[0]} {key[1]}",
                   "a row" if key in rows else "no row",
                   "a full-corpus run" if key in tops else "no full-corpus run")  # fmt: skip
    after_rows = []
    for key in sorted(set(tops) & set(rows)):
        row, top, where = rows[key], tops[key], f"{key[0]} {key[1]} (filled)"
        queries = [q for q in sorted(top) if q in grades]
        who = f"{key[0]}/{key[1]}"
        mine = {(q, d) for (q, d), by in holes.items() if by == [who]}
        before_n = [ndcg_of_top(top[q], grades[q], k) for q in queries]
        after_n = [ndcg_of_top(top[q], filled.get(q, {}), k) for q in queries]
        without = [ndcg_of_top(top[q], {d: g for d, g in filled.get(q, {}).items()
                                        if (q, d) not in mine}, k) for q in queries]  # fmt: skip
        out.same("query count", where, row["queries"], len(queries))
        for name, value, tol in (
            (f"judged@{k}", np.mean([judged_share(top[q], grades[q], k) for q in queries]), EXACT),
            (f"full_ndcg@{k}", np.mean(before_n), EXACT),
            (f"judged@{k}_filled",
             np.mean([judged_share(top[q], filled.get(q, {}), k) for q in queries]), EXACT),
            (f"full_ndcg@{k}_filled", np.mean(after_n), 1e-3),
        ):  # fmt: skip
            out.close(name, where, row.get(name), float(value), tol)
        lo, hi = seeded_interval(np.array(after_n), resamples, seed)
        out.close("bootstrap interval", f"{where} (low)", row.get(CI_LOW), lo, 1e-3)
        out.close("bootstrap interval", f"{where} (high)", row.get(CI_HIGH), hi, 1e-3)
        if "loo_drop" in row:
            out.same("unique holes", where, row.get("unique_holes"), len(mine))
            out.close("leave-one-out drop", where, row.get("loo_drop"),
                      float(np.mean(after_n) - np.mean(without)), 1e-3)  # fmt: skip
        after_rows += [(key[0], key[1], q, v) for q, v in zip(queries, after_n, strict=True)]
    after = pl.DataFrame(after_rows, orient="row", schema={
        "retriever": pl.String, "setting": pl.String, "query_id": pl.String, "ndcg": pl.Float64})  # fmt: skip
    if "beats_filled" in board.columns:
        verify_fill_tests(board, after, settings, out, flips)


def verify_full_corpus(bench: Benchmark, runs_dir: Path, board_dir: Path, board: pl.DataFrame,
                       settings: BoardSettings, strengths: dict[str, np.ndarray] | None,
                       out: Verification, flips: int = VERIFY_FLIPS) -> None:  # fmt: skip
    """The full-corpus track: the board's columns, and the filled board where one was built
    (or where runs were published without it: a difference)."""
    tops = read_tops(bench, runs_dir, settings.k, out)
    grades = candidate_grades(bench)
    excluded = set(settings.excluded_queries)
    verify_track_columns(board, tops, grades, settings.k, excluded, out)
    # the queries the board leaves out are in neither the pool nor the filled board
    tops = {key: {q: top for q, top in by_query.items() if q not in excluded}
            for key, by_query in tops.items()}  # fmt: skip
    if not (board_dir / FILL_BOARD).exists():
        if tops:
            out.differ("full-corpus board", str(board_dir / FILL_BOARD),
                       "the filled board of the full-corpus runs", "none")  # fmt: skip
        return
    try:
        fill_cfg = json.loads((board_dir / FILL_SETTINGS).read_text())
        fills = pl.read_parquet(board_dir / FILL_TABLE)
        filled_board = pl.read_parquet(board_dir / FILL_BOARD)
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        out.differ("full-corpus board", str(board_dir), f"{FILL_TABLE} and {FILL_SETTINGS} "
                   "beside the filled board", f"{type(exc).__name__}: {exc}")  # fmt: skip
        return
    ratings = bench.manifest.get("ratings") or {}
    prior = fill_cfg.get("prior") or {}
    out.same("fill prior", str(board_dir / FILL_SETTINGS),
             (prior.get("kind"), prior.get("c") if prior.get("kind") == "l2" else None),
             (ratings.get("prior", "l2"), float(ratings.get("c", 1.0))
              if ratings.get("prior", "l2") == "l2" else None))  # fmt: skip
    if fill_cfg.get("k") != settings.k:
        out.differ("fill settings", str(board_dir / FILL_SETTINGS), fill_cfg.get("k"),
                   f"the board's k, {settings.k}")  # fmt: skip
        return
    if strengths is not None and prior.get("kind") != "l2":
        out.skip("choix-fill", "the holes' grades under choix's prior")
        strengths = None
    holes = pooled(tops, grades, settings.k)
    placed = verify_placements(bench, fills, holes, strengths, fill_cfg, out)
    if strengths is None:  # the placements unchecked: the board read on the published grades
        placed = {}
        for q, d, g in fills.select("query_id", "document_id", "grade").iter_rows():
            if g is not None:
                placed.setdefault(q, {})[d] = g
    filled = {q: {**g, **placed.get(q, {})} for q, g in grades.items()}
    verify_filled_board(filled_board, tops, grades, filled, holes, settings, out, flips)
