"""The full-corpus track's holes: counted (judged@k, nDCG@k with holes as 0), placed on the
query's own Bradley–Terry scale by a few games, and paid for once (leaderboard/holes.py)."""

import numpy as np
import polars as pl
import pytest

from saber_assets.leaderboard.holes import (
    FILL_SCHEMA,
    fill_board,
    fill_holes,
    filled_grades,
    grade_on_scale,
    leave_one_out,
    place_strength,
    pooled_holes,
    spread_opponents,
)
from saber_assets.ratings.bradley_terry import Prior, fit, information, rescale
from saber_assets.runs.metrics import graded_ndcg, judged_at, top_ids


def test_the_top_k_is_a_stable_sorts_without_sorting_the_corpus():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 300))
        scores = rng.integers(0, 6, n).astype(np.float64)  # many ties
        ids = [f"d{i}" for i in range(n)]
        want = [ids[i] for i in np.argsort(-scores, kind="stable")[:10]]
        assert top_ids(scores, ids, 10) == want


def test_holes_count_as_zero_and_are_counted():
    grades = {"a": 5.0, "b": 3.0, "c": 1.0}
    assert graded_ndcg(["a", "b", "c"], grades, 3) == pytest.approx(1.0)
    # a hole on top: its place gains nothing, the ideal is the same
    with_hole = graded_ndcg(["x", "a", "b"], grades, 3)
    assert 0 < with_hole < graded_ndcg(["a", "b", "x"], grades, 3) < 1.0
    assert judged_at(["x", "a", "b"], grades, 3) == pytest.approx(2 / 3)
    assert judged_at(["a"], grades, 10) == 0.1  # a short list's missing places are not judged
    assert graded_ndcg(["a"], {"a": 0.0}, 10) == 0.0


def test_a_placement_never_diverges_and_lands_on_the_querys_scale():
    prior = Prior("l2", c=1.0)
    opp = [-1.0, 0.0, 1.0]
    assert np.isfinite(place_strength(opp, [1, 1, 1], prior))  # a sweep stays finite
    won, lost = place_strength(opp, [1, 1, 1], prior), place_strength(opp, [0, 0, 0], prior)
    assert lost < place_strength(opp, [1, 0.5, 0], prior) < won
    assert place_strength(opp, [1, 0.5, 0], prior) == pytest.approx(0.0, abs=1e-9)
    assert np.isfinite(place_strength(opp, [1, 1, 1], Prior("choix", alpha=0.1)))
    assert grade_on_scale(0.0, [-1.0, 1.0]) == 2.5
    assert grade_on_scale(9.0, [-1.0, 1.0]) == 5.0 and grade_on_scale(-9.0, [-1.0, 1.0]) == 0.0
    assert spread_opponents(list("abcdefgh"), list(range(8)), 4) == ["a", "c", "f", "h"]
    picks = spread_opponents(list("abcdefgh"), [7, 6, 5, 4, 3, 2, 1, 0], 2)
    assert picks == ["h", "a"]  # the weakest and the strongest, strengths ascending
    assert spread_opponents(list("abc"), [0, 1, 2], 1) == ["b"]
    assert spread_opponents(list("ab"), [0, 1], 8) == ["a", "b"]


def tournament(true: np.ndarray, rounds: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Random pairings, outcomes drawn from the Bradley–Terry model of ``true``."""
    n, games = len(true), []
    for _ in range(rounds):
        order = rng.permutation(n)
        for a, b in zip(order[::2], order[1::2], strict=False):
            p = 1 / (1 + np.exp(true[b] - true[a]))
            games.append((a, b) if rng.random() < p else (b, a))
    return games


def test_a_placement_agrees_with_the_tournament_within_its_own_uncertainty():
    """Candidates left out of their queries' scale and placed back by the fill: at 8 games their
    mean absolute difference from their tournament grades is below the mean half-width of those
    grades' own 95% intervals (a Laplace interval of the fit, mapped by the query's min–max)."""
    rng = np.random.default_rng(11)
    prior = Prior("l2", c=1.0)
    diffs, half_widths, by_games = [], [], {4: [], 8: [], 16: []}
    for _ in range(12):
        true = rng.normal(0, 1.5, 30)
        games = tournament(true, 20, rng)
        s = fit(30, games, prior)
        grades = rescale(s)
        cov = np.linalg.inv(information(30, games, s, prior))
        half_widths += list(1.96 * np.sqrt(np.diag(cov)) * 5 / (s.max() - s.min()))
        for held in rng.choice(30, 3, replace=False):
            others = [i for i in range(30) if i != held]
            ratings = pl.DataFrame({"query_id": "q", "candidate_id": [f"c{i}" for i in others],
                                    "strength": s[others]})  # fmt: skip
            holes = pl.DataFrame({"query_id": ["q"], "document_id": [f"c{held}"],
                                  "pooled_by": [["sys"]]})  # fmt: skip

            def judge(asked, true=true):
                out = []
                for _, d, o in asked:
                    a, b = int(d[1:]), int(o[1:])
                    out.append(float(rng.random() < 1 / (1 + np.exp(true[b] - true[a]))))
                return out

            for g in by_games:
                placed = fill_holes(holes, ratings, judge, g, prior)
                by_games[g].append(abs(placed["grade"][0] - grades[held]))
            diffs.append(by_games[8][-1])
    mae, half = float(np.mean(diffs)), float(np.mean(half_widths))
    assert mae < half, (mae, half)
    assert np.mean(by_games[16]) < np.mean(by_games[4])  # more games, closer


def planted_case():
    """One query, five rated candidates (c0 best), a near-copy of c0 (``h``) in the corpus that
    no tournament saw, and two systems: one finds it, the other does not."""
    ratings = pl.DataFrame({"query_id": "q", "candidate_id": [f"c{i}" for i in range(5)],
                            "strength": [2.0, 1.0, 0.0, -1.0, -2.0],
                            "rating": [5.0, 3.75, 2.5, 1.25, 0.0]})  # fmt: skip
    base = {"q": dict(zip(ratings["candidate_id"], ratings["rating"], strict=True))}
    runs = pl.DataFrame({"retriever": ["finds", "misses"], "setting": ["s", "s"],
                         "query_id": ["q", "q"],
                         "full_top": [["h", "c1", "c2"], ["x", "c1", "c2"]]})  # fmt: skip
    truth = {"h": 2.1, "x": -3.0, **dict(zip(ratings["candidate_id"], ratings["strength"], strict=True))}  # fmt: skip
    return ratings, base, runs, truth


def counting_judge(truth, calls):
    def judge(asked):
        calls.append(len(asked))
        return [float(truth[d] > truth[o]) for _, d, o in asked]

    return judge


def test_a_system_that_finds_an_ungraded_near_copy_gains_after_the_fill_not_before():
    ratings, base, runs, truth = planted_case()
    holes = pooled_holes(runs, {"q": set(base["q"])}, 10)
    assert holes.rows() == [("q", "h", ["finds/s"]), ("q", "x", ["misses/s"])]
    fills = fill_holes(holes, ratings, counting_judge(truth, []), 4, Prior())
    grades = dict(zip(fills["document_id"], fills["grade"], strict=True))
    # h beats every opponent: above the second best; x loses every game: below the fourth
    assert grades["h"] > 3.75 and grades["x"] < 1.25
    board, taus = fill_board(runs, base, fills, 10, 200, 0)
    row = {r["retriever"]: r for r in board.iter_rows(named=True)}
    # before: the same nDCG (the hole is a 0 for both); after: the one that found it leads
    assert row["finds"]["full_ndcg@10"] == pytest.approx(row["misses"]["full_ndcg@10"])
    assert row["finds"]["full_ndcg@10_filled"] > row["finds"]["full_ndcg@10"]
    assert row["finds"]["full_ndcg@10_filled"] > row["misses"]["full_ndcg@10_filled"]
    assert row["finds"]["judged@10"] == 0.2 and row["finds"]["judged@10_filled"] == 0.3
    assert row["finds"]["ci_low"] <= row["finds"]["full_ndcg@10_filled"] <= row["finds"]["ci_high"]
    # Zobel: without the hole only it pooled, its score drops back
    filled = filled_grades(base, fills)
    loo = {r["retriever"]: r for r in leave_one_out(runs, filled, fills, 10).iter_rows(named=True)}
    assert loo["finds"]["drop"] > 0 and loo["finds"]["unique_holes"] == 1
    assert taus == {"s": pytest.approx(taus["s"])}


def test_a_new_system_pays_only_for_its_own_holes_and_no_grade_moves():
    ratings, base, runs, truth = planted_case()
    truth |= {"y": 0.5, "z": 1.5}
    calls: list[int] = []
    judge = counting_judge(truth, calls)
    first = fill_holes(pooled_holes(runs, {"q": set(base["q"])}, 10), ratings, judge, 4, Prior())
    assert calls == [2 * 4]  # two holes, four games each
    newcomer = pl.DataFrame({"retriever": ["new"], "setting": ["s"], "query_id": ["q"],
                             "full_top": [["h", "y", "z"]]})  # fmt: skip
    everyone = pl.concat([runs, newcomer])
    calls.clear()
    again = fill_holes(pooled_holes(everyone, {"q": set(base["q"])}, 10), ratings, judge, 4,
                       Prior(), known=first)  # fmt: skip
    assert calls == [2 * 4]  # y and z only: h was placed before
    kept = again.filter(pl.col("document_id").is_in(["h", "x"]))
    assert kept.drop("pooled_by").equals(first.drop("pooled_by"))
    h = again.filter(pl.col("document_id") == "h").row(0, named=True)
    assert h["pooled_by"] == ["finds/s", "new/s"]  # who pooled it, updated
    assert set(again.columns) == set(FILL_SCHEMA)


def test_a_rebuilt_scale_places_the_holes_again_asking_only_new_games():
    """The tournament rebuilt (its strengths moved): each hole is placed again on the scale as it
    is now, as a fill from nothing would place it, and only the games against opponents it has
    not met are asked; a hole no game answered keeps its row without a grade."""
    ratings, base, runs, truth = planted_case()
    calls: list[int] = []
    holes = pooled_holes(runs, {"q": set(base["q"])}, 10)
    first = fill_holes(holes, ratings, counting_judge(truth, calls), 3, Prior())
    moved = ratings.with_columns(pl.col("strength") * 2.0 + pl.Series([0.0, 0.0, 0.0, 0.0, 5.0]))
    calls.clear()
    again = fill_holes(holes, moved, counting_judge(truth, calls), 3, Prior(), known=first)
    fresh = fill_holes(holes, moved, counting_judge(truth, []), 3, Prior())
    assert again["grade"].to_list() == pytest.approx(fresh["grade"].to_list(), abs=1e-9)
    assert again["grade"].to_list() != pytest.approx(first["grade"].to_list(), abs=1e-3)
    new_opponents = set(fresh["opponents"][0]) - set(first["opponents"][0])
    assert calls == ([2 * len(new_opponents)] if new_opponents else [])
    silent = fill_holes(holes, ratings, lambda asked: [None] * len(asked), 3, Prior())
    assert silent.height == 2 and silent["grade"].is_null().all() and (silent["games"] == 0).all()


def test_the_built_board_shows_judged_at_10_before_and_after_the_fill(shared_build):
    """On a real build (CPU judge, every system of the full-corpus track): the fill placed the
    pooled holes with their games and who pooled them, and the board after the fill holds
    every system and setting, judged@10 up to 1.0 where every hole was placed."""
    home = shared_build("tiny").root / "home" / "tiny"
    fills = pl.read_parquet(home / "parquet" / "full_corpus_fill.parquet")
    board = pl.read_parquet(home / "leaderboard" / "full_corpus_board.parquet")
    runs = pl.read_parquet(home / "leaderboard" / "leaderboard.parquet")
    assert fills.height and (fills["games"] > 0).all() and fills["pooled_by"].list.len().min() >= 1
    assert fills["grade"].is_between(0, 5).all()
    assert set(zip(board["retriever"], board["setting"], strict=True)) <= set(
        zip(runs["retriever"], runs["setting"], strict=True)
    )
    assert (board["judged@10_filled"] >= board["judged@10"]).all()
    assert "beats_filled" in board.columns  # the paired test on the filled scores
    assert (board["judged@10"] < 1).any()  # the pools missed something
    assert board["judged@10_filled"].max() == pytest.approx(1.0)
    # the board's own before-fill columns say the same as the fill's
    before = runs.select("retriever", "setting", pl.col("judged@10").alias("on_board"))
    joined = board.join(before, on=["retriever", "setting"])
    assert joined.height and (joined["judged@10"] - joined["on_board"]).abs().max() < 1e-9


def test_a_new_models_games_are_bounded_and_typical_from_the_built_board():
    from saber_assets.leaderboard.holes import new_model_games

    ratings, base, runs, truth = planted_case()
    fills = fill_holes(pooled_holes(runs, {"q": set(base["q"])}, 10), ratings,
                       counting_judge(truth, []), 4, Prior())  # fmt: skip
    board, _ = fill_board(runs, base, fills, 10, 50, 0)
    most, typical = new_model_games(board, 4, 10)
    assert most == 1 * 10 * 4  # one query, one setting, ten places, four games
    assert typical == 1.0 * 4  # each system pooled one hole of its own


def test_a_query_page_marks_each_systems_full_corpus_top_10():
    """The explorer's query page: T for a tournament grade, F for a placed hole (with who pooled
    it), · for none; escaped."""
    from saber_assets.site.explorer_query import full_top_html

    runs = pl.DataFrame({"retriever": ["<b>", "bm25"], "setting": ["s", "s"],
                         "full_top": [["c1", "h", "x"], ["c1", "c2", "h"]]})  # fmt: skip
    html = full_top_html(runs, {"c1": 5.0, "c2": 2.5}, {"h": (4.2, ["bm25/s", "<b>/s"])})
    assert html.count("<tr>") == 2 and "&lt;b&gt;" in html and "<b>" not in html
    assert "T 5.00" in html and "F 4.20" in html and "pooled by bm25/s, &lt;b&gt;/s" in html
    assert html.count("class='hole'") == 1
    assert full_top_html(runs.drop("full_top"), {}, {}) == ""


def test_the_built_explorer_shows_the_full_corpus_top_10(shared_build):
    site = shared_build("tiny").root / "home" / "tiny" / "explorer" / "queries"
    pages = [p.read_text() for p in sorted(site.glob("*.html"))]
    assert pages and all("<h2>Full-corpus top 10</h2>" in p for p in pages)
    assert any("class='filled'" in p for p in pages) and any("class='graded'" in p for p in pages)


def test_a_fill_games_order_is_seeded_per_game_and_even():
    from saber_assets.leaderboard.fill_assets import hole_shown_first

    games = [(f"q{i}", f"d{j}", f"o{j % 7}") for i in range(60) for j in range(60)]
    first = [hole_shown_first(3, *g) for g in games]
    assert first == [hole_shown_first(3, *g) for g in games]  # the same game, the same order
    assert 0.45 < sum(first) / len(first) < 0.55
    assert first != [hole_shown_first(4, *g) for g in games]  # the seed moves it
