"""runs stage: one retriever on one domain's queries per partition, every setting: per-query nDCG
and TREC run files; ``saber build`` runs a retriever's domains in one Dagster run."""

import time

import polars as pl
from dagster import (
    AssetDep,
    AssetExecutionContext,
    AssetIn,
    MaterializeResult,
    MetadataValue,
    MultiToSingleDimensionPartitionMapping,
    Nothing,
)

from saber_assets.benchmark.data import Benchmark
from saber_assets.lib.declare import stage_asset
from saber_assets.lib.metadata import llm_metadata, stage_metadata
from saber_assets.lib.pod_sizes import runs_pod
from saber_assets.lib.tasks import tasks_for
from saber_assets.ontology.domains import domain_title
from saber_assets.outputs import written_whole
from saber_assets.pipeline import PipelineResource
from saber_assets.retrievers.discovery import entry_settings, registered_entry
from saber_assets.retrievers.indexes import prepare_index
from saber_assets.retrievers.registry import (
    RetrieverResources,
    build_retriever,
    components_of,
    needs_judge,
)
from saber_assets.runs.evaluate import evaluate
from saber_assets.runs.files import FULL_CORPUS, trec_name
from saber_assets.runs.provenance import SCORING_CODE
from saber_assets.runs.saved import (
    RUN_KEY,
    component_scores,
    documents_digest,
    evaluated_queries,
    run_key,
)
from saber_assets.runs.trec import write_run
from saber_assets.versions import code_digest
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource


@stage_asset(
    reads=("retrievers.settings", "leaderboard.k", "retrievers.full_corpus", "llm"),
    pod=runs_pod,
    kinds={"ranx", "parquet"},
    ins={
        "retriever_index": AssetIn(
            partition_mapping=MultiToSingleDimensionPartitionMapping("retriever"),
            dagster_type=Nothing,
        )
    },
    deps=[
        "evaluation_benchmark",
        AssetDep(
            "retriever_registry",
            partition_mapping=MultiToSingleDimensionPartitionMapping("retriever"),
        ),
    ],
    pool="llm",  # embedding models and the re-ranker's LLM share the GPU / judge server
)
def retriever_runs(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    stores: StoresResource,
    llm: LLMResource,
) -> MaterializeResult:
    """One retriever on one domain's queries, every setting: per-query nDCG and TREC run files.
    A run over a range of partitions (``saber build``: a retriever's domains in one run) does
    each domain in turn, with the retriever and its index loaded once."""
    keys = [_keys_of(context, k) for k in context.partition_keys]
    if len(keys) == 1:
        return MaterializeResult(metadata=_domain_run(context, pipeline, stores, llm, *keys[0]))
    t0 = time.perf_counter()
    for key, (name, domain_key) in zip(context.partition_keys, keys, strict=True):
        context.add_asset_metadata(
            _domain_run(context, pipeline, stores, llm, name, domain_key), partition_key=key
        )
    return MaterializeResult(
        metadata={
            "partitions_in_this_run": len(keys),
            "run_seconds": round(time.perf_counter() - t0, 2),
        }
    )


def _keys_of(context: AssetExecutionContext, key) -> tuple[str, str]:
    """(retriever, domain key) of a partition key; a run launched by tag (GraphQL, UI) may
    carry it as its string "domain|retriever"."""
    if not hasattr(key, "keys_by_dimension"):
        key = context.assets_def.partitions_def.get_partition_key_from_str(str(key))
    return key.keys_by_dimension["retriever"], key.keys_by_dimension["domain"]


def _domain_run(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    stores: StoresResource,
    llm: LLMResource,
    name: str,
    domain_key: str,
) -> dict:
    """One retriever on one domain: its run files written, its metadata returned."""
    cfg = pipeline.load().leaderboard
    domain = domain_title(pipeline.load().ontology, domain_key)
    entries, entry = registered_entry(pipeline, name, stores.db())
    tasks = tasks_for(llm, stores) if needs_judge(entry, entries) else None
    resources = RetrieverResources.from_stores(stores.db(), entries, tasks)
    retriever = build_retriever(entry, resources)
    bench = Benchmark.read_kept(pipeline.outputs().evaluation_benchmark)
    rows = [i for i, ds in enumerate(bench.queries["domains"].to_list()) if domain in ds]
    out_dir = pipeline.outputs().runs / name
    out_dir.mkdir(parents=True, exist_ok=True)
    frames, meta = [], {}
    t0 = time.perf_counter()
    doc_ids = bench.documents["id"].to_list()
    code, components = code_digest(SCORING_CODE), components_of(entry, entries)
    documents = documents_digest(bench)
    for setting in entry_settings(pipeline, entry):
        index = prepare_index(pipeline, retriever, entry, bench, setting)
        if index is not None:
            meta[f"index {setting}"] = (
                f"{'built' if index.built else 'read'} in {index.seconds:.2f}s"
                + (f" (rebuilt: {index.rebuilt_because})" if index.rebuilt_because else "")
            )
        queries = evaluated_queries(bench, setting, rows)
        if components:  # a fusion: its components' scores from their runs where they are current
            saved, lines = component_scores(
                out_dir.parent, components, domain_key, setting, bench, queries, documents, code
            )
            retriever.reuse(saved)
            meta[f"components {setting}"] = MetadataValue.md("\n".join(f"- {x}" for x in lines))
        full = pipeline.load().retrievers.full_corpus and entry.full_corpus
        df = evaluate(retriever, bench, setting, cfg.k, rows, full)
        key = run_key(entry, setting, documents, queries, code)
        df = df.with_columns(pl.lit(key).alias(RUN_KEY))
        frames.append(df)
        run = {}
        for qid, cands, scores in zip(
            df["query_id"], bench.queries[rows]["candidates"], df["scores"], strict=True
        ):
            if scores is not None:
                run[qid] = {doc_ids[c]: float(s) for c, s in zip(cands, scores, strict=True)}
        if run:
            # not ranx's Run.save: its typed dicts compile in every process (11 s of a
            # run worker's 14 s on 2 cores), where the file is a sort and a write
            write_run(out_dir / trec_name(domain_key, setting), run, f"{name}-{setting}")
        top = {
            q: dict(zip(ids, scores, strict=True))
            for q, ids, scores in df.select("query_id", "full_top", "full_top_scores").iter_rows()
            if ids is not None
        }
        if top:  # the full-corpus track's run: the top k the fill pools and verify reads
            (out_dir / FULL_CORPUS).mkdir(exist_ok=True)
            write_run(out_dir / FULL_CORPUS / trec_name(domain_key, setting), top,
                      f"{name}-{setting}-full-corpus")  # fmt: skip
        meta[f"ndcg@{cfg.k} {setting}"] = round(float(df["ndcg"].mean()), 4) if df.height else None
    result = pl.concat(frames).with_columns(
        pl.lit(name).alias("retriever"), pl.lit(domain).alias("partition_domain")
    )
    with written_whole(out_dir / f"{domain_key}.parquet") as tmp:
        result.write_parquet(tmp)
    failed = int(result["failed"].sum())
    if failed:
        context.log.warning(f"{name} failed on {failed} query-pipeline (counted, scored 0)")
    return {
        "retriever": name,
        "kind": entry.kind,
        "domain": domain,
        "queries": len(rows),
        "failed": failed,
        "median_latency_ms": round(float(result["latency_ms"].median() or 0), 2),
        **stage_metadata(seconds=time.perf_counter() - t0),
        **meta,
        **(
            llm_metadata({"pointwise": tasks.pointwise_judge})
            if resources.pointwise_judge is not None
            else {}
        ),
    }
