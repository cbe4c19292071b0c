"""The reference build's choices as settings (#66): each on known answers, under saber's default
and under the reference code's behaviour (configs/paper.yaml sets the latter)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from saber_assets.signals.kernels import bma_jaccard_dense, quantize
from saber_assets.signals.thresholds import Cut, Relevance

from .test_exact_thresholds import _inputs


def test_the_float16_rule_keeps_a_pair_at_exactly_4_19_and_the_exact_rule_drops_it():
    # 4/19 = 0.210526…; the published summary threshold 0.2106 is float16(4/19) = 0.2105713
    assert np.float16(4 / 19) == np.float16(0.2106)
    sets = [list(range(0, 12)), list(range(8, 19)),  # |A ∩ B| = 4, |A ∪ B| = 19
            list(range(0, 20)), list(range(13, 33)),  # 7/33 = 0.2121: above under both
            list(range(0, 10)), list(range(9, 30))]  # 1/30: below under both  # fmt: skip
    exact = _inputs(sets)
    i, j = np.array([0, 2, 4]), np.array([1, 3, 5])
    _, summary = bma_jaccard_dense([[0]] * 6, np.ones((1, 1)), sets)
    assert summary[0, 1] == pytest.approx(4 / 19)
    sq, tq = quantize(summary[i, j]), np.full(3, 255, dtype=np.uint8)
    masks = {
        rule: Relevance(Cut(0.5, rule), Cut(0.2106, rule), exact).masks(i, j, tq, sq)[1].tolist()
        for rule in ("exact_gt", "float16_ge")
    }
    assert masks == {"exact_gt": [False, True, False], "float16_ge": [True, True, False]}
    # the topic side: a BMA just under 0.8579 but within float16's rounding of it
    assert Cut(0.8579, "float16_ge").relevant(np.array([0.85775, 0.8570])).tolist() == [True, False]
    assert Cut(0.8579).relevant(np.array([0.85775, 0.8580])).tolist() == [False, True]
    with pytest.raises(ValueError, match="threshold rule 'gte'"):
        Cut(0.5, "gte")
    # the default's cache keys are as before; the other rule's are its own
    assert Cut(0.2).key() == 0.2 and Cut(0.2, "float16_ge").key() == [0.2, "float16_ge"]


def test_strata_draw_exactly_their_counts_by_exact_domain_set():
    from saber_assets.candidates.select import (
        choose_queries,
        short_strata,
        strata_drawn,
        strata_quotas,
    )

    order = ["A", "B", "C"]
    # 30 viable problems per domain set, 5 of them not viable
    sets = [["A"], ["B"], ["C"], ["A", "B"], ["B", "C"], ["A", "B", "C"]]
    domains = [s for s in sets for _ in range(35)]
    viable = np.array([(n % 35) < 30 for n in range(len(domains))])
    strata = [(["A"], 12), (["B"], 7), (["C"], 0), (["B", "A"], 5), (["C", "B"], 40)]
    chosen = choose_queries(viable, domains, order, quota=99, seed=3, strata=strata)
    drawn = strata_drawn(strata, [domains[r] for _, r in chosen], order)
    assert [d["home"] for d in drawn] == ["A", "B", "C", "A", "B"]
    assert [d["drawn"] for d in drawn] == [12, 7, 0, 5, 30]  # the last has only 30 viable
    # the short stratum is said, once, by the partition it runs in (the console's warning line)
    assert short_strata(drawn, "B") == [
        "stratum C + B: 30 of 40 queries drawn (too few viable problems with exactly these domains)"
    ]
    assert short_strata(drawn, "A") == short_strata(drawn, "C") == []
    assert all(viable[r] for _, r in chosen) and len({r for _, r in chosen}) == len(chosen)
    # no three-domain query, none of a set no stratum names
    assert all(domains[r] in (["A"], ["B"], ["A", "B"], ["B", "C"]) for _, r in chosen)
    # a two-domain query sits in its first domain; the partitions' quotas say as much
    homes = {tuple(domains[r]): d for d, r in chosen}
    assert homes[("A", "B")] == "A" and homes[("B", "C")] == "B"
    assert strata_quotas(strata, order) == {"A": 17, "B": 47, "C": 0}
    # seeded: the same draw again, another with another seed
    assert chosen == choose_queries(viable, domains, order, 99, 3, strata)
    assert chosen != choose_queries(viable, domains, order, 99, 4, strata)
    # without strata: the quota per domain, as before
    assert len(choose_queries(viable, domains, order, quota=10, seed=3)) == 30
    with pytest.raises(ValueError, match=r"strata\[0\] names \['Z'\]"):
        choose_queries(viable, domains, order, 99, 3, [(["Z"], 1)])


def test_given_queries_are_taken_where_viable_in_their_first_domain():
    """``given`` rows (the published queries the corpus holds) are the queries: each viable one
    once, in the first of its domains; one not viable, or in no domain, is not taken; nothing is
    drawn, whatever the seed. ``given_rows`` maps the matches' corpus ids to rows."""
    import polars as pl

    from saber_assets.candidates.select import choose_queries, given_rows

    order = ["A", "B", "C"]
    domains = [["A"], ["B", "A"], ["C"], [], ["B"], ["C", "B"]]
    viable = np.array([True, True, False, True, True, True])
    given = (5, 1, 2, 3, 1)
    chosen = choose_queries(viable, domains, order, quota=1, seed=3, given=given)
    assert chosen == [("A", 1), ("B", 5)]
    assert chosen == choose_queries(viable, domains, order, 1, 9, [(["A"], 1)], given)
    matches = pl.DataFrame({"item": ["q1", "q2", "d0", "q3"], "role": ["query", "query",
                            "candidate", "query"], "corpus_id": ["x:5", "x:1", "x:0", "x:77"]})  # fmt: skip
    assert given_rows([f"x:{i}" for i in range(6)], matches) == (1, 5)


def test_tied_scores_are_averaged_or_taken_in_numpys_order():
    import polars as pl

    from saber_assets.runs.evaluate import with_ties
    from saber_assets.runs.metrics import ndcg_at_k

    # four candidates, all scored alike: the expected DCG over their orders, or numpy's order
    rel = [0.0, 0.0, 5.0, 1.0]
    runs = pl.DataFrame({"query_id": ["q"], "failed": [False], "scores": [[1.0, 1.0, 1.0, 1.0]],
                         "ndcg": [ndcg_at_k([1.0] * 4, rel, 2)]})  # fmt: skip
    order = np.argsort(-np.ones(4))  # what the reference's argsort gives for all-equal scores
    gains = [(2 ** rel[i] - 1) / np.log2(r + 2) for r, i in enumerate(order[:2])]
    ideal = (2**5 - 1) / np.log2(2) + (2**1 - 1) / np.log2(3)
    by_order = with_ties(runs, {"q": rel}, 2, "order")["ndcg"][0]
    assert by_order == pytest.approx(sum(gains) / ideal)
    averaged = with_ties(runs, {"q": rel}, 2, "average")["ndcg"][0]
    assert averaged == runs["ndcg"][0] and averaged != pytest.approx(by_order)
    with pytest.raises(ValueError, match="'average' or 'order'"):
        with_ties(runs, {"q": rel}, 2, "first")
    # a failed query scores 0 under either rule, as the board scores it (not null)
    failed = pl.DataFrame({"query_id": ["q"], "failed": [True], "scores": [None],
                           "ndcg": [0.0]}, schema_overrides={"scores": pl.List(pl.Float64)})  # fmt: skip
    assert with_ties(failed, {"q": rel}, 2, "order")["ndcg"].to_list() == [0.0]


def test_by_id_shows_the_smaller_document_number_first_and_favours_no_source():
    import polars as pl

    from saber_assets.tournament.engine import (
        MemoryStore,
        TournamentQuery,
        document_numbers,
        first_shown_by_source,
        run_tournament,
    )

    class FirstJudge:  # always picks the first shown: the order is all that matters
        backend, model, version = "t", "t", "first/v1"

        def compare_batch(self, items):
            from saber_resources.llm_tasks import Outcome

            return [Outcome(1) for _ in items]

    # the published documents: one source numbered by row; by_id shows the smaller row first
    # (the reference's order), compared as numbers, not as text ("10" after "9")
    published = pl.DataFrame(
        {"id": [f"sabermath:{k}" for k in range(12)], "source": ["sabermath"] * 12,
         "native_id": [str(k) for k in range(12)]}
    )  # fmt: skip
    number, rule = document_numbers(published)
    assert rule == "native_number" and number["sabermath:10"] == 10
    cands = published["id"].to_list()[::-1]
    q = TournamentQuery("q", "query", cands, cands, [number[c] for c in cands])
    shown = {}
    for presentation in ("random", "by_id"):
        store = MemoryStore()
        run_tournament([q], FirstJudge(), store, 3, 7, presentation=presentation, key="k")
        shown[presentation] = [(j.shown_first, j.a, j.b) for j in store.load("k")]
    assert shown["by_id"] and all(
        number[first] == min(number[a], number[b]) for first, a, b in shown["by_id"]
    )
    assert any(number[first] != min(number[a], number[b]) for first, a, b in shown["random"])
    with pytest.raises(ValueError, match="presentation must be one of"):
        run_tournament([q], FirstJudge(), MemoryStore(), 1, 7, presentation="alpha")
    # on a corpus of several sources (ids `source:native_id`) the numbers are hashes of the ids:
    # a first-always judge under by_id gives no source an advantage, and the tournament's
    # metadata measures the first-shown share per source pair
    corpus = pl.DataFrame(
        [(f"{src}:{k}", src, str(k)) for src in ("aops", "numinamath") for k in range(20)],
        schema=["id", "source", "native_id"], orient="row",
    )  # fmt: skip
    number, rule = document_numbers(corpus)
    assert rule == "id_hash"
    cands = corpus["id"].to_list()
    q = TournamentQuery("q", "query", cands, cands, [number[c] for c in cands])
    for presentation in ("by_id", "random"):
        store = MemoryStore()
        run_tournament([q], FirstJudge(), store, 8, 7, presentation=presentation, key="k")
        played = pl.DataFrame(
            [(j.a, j.b, j.shown_first, j.winner) for j in store.load("k")],
            schema=["a", "b", "shown_first", "winner"], orient="row",
        )  # fmt: skip
        share = first_shown_by_source(played)
        assert share.select("source_a", "source_b").rows() == [("aops", "numinamath")]
        cross = played.filter(
            pl.col("a").str.split(":").list.first() != pl.col("b").str.split(":").list.first()
        )
        assert share["pairs"][0] == cross.height >= 60
        aops_wins = cross["winner"].str.starts_with("aops:").mean()
        assert 0.35 < share["a_shown_first"][0] < 0.65 and 0.35 < aops_wins < 0.65
        if presentation == "by_id":  # the order is the numbers', pair by pair
            assert all(
                number[f] == min(number[a], number[b])
                for a, b, f in played.select("a", "b", "shown_first").iter_rows()
            )


def test_the_boxed_answer_is_the_last_or_the_first():
    from saber_resources.prompts import ParseError, parse_judgment

    text = r"Sample 1 leans on \boxed{2}-style counting ... so the answer is \boxed{1}."
    assert parse_judgment(text) == 1 and parse_judgment(text, "last") == 1
    assert parse_judgment(text, "first") == 2
    # the reference's first \boxed{} that holds 1 or 2 alone: another content before it is passed
    # over, where the last-answer reading would take the last one
    worked = r"so $x = \boxed{7}$; of the two, \boxed{ 2 } is closer ... \boxed{1}"
    assert parse_judgment(worked, "first") == 2 and parse_judgment(worked, "last") == 1
    with pytest.raises(ParseError, match="no \\\\boxed"):
        parse_judgment(r"\boxed{7} and \boxed{Sample 1}", "first")
    from saber_resources.llm_tasks import LLMPairJudge

    class Runner:
        backend_name, model, thinking, decoding = "openai", "m", {}, {}

    last = LLMPairJudge(Runner(), "paper", 100)
    first = LLMPairJudge(Runner(), "paper", 100, boxed_answer="first")
    assert first.version != last.version and "first-1or2-boxed" in first.version


def test_the_core_idea_word_cap_is_on_by_default_and_can_be_lifted():
    from saber_resources.prompts import ParseError, parse_summary

    long = " ".join(["Count"] + ["the pairs"] * 20)  # 41 words
    answer = json.dumps({"has_core_idea": True, "core_idea": long, "supporting_ideas": [],
                         "keywords": [], "confidence": 0.9})  # fmt: skip
    with pytest.raises(ParseError, match="summary has 41 words"):
        parse_summary(answer)
    assert parse_summary(answer, word_cap=False)[0] == long


def test_topic_scores_are_rescaled_before_tau_or_compared_as_given():
    from saber_assets.annotations.traversal import traverse

    class Scorer:  # the root's children score 0.6 and 0.5: relevant only after rescaling
        def score_batch(self, items):
            from saber_resources.llm_tasks import Outcome

            return [Outcome({lab: s for lab, s in zip(labels, (0.6, 0.5, 0.4), strict=False)})
                    for _, labels in items]  # fmt: skip

    children = [[1, 2], [], []]
    labels = ["root", "a", "b"]
    rescaled, _ = traverse(["text"], children, labels, Scorer(), 0.85)
    raw, _ = traverse(["text"], children, labels, Scorer(), 0.55, rescale=False)
    assert rescaled[0].topics == [1] and raw[0].topics == [1]
    none, _ = traverse(["text"], children, labels, Scorer(), 0.85, rescale=False)
    assert none[0].topics == []


def test_window_pooling_normalises_each_window_or_averages_them_raw():
    from saber_resources.embeddings import make_embedder, pool_windows

    vecs = np.array([[10.0, 0.0], [0.0, 1.0]], dtype=np.float32)  # one text, two windows
    owners = np.array([0, 0])
    assert pool_windows(vecs, owners, 1)[0] == pytest.approx([2**-0.5, 2**-0.5])
    raw = pool_windows(vecs, owners, 1, "raw")[0]
    assert raw == pytest.approx(np.array([10.0, 1.0]) / np.hypot(10, 1))
    with pytest.raises(ValueError, match="window_pooling"):
        make_embedder("openai", "m", window_pooling="max", base_url="http://x")


def test_a_row_filter_keeps_numinamaths_olympiad_rows_and_counts_the_rest(tmp_path):
    """A fixture shaped like NuminaMath-1.5's columns (source, synthetic, question_type,
    problem_is_valid, solution_is_valid): the paper's filter keeps the olympiad, non-synthetic,
    non-multiple-choice, valid rows."""
    import polars as pl

    from saber_assets.config import CorpusConfig
    from saber_assets.corpus.build import build_corpus
    from saber_assets.corpus.sources import CorpusSourceError

    rows = [  # (source, synthetic, question_type, problem valid, solution valid): kept?
        ("olympiads", False, "proof", "Yes", "Yes", True),
        ("aops_forum", False, "math-word-problem", "Yes", "Yes", True),
        ("amc_aime", False, "MCQ", "Yes", "Yes", False),  # multiple choice
        ("olympiads", True, "proof", "Yes", "Yes", False),  # synthetic
        ("cn_k12", False, "math-word-problem", "Yes", "Yes", False),  # not an olympiad source
        ("olympiads", False, "proof", "No", "Yes", False),  # invalid problem
        ("inequalities", False, "proof", "Yes", "Incomplete", False),  # invalid solution
        ("number_theory", False, "math-word-problem", "Yes", "Yes", True),
    ]
    path = tmp_path / "numina.parquet"
    pl.DataFrame(
        [{"problem_id": k, "problem": f"Problem number {k} about {r[0]}.", "solution": "So.",
          "source": r[0], "synthetic": r[1], "question_type": r[2], "problem_is_valid": r[3],
          "solution_is_valid": r[4]} for k, r in enumerate(rows)]
    ).write_parquet(path)  # fmt: skip
    where = {
        "source": {"in": ["olympiads", "aops_forum", "amc_aime", "inequalities", "number_theory"]},
        "synthetic": {"equals": False},
        "question_type": {"not_in": ["MCQ", "multiple-choice"]},
        "problem_is_valid": {"equals": "Yes"},
        "solution_is_valid": {"equals": "Yes"},
    }
    source = {"name": "numina", "path": str(path), "where": where,
              "fields": {"id": "problem_id", "problem": "problem", "solution": "solution"}}  # fmt: skip
    built = build_corpus(CorpusConfig(sources=[source]), seed=0)
    kept = sorted(int(i.split(":")[1]) for i in built.corpus["id"])
    assert kept == [k for k, r in enumerate(rows) if r[-1]]
    stats = built.per_source.row(0, named=True)
    assert stats["rows_read"] == 8 and stats["filtered_out"] == 5 and stats["quarantined"] == 0
    assert json.loads(stats["filtered_by"]) == {
        "source in ['olympiads', 'aops_forum', 'amc_aime', 'inequalities', 'number_theory']": 1,
        "synthetic equals False": 1, "question_type not_in ['MCQ', 'multiple-choice']": 1,
        "problem_is_valid equals 'Yes'": 1, "solution_is_valid equals 'Yes'": 1,
    }  # fmt: skip
    # no condition: every row; a condition on a field the file lacks: a plain refusal
    assert build_corpus(CorpusConfig(sources=[{**source, "where": {}}]), 0).corpus.height == 8
    with pytest.raises(CorpusSourceError, match=r"`where` names \['is_valid'\]"):
        build_corpus(CorpusConfig(sources=[{**source, "where": {"is_valid": {"equals": 1}}}]), 0)
    with pytest.raises(ValueError, match="exactly one of equals"):
        CorpusConfig(sources=[{**source, "where": {"source": {"in": ["a"], "equals": "b"}}}])


def test_p_first_reads_the_digit_the_choice_was_read_from():
    """Under ``boxed_answer: first`` the choice is the first \\boxed{1|2}; its P(first) is that
    digit's logprobs, not the last \\boxed{}'s."""
    import math

    from saber_resources.prompts import judgment_p_first, parse_judgment

    tokens = [
        ("so $x=\\boxed{7}$, ", None), ("\\boxed{", None), ("2", {"2": -0.1, "1": -2.3}),
        ("} ... final ", None), ("\\boxed{", None), ("1", {"1": -0.2, "2": -1.7}), ("}", None),
    ]  # fmt: skip
    text = "".join(t for t, _ in tokens)

    def p_one(lp1, lp2):
        return math.exp(lp1) / (math.exp(lp1) + math.exp(lp2))

    assert parse_judgment(text, "first") == 2 and parse_judgment(text, "last") == 1
    assert judgment_p_first(text, None, tokens, "first") == pytest.approx(p_one(-2.3, -0.1))
    assert judgment_p_first(text, None, tokens, "last") == pytest.approx(p_one(-0.2, -1.7))
