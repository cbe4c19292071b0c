"""Analyses on synthetic inputs with answers known in closed form."""

import re

import numpy as np
import polars as pl
import pytest

from saber_assets.analyses.composition import composition
from saber_assets.analyses.signal_groups import area_under, group_curves


def _ratings(order: dict[str, int], queries: int, domain="Algebra", seed=0) -> pl.DataFrame:
    """`order[group]` candidates per group; ratings put the groups in the given dict order."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(queries):
        base = 5.0
        for group, n in order.items():
            for k in range(n):
                rows.append((domain, f"{domain}-q{q}", f"{group}-{q}-{k}", group, base - k * 0.01))
            base -= 1.0
        rng.shuffle(rows)  # input order must not matter
    return pl.DataFrame(
        rows, schema=["domain", "query_id", "candidate_id", "group", "rating"], orient="row"
    )


def test_ratings_in_group_order_give_the_closed_form_curves():
    sizes = {"both": 4, "topic_only": 3, "summary_only": 5}
    curves = group_curves(_ratings(sizes, queries=3))
    get = {(g, r): f for s, g, r, f in curves.filter(pl.col("scope") == "all").iter_rows()}
    # both fills the top 4: r/4 up to 4; topic-only ranks 5-7; summary-only 8-12
    for r in range(1, 13):
        assert get[("both", r)] == pytest.approx(min(r, 4) / 4)
        assert get[("topic_only", r)] == pytest.approx(min(max(r - 4, 0), 3) / 3)
        assert get[("summary_only", r)] == pytest.approx(min(max(r - 7, 0), 5) / 5)
    assert curves["r"].max() == 12
    area = area_under(curves).row(0, named=True)
    assert area["both"] > area["topic_only"] > area["summary_only"]


def test_curves_per_domain_and_overall():
    a = _ratings({"both": 2, "topic_only": 2}, queries=2, domain="Algebra")
    g = _ratings({"topic_only": 2, "both": 2}, queries=2, domain="Geometry")
    curves = group_curves(pl.concat([a, g]))
    at = {(s, g_, r): f for s, g_, r, f in curves.iter_rows()}
    assert at[("Algebra", "both", 2)] == 1.0 and at[("Geometry", "both", 2)] == 0.0
    assert at[("all", "both", 2)] == 0.5 and at[("all", "both", 4)] == 1.0
    assert set(curves["scope"]) == {"all", "Algebra", "Geometry"}
    assert group_curves(a.head(0)).height == 0


def test_composition_counts_domains_subdomains_sources_and_groups():
    tree = pl.DataFrame(
        {
            "node": [0, 1, 2, 3, 4],
            "path": [
                "Math",
                "Math › Algebra",
                "Math › Algebra › Polynomials",
                "Math › Geometry",
                "Math › Geometry › Triangles",
            ],
        }
    )
    annotations = pl.DataFrame(
        {
            "id": ["m:1", "m:2", "o:3", "o:4"],
            "topics": [[2], [2, 4], [4], [3]],
        },
        schema={"id": pl.String, "topics": pl.List(pl.Int32)},
    )
    queries = pl.DataFrame({"id": ["m:1", "o:3"]})
    documents = pl.DataFrame({"id": ["m:1", "m:2", "o:3", "o:4"]})
    ratings = _ratings({"both": 2, "topic_only": 1}, queries=2)
    t = composition(queries, documents, annotations, tree, ratings)
    d = {(o, l1, l2): (c, s) for o, l1, l2, c, s in t["domains"].iter_rows()}
    assert d[("queries", "Algebra", "Polynomials")] == (1, 0.5)
    assert d[("queries", "Geometry", "Triangles")] == (1, 0.5)
    assert d[("documents", "Geometry", "Triangles")] == (2, 0.5)
    assert d[("documents", "Geometry", None)] == (1, 0.25)  # annotated at the first level
    s = {(o, src): c for o, src, c, _ in t["sources"].iter_rows()}
    assert s == {
        ("queries", "m"): 1,
        ("queries", "o"): 1,
        ("documents", "m"): 2,
        ("documents", "o"): 2,
    }
    g = dict(zip(t["groups"]["group"], t["groups"]["per_query"], strict=True))
    assert g == {"both": 2.0, "topic_only": 1.0}
    # distinct problems per first-level domain: m:2 is in both, counted once in each
    one = {(o, l1): (c, sh) for o, l1, c, sh in t["level1"].iter_rows()}
    assert one[("documents", "Geometry")] == (3, 0.75) and one[("documents", "Algebra")] == (2, 0.5)
    assert one[("queries", "Algebra")] == (1, 0.5)


def test_the_composition_reading_counts_domains_by_queries_not_by_subdomain_hits():
    """#75: "Geometry is the largest domain (31%)" added its sub-domains' hits; by queries
    Algebra led. The sentence reads the distinct queries per domain, each figure from the table."""
    from saber_assets.site import report as rp

    corpus = pl.DataFrame({"id": ["a:1", "a:2", "b:3"], "source": ["a", "a", "b"]})
    level1 = pl.DataFrame({"of": ["queries"] * 3 + ["documents"],
                           "level1": ["Geometry", "Algebra", "Calculus", "Geometry"],
                           "count": [30, 40, 5, 900], "share": [0.3, 0.4, 0.05, 0.9]})  # fmt: skip
    text = rp.read_composition(corpus, {"level1": level1})
    assert "3 problems from 2 source(s); the largest, a, gives 67%" in text
    assert "By queries, Algebra is the largest domain (40 queries, 40%)" in text
    assert "and Calculus the smallest (5, 5%)" in text
    moved = level1.with_columns(
        count=pl.Series([50, 40, 5, 900]), share=pl.Series([0.5, 0.4, 0.05, 0.9])
    )
    assert "By queries, Geometry is the largest domain (50 queries, 50%)" in rp.read_composition(
        corpus, {"level1": moved}
    )


def _board(scores: dict[str, float], setting="stmt-stmt") -> pl.DataFrame:
    return pl.DataFrame(
        {"retriever": list(scores), "setting": setting, "ndcg@10": list(scores.values())}
    )


def test_mteb_correlation_known_answers(tmp_path):
    from saber_assets.analyses.mteb import MtebError, mteb_correlation, read_scores

    models = [f"m{k}" for k in range(8)]
    mteb = pl.DataFrame({"model": models, "score": [float(k) for k in range(8)]})
    # nDCG linear in the MTEB score: r = rho = 1; reversed: -1
    up = _board({f"r{k}": 0.1 + 0.05 * k for k in range(8)})
    names = {f"r{k}": f"m{k}" for k in range(8)}
    matched, table = mteb_correlation(up, mteb, names, recent=["m5", "m6", "m7", "m4"])
    row = table.filter(pl.col("subset") == "all").row(0, named=True)
    assert matched.height == 8 and row["n"] == 8
    assert row["pearson"] == pytest.approx(1) and row["spearman"] == pytest.approx(1)
    assert row["pearson_low"] > 0.9
    recent = table.filter(pl.col("subset") == "recent").row(0, named=True)
    assert recent["n"] == 4
    down = _board({f"r{k}": 1 - 0.05 * k for k in range(8)})
    row = mteb_correlation(down, mteb, names)[1].row(0, named=True)
    assert row["spearman"] == pytest.approx(-1) and row["pearson_high"] < -0.9
    # monotone but not linear: Spearman 1, Pearson below it; CIs contain the estimate
    curved = _board({f"r{k}": float(np.exp(k)) for k in range(8)})
    row = mteb_correlation(curved, mteb, names)[1].row(0, named=True)
    assert row["spearman"] == pytest.approx(1) and row["pearson"] < 0.95
    assert row["pearson_low"] < row["pearson"] < row["pearson_high"]
    # names default to the retriever's own; unmatched ones are left out
    same = _board({"m1": 0.2, "m2": 0.3, "zzz": 0.9, "m3": 0.5})
    assert set(mteb_correlation(same, mteb)[0]["model"]) == {"m1", "m2", "m3"}
    # a bad file says what is wrong
    bad = tmp_path / "mteb.csv"
    bad.write_text("name,score\na,1\n")
    with pytest.raises(MtebError, match="missing column"):
        read_scores(bad)
    bad.write_text("model,score\na,1\na,2\n")
    with pytest.raises(MtebError, match="twice"):
        read_scores(bad)


def test_human_agreement_perfect_partial_and_inter_annotator(tmp_path):
    from saber_assets.study.human_agreement import (
        AnnotationError,
        human_agreement,
        read_annotations,
    )

    # 60 candidates in one query; truth: lower index is better; ratings follow it
    cands = [f"c{k:02d}" for k in range(60)]
    ratings = pl.DataFrame(
        {"query_id": "q", "candidate_id": cands, "rating": [5 - k / 12 for k in range(60)]}
    )
    pairs = [("q", cands[i], cands[j]) for i, j in [(0, 1), (3, 40), (59, 2), (10, 36), (5, 58)]]
    truth = {p: ("a" if p[1] < p[2] else "b") for p in pairs}
    rows = [(q, a, b, truth[(q, a, b)], "ann1") for q, a, b in pairs]
    rows += [
        (q, a, b, "tie" if k == 0 else truth[(q, a, b)], "ann2")
        for k, (q, a, b) in enumerate(pairs)
    ]
    path = tmp_path / "humans.csv"
    pl.DataFrame(rows, schema=["query", "a", "b", "choice", "annotator"], orient="row").write_csv(
        path
    )
    humans = read_annotations(path)
    perfect = dict(truth)
    contrary = {p: ("b" if c == "a" else "a") for p, c in truth.items()}
    scored, summary = human_agreement(humans, {"perfect": perfect, "contrary": contrary}, ratings)
    at = {(p, d): (n, a) for p, d, n, a in summary.select(summary.columns[:4]).iter_rows()}
    # ann2 said tie once where truth is decided: 9 full agreements + one half = 9.5 / 10
    assert at[("perfect", 0)] == (10, pytest.approx(0.95))
    assert at[("bt_ranking", 0)] == (10, pytest.approx(0.95))
    assert at[("contrary", 0)] == (10, pytest.approx(0.05))
    # by rank distance: pairs with Δr >= 25 are (3,40), (59,2), (10,36), (5,58); >= 50: two
    assert at[("perfect", 25)][0] == 8 and at[("perfect", 50)][0] == 4
    assert at[("perfect", 50)][1] == 1.0
    # annotators agree on 4 of 5 pairs and half on the tie
    assert at[("inter_annotator", 0)] == (5, pytest.approx(0.9))
    inter = summary.filter(pl.col("predictor") == "inter_annotator").row(0, named=True)
    assert inter["alpha"] is not None and inter["kappa"] is not None
    assert scored.height == 10
    # corrected for chance: the perfect judge's κ against ann1 and ann2, the contrary one's
    # below 0, an interval around each; as scikit-learn computes it
    from sklearn.metrics import cohen_kappa_score

    row = summary.filter((pl.col("predictor") == "perfect") & (pl.col("delta_r_at_least") == 0))
    human = scored["choice"].to_list()
    want = cohen_kappa_score(human, [perfect[p] for p in scored.select("query", "a", "b").rows()])
    assert row["kappa"][0] == pytest.approx(want) and 0.5 < want < 1
    assert row["kappa_low"][0] <= row["kappa"][0] <= row["kappa_high"][0]
    contrary_row = summary.filter(pl.col("predictor") == "contrary").row(0, named=True)
    assert contrary_row["kappa"] < 0 and contrary_row["agreement"] == pytest.approx(0.05)
    # a pair the judge did not answer is left out of its count, not scored 0
    partial = {p: c for p, c in truth.items() if p != pairs[0]}
    _, summary = human_agreement(humans, {"judge": partial}, ratings)
    assert summary.filter(pl.col("predictor") == "judge")["annotations"][0] == 8
    # malformed files name the problem
    path.write_text("query,a,b,choice,annotator\nq,c00,c01,maybe,x\n")
    with pytest.raises(AnnotationError, match="line 2: choice 'maybe'"):
        read_annotations(path)
    path.write_text("query,a,b,choice\nq,c00,c01,a\n")
    with pytest.raises(AnnotationError, match="annotator"):
        read_annotations(path)
    # the order people saw, where recorded: kept, and checked
    from saber_assets.study.human_agreement import shown_first

    path.write_text(
        "query,a,b,choice,annotator,shown_first\nq,c00,c01,a,x,c01\nq,c00,c01,a,y,c00\n"
        "q,c00,c02,b,x,\n"
    )
    assert shown_first(read_annotations(path)) == {("q", "c00", "c01"): "c01"}
    path.write_text("query,a,b,choice,annotator,shown_first\nq,c00,c01,a,x,c09\n")
    with pytest.raises(AnnotationError, match="line 2: shown_first 'c09' is neither a nor b"):
        read_annotations(path)


def test_judge_choices_asks_once_in_the_order_people_saw():
    from saber_assets.study.human_agreement import judge_choices
    from saber_resources.llm_tasks import Outcome

    class Judge:  # prefers the shorter text; says "first" on equal lengths (position bias)
        def __init__(self):
            self.items = []

        def compare_batch(self, items):
            self.items += items
            return [Outcome(1 if len(x) <= len(y) else 2) for _, x, y in items]

    text = {"a": "xx", "b": "xxxx", "c": "yy", "q": "query"}
    pairs = [("q", "a", "b"), ("q", "b", "a"), ("q", "a", "c")]
    judge = Judge()
    shown = {("q", "a", "c"): "c", ("q", "a", "b"): "b"}
    got = judge_choices(judge, text, pairs, shown, seed=5)
    assert len(judge.items) == 3  # once per pair, not in both orders
    assert judge.items[0] == ("query", "xxxx", "xx") and judge.items[2] == ("query", "yy", "xx")
    # the bias shows: shown c first, the equal-length pair goes to c
    assert got == {("q", "a", "b"): "a", ("q", "b", "a"): "b", ("q", "a", "c"): "b"}
    # unrecorded orders are seeded: the same seed, the same orders; another seed may differ
    again, repeat = Judge(), Judge()
    judge_choices(again, text, pairs, {}, seed=5)
    judge_choices(repeat, text, pairs, {}, seed=5)
    assert repeat.items == again.items
    seeds = set()
    for seed in range(8):
        j = Judge()
        judge_choices(j, text, pairs, {}, seed=seed)
        seeds.add(tuple(j.items))
    assert len(seeds) > 1


def test_convergence_known_answers():
    from saber_assets.analyses.convergence import (
        convergence,
        exhaustive_strengths,
        inversions,
        lookup_judge,
        round_robin,
    )

    truth = np.random.default_rng(3).normal(0, 1.5, 20)
    assert inversions(truth, truth) == 0
    assert inversions(-truth, truth) == 20 * 19 / 2
    assert inversions(np.zeros(20), truth) == 20 * 19 / 4  # all tied: half of every pair
    first, second = round_robin(20, seed=1)
    assert len(first) == 190 and len({frozenset(p) for p in zip(first, second, strict=True)}) == 190
    # a noise-free judge: the exhaustive ranking is the truth, and the lookup answers both ways
    p = (truth[first] > truth[second]).astype(float)
    assert inversions(exhaustive_strengths(20, first, second, p), truth) == 0
    judge = lookup_judge(20, first, second, p)
    assert judge(second[:5], first[:5]).tolist() == (1 - p[:5]).tolist()
    curves = convergence(20, first, second, p, rounds=12, seed=0)
    assert set(curves["policy"]) == {"swiss", "random", "adaptive", "efficient"}
    swiss = curves.filter(pl.col("policy") == "swiss").sort("round")
    assert swiss["calls"].to_list()[:3] == [10, 20, 30]
    assert swiss["inversions"][-1] < swiss["inversions"][0]
    # with every pair asked, any policy's ranking is the exhaustive one
    full = convergence(20, first, second, p, rounds=19, seed=0, policies=("random",))
    assert full.sort("round")["inversions"][-1] == 0


class _SeesOnly:
    """Scores by shared tokens of one side only: the formulas or the prose."""

    def __init__(self, side: str):
        self.name, self.side = side, side

    def score(self, query, docs):
        from saber_assets.retrievers.tokenize import plain_tokens, split_math

        def toks(t):
            prose, formulas = split_math(t)
            return set(plain_tokens(" ".join(formulas) if self.side == "math" else prose))

        q = toks(query)
        return np.array([len(q & toks(d)) for d in docs], dtype=float)


class _SeesOnlyBulk(_SeesOnly):
    """The same, through the corpus path (every text against every pooled document)."""

    def corpus_scores(self, query, all_docs):
        return self.score(query, all_docs)


class _SeesOnlyByRow(_SeesOnlyBulk):
    """The same, its pool's rows asked by document (as Approach Zero's corpus index is); its
    whole-pool ranking refused, so the analysis must not take that path."""

    candidates_by_row = True

    def corpus_scores(self, query, all_docs):
        raise AssertionError("ranked the whole pool where rows were enough")

    def candidate_scores_batch(self, queries, rows, all_docs):
        self.asked = [len(r) for r in rows]
        return [
            self.score(q, [all_docs[r] for r in rs]) for q, rs in zip(queries, rows, strict=True)
        ]


def test_math_vs_words_a_math_only_retriever_makes_math_win():
    from saber_assets.analyses.math_vs_words import (
        math_token_ratio,
        math_vs_words,
        read_math_vs_words,
        variants,
    )

    assert variants("Solve $x^2 = 4$ for real x.") == ("$x^2 = 4$", "Solve for real x.")
    assert variants("No formulas here.") == ("", "No formulas here.")
    assert math_token_ratio("Find $a b c$ now") == pytest.approx(3 / 5)
    docs = pl.DataFrame(
        {
            "id": [f"d{k}" for k in range(7)],
            "problem": [
                f"Prove that $y^{k} + z = w$ holds whenever the sum is even" for k in range(7)
            ],
            "solution": ["Induction on the even sum."] * 7,
        }
    )
    queries = pl.DataFrame(
        {
            "id": ["q1", "q2", "q3"],
            "problem": [
                "Show $y^2 + z = w$ when the sum is even",
                "Compute $y^3 + z$ when the sum is even",
                "A query with words only about even sums",
            ],
            "solution": ["", "", ""],
            "candidates": [[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6], [0, 1]],
            "relevance_scores": [[5.0, 4, 3, 2, 1, 0], [0.0, 1, 2, 3, 4, 5], [1.0, 0]],
            "domains": [["Algebra"], ["Algebra", "Geometry"], ["Algebra"]],
        }
    )
    retrievers = {
        "math-only": _SeesOnly("math"),
        "words-only": _SeesOnly("words"),
        "math-bulk": _SeesOnlyBulk("math"),
        "math-by-row": _SeesOnlyByRow("math"),
    }
    per_query, summary = math_vs_words(queries, docs, retrievers, ("statement-statement",))
    at = {(r, d): row for r, _, d, *row in summary.iter_rows()}
    # (queries, dropped, failed, math_wins_pct, math_token_ratio)
    assert at[("math-only", "Algebra")][:4] == [2, 1, 0, 100.0]
    assert at[("words-only", "Algebra")][:4] == [2, 1, 0, 0.0]
    assert at[("math-only", "Geometry")][:4] == [1, 0, 0, 100.0]
    # each query once: q2 sits in Algebra and Geometry, and counts once over all queries
    assert at[("math-only", "all queries")][:4] == [2, 1, 0, 100.0]
    text = read_math_vs_words(summary)
    assert text.startswith(
        "Share of queries where the formulas alone are closer to the best-rated candidates than "
        "the words alone, each query counted once: from 100% (math-bulk, statement-statement, "
        "2 queries) down to 0% (words-only, statement-statement, 2 queries)."
    )
    # the headline reads the rows over all queries, not the domains' rows added up
    moved = summary.with_columns(
        pl.when((pl.col("retriever") == "words-only") & (pl.col("domain") == "all queries"))
        .then(50.0).otherwise(pl.col("math_wins_pct")).alias("math_wins_pct")
    )  # fmt: skip
    assert "down to 50% (words-only, statement-statement, 2 queries)" in read_math_vs_words(moved)
    assert at[("math-bulk", "Algebra")] == at[("math-only", "Algebra")]
    assert at[("math-by-row", "Algebra")] == at[("math-only", "Algebra")]
    assert retrievers["math-by-row"].asked == [5, 5, 5, 5]  # two queries' two variants, top 5
    assert per_query.filter(pl.col("query_id") == "q3")["dropped"].all()
    # a retriever limited to some settings (its registry entry) is tried in those alone
    two = ("statement-statement", "full-full")
    per_query, _ = math_vs_words(queries, docs, retrievers, two,
                                 settings_of={"math-only": ["full-full"]})  # fmt: skip
    tried = per_query.group_by("retriever").agg(pl.col("setting").unique().sort())
    assert dict(tried.iter_rows()) == {"math-only": ["full-full"], "words-only": sorted(two),
                                       "math-bulk": sorted(two),
                                       "math-by-row": sorted(two)}  # fmt: skip

    # math not in LaTeX: dropped by the regex split, recovered by a (fake) LLM segmentation;
    # a failed segmentation is dropped with its reason
    plain = queries.with_columns(
        pl.Series("problem", [*queries["problem"][:2], "Show y^2 + z = w when the sum is even"])
    )

    from saber_assets.analyses.math_vs_words import variants

    def segment(texts):  # a model: LaTeX as the regex reads it, y^2 + z = w found, else nothing
        asked.extend(texts)
        return [
            ("$y^2 + z = w$", "Show when the sum is even")
            if "y^2" in t
            else variants(t)
            if "$" in t
            else "no math"
            for t in texts
        ]

    asked: list[str] = []
    per_query, summary = math_vs_words(plain, docs, retrievers, ("statement-statement",))
    assert per_query.filter(pl.col("query_id") == "q3")["dropped"].all()
    per_query, summary = math_vs_words(
        plain,
        docs,
        {"math-only": retrievers["math-only"]},
        ("statement-statement",),
        segment=segment,
    )
    assert asked == plain["problem"].to_list()  # every query goes through the LLM step
    q3 = per_query.filter(pl.col("query_id") == "q3").row(0, named=True)
    assert q3["split"] == "llm" and q3["math_wins"] and not q3["dropped"]
    assert q3["ratio"] == pytest.approx(4 / 10)  # y 2 z w | show when the sum is even
    row = summary.filter(pl.col("domain") == "Algebra").row(0, named=True)
    assert (row["queries"], row["dropped"], row["llm_split"], row["math_wins_pct"]) == (
        3,
        0,
        3,
        100.0,
    )
    asked.clear()
    per_query, _ = math_vs_words(
        queries,
        docs,
        {"math-only": retrievers["math-only"]},
        ("statement-statement",),
        segment=segment,
    )
    q3 = per_query.filter(pl.col("query_id") == "q3").row(0, named=True)
    assert q3["dropped"] and q3["error"] == "segmentation failed: no math"


def test_llm_segmenter_keeps_only_verbatim_expressions():
    import json

    from saber_resources.llm_tasks import LLMSegmenter, TaskRunner
    from saber_resources.prompts import ParseError, parse_segment

    src = "Show that x + y = 10 when x = 4."
    assert parse_segment('{"math": ["x + y = 10", "x = 4"], "words": "Show that when"}', src) == (
        ["x + y = 10", "x = 4"],
        "Show that when",
    )
    with pytest.raises(ParseError, match="not in the statement"):
        parse_segment('{"math": ["x + y = 11"], "words": "Show"}', src)
    with pytest.raises(ParseError, match="non-empty string"):
        parse_segment('{"math": ["", 3], "words": "Show"}', src)

    class Backend:
        name, model = "fake", "m"

        def generate(self, requests):
            from saber_resources.llm import LLMResponse

            out = []
            for r in requests:
                text = re.search(
                    r"<statement-\w+>\n(.*)\n</statement-\w+>", r.messages[-1][1], re.S
                )[1]
                # the first answer invents an expression; the retry answers properly
                expr = "x + y = 11" if r.seed == 0 else "x + y = 10"
                out.append(LLMResponse(json.dumps({"math": [expr], "words": text[:4]})))
            return out

    [o] = LLMSegmenter(TaskRunner(Backend())).segment_batch([src])
    assert o.ok and o.value == (["x + y = 10"], "Show") and o.attempts == 2


class _TruthJudge:
    """Knows the truth (lower index better); ``bias`` makes it say "first" whatever it sees,
    ``fail_draw`` fails every answer of that draw."""

    def __init__(self, bias=False, fail_draw=None):
        self.bias, self.fail_draw, self.draws = bias, fail_draw, []

    def compare_batch(self, items, sample=0, temperature=0.7):
        from saber_resources.llm_tasks import Outcome

        self.draws.append((sample, temperature))
        if sample == self.fail_draw:
            return [Outcome(None, ok=False, error="garbled") for _ in items]
        return [Outcome(1 if self.bias or int(x[1:]) < int(y[1:]) else 2) for _, x, y in items]


class _BandJudge:
    """Ordinal 0-5 from the truth in bands of 10 candidates (neighbours share a grade)."""

    def score_batch(self, items):
        from saber_resources.llm_tasks import Outcome

        return [Outcome(5 - int(c[1:]) // 10) for _, c in items]


def test_judging_regimes_known_answers():
    from saber_assets.analyses.judging_regimes import (
        majority,
        regime_agreement,
        regime_choices,
        sample_pairs,
    )

    cands = [f"c{k:02d}" for k in range(60)]
    ratings = pl.DataFrame(
        {
            "query_id": ["q"] * 60 + ["r"] * 60,
            "candidate_id": cands * 2,
            "rating": [5 - k / 12 for k in range(60)] * 2,
        }
    )
    text = {c: c for c in cands} | {"q": "q", "r": "r"}
    pairs = sample_pairs(ratings, 300, seed=7)
    assert len(pairs) == 300 and len({(q, frozenset((a, b))) for q, a, b in pairs}) == 300
    assert pairs == sample_pairs(ratings, 300, seed=7) != sample_pairs(ratings, 300, seed=8)
    assert len(sample_pairs(ratings, 10**6, seed=7)) == 2 * 60 * 59 // 2  # capped at every pair
    # both display orders are sampled, so position bias cannot line up with the ranking
    assert 0.3 < np.mean([int(a[1:]) < int(b[1:]) for _, a, b in pairs]) < 0.7

    assert (majority(3, 2, 1), majority(4, 1, 1), majority(2, 0, 1), majority(0, 0, 1)) == (
        "tie", "a", "a", None,
    )  # fmt: skip

    # a perfect judge: every regime agrees with a ranking that follows the truth
    judge = _TruthJudge()
    choices, failed = regime_choices(pairs, text, judge, _BandJudge(), votes=5, tie_margin=1)
    assert [s for s, _ in judge.draws] == [0, 1, 2, 3, 4]
    _, summary = regime_agreement(pairs, choices, ratings, failed)
    at = {(r, d): (n, a, t) for r, d, n, a, t in summary.select(summary.columns[:5]).iter_rows()}
    assert at[("pairwise_single", 0)] == (300, 1.0, 0.0)
    assert at[("majority_vote_5", 0)] == (300, 1.0, 0.0)
    perfect = summary.filter((pl.col("regime") == "pairwise_single")
                             & (pl.col("delta_r_at_least") == 0)).row(0, named=True)  # fmt: skip
    assert perfect["kappa"] == perfect["kappa_weighted"] == pytest.approx(1.0)
    # the ordinal judge ties within a band of 10: half credit there, full credit from Δr >= 10
    same_band = [p for p in pairs if int(p[1][1:]) // 10 == int(p[2][1:]) // 10]
    n, agree, ties = at[("ordinal", 0)]
    assert ties == pytest.approx(len(same_band) / 300)
    assert agree == pytest.approx(1 - 0.5 * len(same_band) / 300)
    assert at[("ordinal", 25)][1:] == (1.0, 0.0)

    # a judge that always says "first": one draw is a coin flip against the ranking, five
    # draws in alternating orders split 3-2, which the margin rule calls a tie (half credit)
    choices, failed = regime_choices(pairs, text, _TruthJudge(bias=True), _BandJudge())
    _, summary = regime_agreement(pairs, choices, ratings, failed)
    at = {(r, d): (n, a, t) for r, d, n, a, t in summary.select(summary.columns[:5]).iter_rows()}
    assert at[("majority_vote_5", 0)] == (300, 0.5, 1.0)
    assert 0.3 < at[("pairwise_single", 0)][1] < 0.7
    # corrected for chance: the vote that always ties and the single answer that always names
    # the first shown have half the raw agreement (ties half credit; a coin against the ranking)
    # and a κ of 0: a constant answer tells nothing
    rows = summary.filter(pl.col("delta_r_at_least") == 0)
    kappa = dict(zip(rows["regime"], rows["kappa"], strict=True))
    assert kappa["majority_vote_5"] == pytest.approx(0.0)
    assert kappa["pairwise_single"] == pytest.approx(0.0)

    # a failed draw is no vote: 4 remain, 4-0 still decides; draw 0 failing leaves no single
    choices, failed = regime_choices(pairs, text, _TruthJudge(fail_draw=0), _BandJudge())
    assert failed == {"pairwise_single": 300, "majority_vote_5": 300, "ordinal": 0}
    assert choices["pairwise_single"] == {}
    _, summary = regime_agreement(pairs, choices, ratings, failed)
    row = summary.filter(
        (pl.col("regime") == "pairwise_single") & (pl.col("delta_r_at_least") == 0)
    )
    assert row["pairs"][0] == 0 and row["agreement"][0] is None and row["failed"][0] == 300
    row = summary.filter(
        (pl.col("regime") == "majority_vote_5") & (pl.col("delta_r_at_least") == 0)
    )
    assert row["agreement"][0] == 1.0


def test_cpu_ordinal_judge_grades_on_the_scale():
    from saber_resources.cpu_tasks import CPUOrdinalJudge
    from saber_resources.task_set import cpu_embedder

    judge = CPUOrdinalJudge(cpu_embedder())
    q = "Problem:\nFind all primes p with p^2+2 prime.\n\nSolution:\nReduce modulo 3."
    same = "Problem:\nShow 3 divides n^3-n.\n\nSolution:\nReduce modulo 3; check residues."
    far = "Problem:\nArea of a triangle with sides 3,4,5.\n\nSolution:\nHeron's formula."
    judge.scorer.evidence[(q, q)] = judge.scorer.evidence[(q, same)] = (1.0, 1.0)
    out = judge.score_batch([(q, q), (q, same), (q, far)])
    grades = [o.value for o in out]
    assert all(o.ok and 0 <= o.value <= 100 and o.value % 5 == 0 for o in out)
    assert grades[0] >= grades[1] > grades[2]


def test_report_readings_follow_the_numbers():
    from saber_assets.analyses.convergence import read_convergence
    from saber_assets.analyses.signal_groups import read_signal_groups
    from saber_assets.site import report as rp

    # 1000 decided judgments, the first shown wins 500 / 600: the reading must say which
    def judgments(first_wins: int) -> pl.DataFrame:
        rows = [("D", "q", "a" if k < first_wins else "b", "a") for k in range(1000)]
        rows += [("D", "q", None, "a")] * 10  # 10 failures
        return pl.DataFrame(rows, schema=["domain", "query", "winner", "shown_first"], orient="row")

    stats = rp.tournament_stats(judgments(500))
    row = stats.filter(pl.col("domain") == "all").row(0, named=True)
    assert (row["judgments"], row["failures"], row["first_shown_wins"]) == (1010, 10, 0.5)
    assert "no detectable position bias" in rp.read_tournament(stats)
    assert "towards the first" in rp.read_tournament(rp.tournament_stats(judgments(600)))
    assert "towards the second" in rp.read_tournament(rp.tournament_stats(judgments(400)))

    board = pl.DataFrame(
        {
            "retriever": ["x", "y", "x", "y"],
            "setting": ["s1", "s1", "s2", "s2"],
            "ndcg@10": [0.8, 0.5, 0.6, 0.58],
            "ci_low": [0.75, 0.45, 0.55, 0.53],
            "ci_high": [0.85, 0.55, 0.65, 0.63],
        }
    )
    text = rp.read_leaderboard(board)
    assert "In s1, x leads" in text and "outside its interval" in text
    assert "In s2, x leads" in text and "intervals overlap" in text
    # with the paired tests, the lead is read off the test, not off overlapping intervals
    tests = pl.DataFrame({"setting": ["s1", "s2"], "domain": ["Overall"] * 2, "a": ["x", "x"],
                          "b": ["y", "y"], "p_randomization_holm": [0.001, 0.2]})  # fmt: skip
    ranked = board.with_columns(rank_ci=pl.lit("1"), beats=pl.Series(["y", None, None, None]))
    text = rp.read_leaderboard(ranked, tests)
    assert "In s1, x leads with nDCG@10 0.800 [0.750, 0.850], rank 1 at 95%" in text
    assert (
        "p = 0.001 (Holm), so the lead is significant; it is significantly better than 1 of the other 1"
        in text
    )
    assert "p = 0.2 (Holm), so the lead is not significant" in text
    # the joint interval beside the corrected score it is centred on, and the judge's share to
    # the precision its draws support (two Monte-Carlo standard errors)
    joint = ranked.with_columns(
        ci_low_joint=pl.lit(0.81), ci_high_joint=pl.lit(0.88), rank_ci_joint=pl.lit("1–2"),
        ndcg_corrected=pl.lit(0.845), judge_noise_share=pl.lit(0.213),
        judge_noise_share_se=pl.lit(0.02),
    )  # fmt: skip
    text = rp.read_leaderboard(joint, tests)
    assert (
        "([0.810, 0.880] around the judge-corrected 0.845 and rank 1–2 once the judge's noise is "
        "counted; the judge's share of that interval's variance is 0.21 ± 0.04)" in text
    )
    noisier = rp.read_leaderboard(joint.with_columns(judge_noise_share_se=pl.lit(0.1)), tests)
    assert "variance is 0.2 ± 0.2)" in noisier

    areas = pl.DataFrame(
        {"scope": ["all"], "both": [0.7], "topic_only": [0.5], "summary_only": [0.2]}
    )
    assert "both 0.700, topic-only 0.500, summary-only 0.200. The both" in read_signal_groups(areas)
    assert "off" in read_convergence(pl.DataFrame(schema={"policy": pl.String}), 20)
    # a domain without viable queries has no threshold; a failed retriever has no score
    thresholds = pl.DataFrame(
        {
            "domain": ["A", "B", "C"],
            "domain_topic_threshold": [0.5, None, 0.878],
            "topic_threshold": [0.502] * 3,
            "summary_threshold": [0.247] * 3,
            "viable_queries": [7, None, 5],
        }
    )
    groups = pl.DataFrame({"group": ["both"], "per_query": [10.0]})
    text = rp.read_candidates(thresholds, groups)
    # the cut every candidate met is the global one, each domain's strictest point beside it
    # (#75: "Topic thresholds run from 0.502 to 0.878" read the latter as the former)
    assert text.startswith("Every candidate was cut at topic > 0.502 and summary > 0.247;")
    assert (
        "each domain's own strictest topic point runs from 0.500 to 0.878 across 2 domains" in text
    )
    assert "; 1 domain(s) have no threshold" in text
    # a per-domain sum, said as one (#75: "799 queries were viable" of 652 distinct problems)
    assert (
        "12 viable queries counted per domain (a query in several domains counts in each)" in text
    )
    assert "10 both" in text
    moved = rp.read_candidates(thresholds.with_columns(topic_threshold=pl.lit(0.61)), groups)
    assert "cut at topic > 0.610" in moved
    failed = board.vstack(
        pl.DataFrame(
            {
                "retriever": ["z"],
                "setting": ["s1"],
                "ndcg@10": [None],
                "ci_low": [None],
                "ci_high": [None],
            },
            schema=board.schema,
        )
    )
    assert rp.read_leaderboard(failed) == rp.read_leaderboard(board)


def test_report_html_is_self_contained_and_escaped():
    import matplotlib.pyplot as plt

    from saber_assets.lib.figures import png_base64
    from saber_assets.lib.sections import Section
    from saber_assets.site.report import render_html

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    page = render_html(
        "T <1>",
        "sub",
        [
            Section(
                "A & B",
                "x < y",
                [("t", pl.DataFrame({"name": ["<script>"], "v": [0.12345]}))],
                [("fig", png_base64(fig))],
            )
        ],
    )
    assert "<script>" not in page and "&lt;script&gt;" in page and "0.123" in page
    assert "T &lt;1&gt;" in page and 'id="a---b"' in page and 'href="#a---b"' in page
    assert page.count("data:image/png;base64,iVBOR") == 1  # a real PNG, inline


def test_an_analysis_declares_its_report_section_and_the_report_reads_it():
    """Adding an analysis touches its own module and assets.py, never the report: the report
    asset reads every analysis that declares a section, in the order of `stages.ANALYSES`."""
    import polars as pl

    from saber_assets.definitions import stage_declarations
    from saber_assets.site import report as rp
    from saber_assets.site.report_assets import benchmark_report
    from saber_assets.stages import ANALYSES

    declared = stage_declarations()
    report = next(d for d in declared if d.asset_name == "benchmark_report")
    sectioned = [d.asset_name for d in declared if d.section is not None]
    assert len(sectioned) == 8
    assert list(report.attrs["ins"]) == [a for a in ANALYSES if a in sectioned]
    built = report.build()
    reads = {k.to_user_string() for k in built.keys_by_input_name.values()}
    assert set(sectioned) | {"benchmark_composition", "relevance_ratings"} <= reads

    def planted(table: pl.DataFrame, cfg) -> rp.Section:
        return rp.Section("Planted", "a reading", [("rows", table)])

    sections = {d.asset_name: d.section for d in declared if d.section is not None}
    grown = benchmark_report({**sections, "planted_analysis": planted}).build()
    assert "planted_analysis" in {k.to_user_string() for k in grown.keys_by_input_name.values()}


def test_cohen_kappa_matches_scikit_learn_unweighted_and_linearly_weighted():
    from sklearn.metrics import cohen_kappa_score

    from saber_assets.study.human_agreement import ORDER, cohen_kappa

    rng = np.random.default_rng(5)
    labels = ["a", "tie", "b"]
    for n in (5, 40, 300):
        x = [labels[i] for i in rng.integers(0, 3, n)]
        y = [c if rng.random() < 0.6 else labels[rng.integers(0, 3)] for c in x]
        cx, cy = [ORDER[c] for c in x], [ORDER[c] for c in y]
        for weighted, sk in ((False, None), (True, "linear")):
            want = cohen_kappa_score(cx, cy, labels=[0, 1, 2], weights=sk)
            got, low, high = cohen_kappa(x, y, weighted=weighted, seed=1)
            assert got == pytest.approx(want)
            assert low <= got <= high
    # one choice throughout: chance agreement is total, κ undefined
    assert cohen_kappa(["a"] * 4, ["a"] * 4) == (None, None, None)
    # the interval is seeded
    x = [labels[i] for i in rng.integers(0, 3, 50)]
    assert cohen_kappa(x, x[::-1], seed=3) == cohen_kappa(x, x[::-1], seed=3)


def test_krippendorff_alpha_across_annotators_with_its_interval():
    import krippendorff

    from saber_assets.study.human_agreement import ORDER, annotator_alpha

    rng = np.random.default_rng(2)
    labels = ["a", "tie", "b"]
    items = []
    for _ in range(60):  # three annotators who mostly agree, one of them on every other pair
        truth = labels[rng.integers(0, 3)]
        item = {f"ann{k}": truth if rng.random() < 0.8 else labels[rng.integers(0, 3)]
                for k in range(3)}  # fmt: skip
        if len(items) % 2:
            del item["ann2"]
        items.append(item)
    alpha, low, high = annotator_alpha(items, seed=4)
    data = np.array([[ORDER[i[c]] if c in i else np.nan for i in items]
                     for c in ("ann0", "ann1", "ann2")])  # fmt: skip
    assert alpha == pytest.approx(krippendorff.alpha(reliability_data=data,
                                                     level_of_measurement="ordinal"))  # fmt: skip
    assert 0.4 < alpha < 1 and low < alpha < high
    assert annotator_alpha(items, seed=4) == (alpha, low, high)  # seeded
    # pairs labelled once carry no agreement; one value throughout: undefined
    assert annotator_alpha([{"ann0": "a"}] * 5, seed=1) == (None, None, None)
    assert annotator_alpha([{"x": "a", "y": "a"}] * 5, seed=1) == (None, None, None)


def test_the_published_benchmark_is_found_in_a_rebuilt_corpus_exactly_near_or_not():
    """Published rows planted in a small corpus: one exact (new spacing and numbers), one near
    (a word changed), one absent; the query exact. Each is reported as it is."""
    from saber_assets.benchmark.data import QUERY_SCHEMA, Benchmark
    from saber_assets.contamination.published import published_recall

    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi".split()

    def text(seed: int) -> str:  # 60 words of its own, a formula in it
        return " ".join(words[(seed * 7 + i * (seed + 3)) % len(words)] + str(i % 5) * (i % 2)
                        for i in range(60)) + f" so $x^{seed}+1$ holds."  # fmt: skip

    docs = pl.DataFrame({"id": [f"d{i}" for i in range(4)],
                         "problem": [text(i) for i in range(4)], "solution": ["s"] * 4})  # fmt: skip
    queries = pl.DataFrame(
        [{"id": "q0", "problem": text(9), "solution": "s", "candidates": [0, 1, 2, 3],
          "relevance_scores": [5.0, 2.0, 1.0, 0.0], "domains": ["Algebra"]}],
        schema=QUERY_SCHEMA,
    )  # fmt: skip
    published = Benchmark(queries, docs, {"name": "sabermath"})
    near = text(1).rsplit(" ", 4)
    corpus = pl.DataFrame({
        "id": ["numina:17", "aops:3", "official:2", "aops:9"],
        "problem": [
            text(0).replace(" ", "  ").replace("x^0", "x^7"),  # spacing and numbers: exact
            " ".join([near[0], "omega", *near[2:]]),  # one word changed: near
            text(9),  # the query itself
            "an unrelated problem about triangles and circles " * 6,
        ],
    })  # fmt: skip
    out = published_recall(published, corpus)
    found = {r["item"]: (r["corpus_id"], r["how"]) for r in out["found"].iter_rows(named=True)}
    assert found == {"d0": ("numina:17", "exact"), "d1": ("aops:3", "near"),
                     "q0": ("official:2", "exact")}  # fmt: skip
    assert out["queries"].rows() == [("q0", "official:2", "exact")]
    summary = {(r["role"], r["domain"]): r["share"] for r in out["summary"].iter_rows(named=True)}
    assert summary[("candidate", "all")] == 0.5 and summary[("query", "Algebra")] == 1.0
    by_source = {
        (r["role"], r["source"]): r["found"] for r in out["by_source"].iter_rows(named=True)
    }
    assert by_source == {("candidate", "numina"): 1, ("candidate", "aops"): 1,
                         ("query", "official"): 1}  # fmt: skip
    # nothing of it in the corpus: nothing found, every share 0
    none = published_recall(published, corpus.filter(pl.col("id") == "aops:9"))
    assert none["found"].is_empty() and set(none["summary"]["share"]) == {0.0}


def test_the_rebuilds_grades_are_compared_with_the_published_ones_query_by_query():
    """``grade_agreement``: two published queries the corpus holds (a third it does not), their
    candidates found under other ids, some outside the rebuild's pools. The same grades give τ
    1.0; the order reversed, -1.0; shuffled, in between; the pool shares count what the
    rebuild's pools hold. The sentence reads the table."""
    from saber_assets.benchmark.data import QUERY_SCHEMA, Benchmark
    from saber_assets.contamination.published import agreement_reading, grade_agreement

    docs = pl.DataFrame({"id": [f"d{i}" for i in range(8)], "problem": ["p"] * 8,
                         "solution": ["s"] * 8})  # fmt: skip
    grades = [5.0, 4.0, 2.5, 1.0, 0.0]
    queries = pl.DataFrame(
        [{"id": "q0", "problem": "a", "solution": "s", "candidates": [0, 1, 2, 3, 4],
          "relevance_scores": grades, "domains": ["Algebra"]},
         {"id": "q1", "problem": "b", "solution": "s", "candidates": [5, 6, 7],
          "relevance_scores": [3.0, 2.0, 1.0], "domains": ["Geometry"]},
         {"id": "q2", "problem": "c", "solution": "s", "candidates": [0, 5],
          "relevance_scores": [1.0, 0.0], "domains": ["Geometry"]}],
        schema=QUERY_SCHEMA,
    )  # fmt: skip
    published = Benchmark(queries, docs, {"name": "sabermath"})
    found = pl.DataFrame(
        {
            "item": ["q0", "q1", *(f"d{i}" for i in range(7))],
            "corpus_id": ["c:q0", "c:q1", *(f"c:{i}" for i in range(7))],
        }
    )  # fmt: skip d7 is not in the corpus

    def ratings(q0: list[float]) -> pl.DataFrame:
        rows = [("c:q0", f"c:{i}", r) for i, r in enumerate(q0)]
        rows += [("c:q1", "c:5", 4.0), ("c:q1", "c:99", 5.0)]  # d6 outside the pool
        return pl.DataFrame(rows, schema=["query_id", "candidate_id", "rating"], orient="row")

    same = grade_agreement(published, found, ratings(grades))
    assert same["query"].to_list() == ["q0", "q1"]  # q2 is not in the corpus
    q0 = same.row(0, named=True)
    assert (
        q0["kendall_tau"] == pytest.approx(1.0)
        and q0["pool_share"] == 1.0
        and q0["found_in_corpus"] == 5
    )
    q1 = same.row(1, named=True)  # one candidate in the pool: no τ
    assert (q1["found_in_corpus"], q1["in_rebuilt_pool"], q1["kendall_tau"]) == (2, 1, None)
    assert q1["pool_share"] == 1 / 3
    reversed_ = grade_agreement(published, found, ratings(grades[::-1]))
    assert reversed_["kendall_tau"][0] == pytest.approx(-1.0)
    shuffled = grade_agreement(published, found, ratings([4.0, 5.0, 1.0, 2.5, 0.0]))
    assert -0.9 < shuffled["kendall_tau"][0] < 0.9
    reading = agreement_reading(same)
    assert "2 published queries are in the corpus; 2 were rebuilt as queries" in reading
    assert f"{(1 + 1 / 3) / 2:.1%}" in reading and "mean Kendall τ of 1.000" in reading
    assert "over the 1 queries" in reading
    assert (
        agreement_reading(same.clear())
        == "No published query is in the corpus: nothing to compare."
    )


def test_a_build_finds_its_own_benchmark_when_given_it_as_the_published_one(
    shared_build, tmp_path, monkeypatch
):
    """The assets on a real build: its own exchange-format benchmark, given as the published
    one, is all in its corpus; taken as the query set (``candidates.published_queries``), the
    rebuild takes exactly its queries, its pools hold every published candidate and its grades
    agree at τ 1.0; the same benchmark with each query's grades shuffled agrees less.
    Unconfigured, the assets are empty with a note."""
    import yaml

    from saber_assets.benchmark.data import Benchmark
    from saber_assets.cli import main

    cfg = shared_build("algebra").copy_to(tmp_path, monkeypatch)
    home = tmp_path / "home" / "tiny"
    for name in ("published_benchmark_recall", "published_grade_agreement", "published_matches"):
        assert pl.read_parquet(home / "parquet" / f"{name}.parquet").is_empty()
    bench = Benchmark.read(home / "evaluation_benchmark")
    drawn = set(pl.read_parquet(home / "parquet" / "query_candidates")["query_id"])
    rng = np.random.default_rng(5)
    shuffled = bench.queries.with_columns(
        pl.col("relevance_scores").map_elements(
            lambda g: rng.permutation(g.to_list()).tolist(), return_dtype=pl.List(pl.Float64)
        )
    )
    Benchmark(shuffled, bench.documents, dict(bench.manifest)).write(tmp_path / "shuffled")
    doc = yaml.safe_load(cfg.read_text())
    doc.setdefault("analyses", {})["published_benchmark"] = str(home / "evaluation_benchmark")
    taus = {}
    for name, published in (
        ("same", home / "evaluation_benchmark"),
        ("shuffled", tmp_path / "shuffled"),
    ):
        doc["candidates"] = {**doc.get("candidates", {}), "published_queries": str(published)}
        cfg.write_text(yaml.safe_dump(doc))
        selects = ("thresholds", "domains", "analyses")
        assert (
            main(["build", "--config", str(cfg), *(a for s in selects for a in ("--select", s))])
            == 0
        )
        rebuilt = pl.read_parquet(home / "parquet" / "query_candidates")
        assert set(rebuilt["query_id"]) == drawn  # the published queries, nothing drawn
        agreement = pl.read_parquet(home / "parquet" / "published_grade_agreement.parquet")
        assert agreement.height == len(drawn) and (agreement["pool_share"] == 1.0).all()
        taus[name] = agreement["kendall_tau"].drop_nulls()
        readings = pl.read_parquet(home / "parquet" / "benchmark_report.parquet")["reading"]
        said = f"{len(drawn)} published queries are in the corpus; {len(drawn)} were rebuilt"
        assert readings.str.starts_with(said).sum() == 1  # the report's section, read off it
    assert taus["same"].len() == len(drawn) and (taus["same"] > 0.999).all()
    assert taus["shuffled"].mean() < 0.5
    recall = pl.read_parquet(home / "parquet" / "published_benchmark_recall.parquet")
    overall = recall.filter(pl.col("domain") == "all")
    assert set(overall["role"]) == {"query", "candidate"} and overall["share"].to_list() == [
        1.0,
        1.0,
    ]
    assert (recall["items"] > 0).all()
