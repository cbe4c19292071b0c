"""A fusion reads its components' scores from their runs where those are current, and scores the
same as when it runs them itself; a run of other inputs, a missing run or a failed query is
scored again, and said so."""

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.benchmark.texts import document_texts
from saber_assets.orchestration.plan import Step, components_first, one_launch_per_retriever
from saber_assets.retrievers.base import RetrieverFailed
from saber_assets.retrievers.entries import RetrieverEntry
from saber_assets.retrievers.fusion import FusionRetriever
from saber_assets.retrievers.registry import build_retriever
from saber_assets.runs.evaluate import evaluate
from saber_assets.runs.saved import (
    RUN_KEY,
    component_scores,
    documents_digest,
    evaluated_queries,
    run_key,
    saved_scores,
)

from .test_bulk_scoring import _bench

SETTING = "statement-statement"
CODE = "code-1"
ENTRIES = [
    RetrieverEntry(name="bm25-corpus-idf", kind="bm25", params={"idf": "corpus"}),
    RetrieverEntry(name="jaccard", kind="jaccard"),
    RetrieverEntry(name="bm25", kind="bm25"),
    RetrieverEntry(
        name="rrf",
        kind="fusion",
        params={"retrievers": ["bm25-corpus-idf", "jaccard", "bm25"], "method": "rrf"},
    ),
]


class Refuses:
    """A component that must not be asked: its scores are in its run."""

    def __init__(self, inner):
        self.inner = inner

    def score(self, query, docs):
        raise AssertionError(f"{self.inner.name} asked again")

    def fit_corpus(self, docs):
        raise AssertionError(f"{self.inner.name} fitted though every score was read")


def _write_runs(tmp_path, bench, rows, fail=()):
    """Each component's run of domain A as the runs asset writes it (with its run key)."""
    texts, queries = document_texts(bench, SETTING), evaluated_queries(bench, SETTING, rows)
    for e in ENTRIES[:3]:
        df = evaluate(build_retriever(e), bench, SETTING, 10, rows, full_corpus=False)
        if e.name in fail:  # the first query failed in this component's run
            df = df.with_columns(
                failed=pl.int_range(pl.len()) == 0,
                scores=pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise(pl.col("scores")),
            )
        key = run_key(e, SETTING, documents_digest(bench), queries, CODE)
        df = df.with_columns(pl.lit(key).alias(RUN_KEY))
        (tmp_path / e.name).mkdir(exist_ok=True)
        df.write_parquet(tmp_path / e.name / "A.parquet")
    return texts, queries


def _fusion():
    from saber_assets.retrievers.registry import RetrieverResources

    return build_retriever(ENTRIES[3], RetrieverResources(entries=ENTRIES))


def test_a_fusion_reads_its_components_runs_and_scores_what_it_computes(tmp_path):
    bench = _bench()
    rows = list(range(0, 40, 2))
    texts, queries = _write_runs(tmp_path, bench, rows)
    computed = evaluate(_fusion(), bench, SETTING, 10, rows, full_corpus=False)

    fusion = _fusion()
    saved, lines = component_scores(
        tmp_path,
        [(e.name, e) for e in ENTRIES[:3]],
        "A",
        SETTING,
        bench,
        queries,
        documents_digest(bench),
        CODE,
    )
    assert lines == [f"{e.name}: 20 of 20 queries' scores read from its run" for e in ENTRIES[:3]]
    fusion.reuse(saved)
    fusion.components = [Refuses(c) for c in fusion.components]
    read = evaluate(fusion, bench, SETTING, 10, rows, full_corpus=False)
    # the same fused scores to the bit: the components fitted in the fusion as in their own runs
    # (the corpus IDF included), and what was read is what they computed
    assert read["scores"].to_list() == computed["scores"].to_list()
    assert read["ndcg"].to_list() == computed["ndcg"].to_list()
    assert fusion.last_reused == 3
    # a read score costs the latency its own run measured
    own = sum(
        pl.read_parquet(tmp_path / e.name / "A.parquet")["latency_ms"].to_numpy()
        for e in ENTRIES[:3]
    )
    assert (read["latency_ms"].to_numpy() >= own).all()


def test_a_fusion_of_a_corpus_idf_component_fits_it_on_the_corpus():
    """Before, a fusion never fitted its components: BM25 with the corpus IDF scored with the
    candidates' IDF inside the fusion."""
    bench = _bench()
    rows = list(range(10))
    alone = evaluate(build_retriever(ENTRIES[0]), bench, SETTING, 10, rows, full_corpus=False)
    fusion = _fusion()
    evaluate(fusion, bench, SETTING, 10, rows, full_corpus=False)
    q = evaluated_queries(bench, SETTING, rows)[-1]
    docs = [document_texts(bench, SETTING)[c] for c in q[2]]
    assert fusion.components[0].score(q[1], docs).tolist() == alone["scores"].to_list()[-1]


def test_runs_of_other_inputs_missing_runs_and_failed_queries_are_scored_again(tmp_path):
    bench = _bench()
    rows = list(range(12))
    texts, queries = _write_runs(tmp_path, bench, rows, fail={"jaccard"})
    comps = [(e.name, e) for e in ENTRIES[:3]]

    def lines(**kw):
        args = {"components": comps, "domain_key": "A", "setting": SETTING, "bench": bench}
        args |= {"queries": queries, "code": CODE} | kw
        return component_scores(tmp_path, documents=documents_digest(args["bench"]), **args)[1]

    assert (
        lines()[1]
        == "jaccard: 11 of 12 queries' scores read from its run (1 failed there: scored again)"
    )
    # another query set, another parameter, other code, another setting, another domain
    assert all("other inputs" in x for x in lines(queries=queries[1:]))
    changed = ENTRIES[2].model_copy(update={"params": {"k1": 1.2}})
    assert "other inputs" in lines(components=[("bm25", changed)])[0]
    assert all("other inputs" in x for x in lines(code="code-2"))
    assert all("no full-full rows" in x for x in lines(setting="full-full"))
    assert all("no run of this domain yet" in x for x in lines(domain_key="B"))
    assert lines(components=[("gone", None)]) == ["gone: not registered"]
    # another document text
    docs = bench.documents.with_columns(
        pl.when(pl.int_range(pl.len()) == pl.len() - 1)
        .then(pl.col("problem") + " changed")
        .otherwise(pl.col("problem"))
        .alias("problem")
    )
    changed = Benchmark(bench.queries, docs, bench.manifest)
    assert all("other inputs" in x for x in lines(bench=changed))
    # a run file written before runs were keyed
    f = tmp_path / "bm25" / "A.parquet"
    pl.read_parquet(f).drop(RUN_KEY).write_parquet(f)
    found, line = saved_scores(f, "k", SETTING, texts, queries)
    assert found == {} and "no run key" in line


def test_a_fusion_scores_what_it_could_not_read_with_the_component():
    bench = _bench()
    rows = list(range(6))
    fusion = _fusion()
    fusion.reuse([{}, {}, {}])
    a = evaluate(fusion, bench, SETTING, 10, rows, full_corpus=False)
    assert fusion.last_reused == 0 and not a["failed"].any()
    fusion.components[1] = _Failing()
    b = evaluate(fusion, bench, SETTING, 10, rows, full_corpus=False)
    assert b["failed"].all() and b["error"][0] == "jaccard is down"


class _Failing:
    def score(self, query, docs):
        raise RetrieverFailed("jaccard is down")


def test_a_build_runs_each_fusion_after_the_retrievers_it_fuses():
    entries = [
        *ENTRIES,
        RetrieverEntry(
            name="a-fusion-of-fusions", kind="fusion", params={"retrievers": ["rrf", "bm25"]}
        ),
    ]
    names = ["a-fusion-of-fusions", "bm25", "bm25-corpus-idf", "jaccard", "rrf"]
    steps = [Step("build_runs", f"{d}|{n}") for d in ("A", "B") for n in names]
    order = [s.partition for s in components_first(steps, entries)]
    # each retriever's domains together (its loaded index serves the next), fusions after
    assert order == [
        *(f"{d}|{n}" for n in ("bm25", "bm25-corpus-idf", "jaccard") for d in "AB"),
        "A|rrf", "B|rrf", "A|a-fusion-of-fusions", "B|a-fusion-of-fusions",
    ]  # fmt: skip
    # a partition of a retriever the registry no longer holds keeps its place
    assert components_first([Step("build_runs", "A|old")], entries)[0].partition == "A|old"


def test_a_retrievers_neighbouring_domains_make_one_run():
    """A retriever's domains to run are one Dagster run over their key range when they are
    neighbours in the domain order; a gap (an up-to-date or unselected domain) starts another,
    and a step with nothing to do is left as it is. Each range then covers exactly its domains:
    Dagster reads "A|x" .. "C|x" as domains A..C of retriever x."""
    domains = ["A", "B", "C", "D"]

    def step(d: str, r: str, stale: bool = True) -> Step:
        return Step("build_runs", f"{d}|{r}", [f"{d}|{r}: missing"] if stale else [])

    steps = [step("A", "x"), step("B", "x"), step("C", "x"), step("D", "x", stale=False),
             step("A", "y"), step("C", "y"), step("D", "y"), step("B", "z")]  # fmt: skip
    runs = one_launch_per_retriever(steps, domains)
    assert [(s.partition, s.last, s.covers) for s in runs] == [
        ("A|x", "C|x", ["A|x", "B|x", "C|x"]),
        ("D|x", None, []),  # up to date: not run, its own step
        ("A|y", None, []),  # B|y is not selected: a gap
        ("C|y", "D|y", ["C|y", "D|y"]),
        ("B|z", None, []),
    ]
    assert runs[0].label == "build_runs [A|x … C|x]" and runs[0].partitions == ["A|x", "B|x", "C|x"]
    assert runs[1].partitions == ["D|x"] and not runs[1].reasons
    assert runs[0].reasons == ["A|x: missing", "B|x: missing", "C|x: missing"]
    # what Dagster makes of each range: the multi-partition rectangle, its domains of one
    # retriever (checked with the partitions the build defines, domains then retrievers)
    from dagster import (
        DynamicPartitionsDefinition,
        MultiPartitionsDefinition,
        PartitionKeyRange,
        StaticPartitionsDefinition,
    )
    from dagster._core.test_utils import instance_for_test

    parts = MultiPartitionsDefinition(
        {"domain": StaticPartitionsDefinition(domains),
         "retriever": DynamicPartitionsDefinition(name="retriever")}
    )  # fmt: skip
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("retriever", ["x", "y", "z"])
        for run in runs:
            if run.last:
                keys = parts.get_partition_keys_in_range(
                    PartitionKeyRange(run.partition, run.last), dynamic_partitions_store=instance
                )
                assert sorted(str(k) for k in keys) == sorted(run.covers), run.label


def test_saved_scores_keep_their_floats(tmp_path):
    """The scores read are the run's float64 values, not rounded on the way."""
    bench = _bench()
    rows = [0, 1]
    texts, queries = _write_runs(tmp_path, bench, rows)
    key = run_key(ENTRIES[0], SETTING, documents_digest(bench), queries, CODE)
    found, _ = saved_scores(tmp_path / ENTRIES[0].name / "A.parquet", key, SETTING, texts, queries)
    stored = pl.read_parquet(tmp_path / ENTRIES[0].name / "A.parquet")["scores"].to_list()
    assert [v.scores.tolist() for v in found.values()] == stored
    assert all(isinstance(v.scores, np.ndarray) for v in found.values())
    assert isinstance(_fusion(), FusionRetriever)
