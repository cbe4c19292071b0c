"""leaderboard stage: exchange-format export/import, per-retriever runs, the leaderboard."""

import json
import shutil
import time
import zlib
from pathlib import Path

import matplotlib
import numpy as np
import polars as pl
from dagster import (
    AssetDep,
    AssetExecutionContext,
    AssetIn,
    DataVersionsByPartition,
    MaterializeResult,
    MetadataValue,
    MultiToSingleDimensionPartitionMapping,
    Nothing,
    observable_source_asset,
)

from saber_assets.corpus.build import corpus_version
from saber_assets.io_managers import concat_partitions, refresh_warehouse
from saber_assets.leaderboard.contamination import (
    audited_items,
    checked_rows,
    contamination_columns,
    contamination_paragraph,
    declared_training,
    own_matched_queries,
)
from saber_assets.leaderboard.discovery import registry_for
from saber_assets.leaderboard.evaluate import document_texts, evaluate, report
from saber_assets.leaderboard.exchange import QUERY_SCHEMA, Benchmark
from saber_assets.leaderboard.indexes import IndexInfo, ensure_index, has_index, index_documents
from saber_assets.leaderboard.locations import contamination_dir, index_root, runs_dir
from saber_assets.leaderboard.metrics import metric_column, score_column
from saber_assets.leaderboard.plots import pvalue_heatmap
from saber_assets.leaderboard.provenance import (
    SCORING_CODE,
    benchmark_id,
    provenance,
    with_provenance,
)
from saber_assets.leaderboard.retrievers.base import SETTINGS, document_side
from saber_assets.leaderboard.retrievers.registry import (
    RetrieverResources,
    build_retriever,
    definitions_by_name,
    unavailable_reason,
)
from saber_assets.leaderboard.significance import beats_column, significance_tables
from saber_assets.lib.annotators import tasks_for
from saber_assets.lib.declare import stage_asset
from saber_assets.lib.metadata import (
    figure_markdown,
    llm_metadata,
    markdown_table,
    stage_metadata,
)
from saber_assets.lib.partitions import retriever_partitions
from saber_assets.ontology.domains import domain_names, domain_title
from saber_assets.resources import SaberSettings
from saber_assets.versions import code_digest, registry_versions
from saber_resources.cache import EmbeddingCache
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource
from saber_resources.warehouse import Warehouse

matplotlib.use("Agg")


def shuffled_order(n: int, seed: int, query_id: str) -> np.ndarray:
    """The exported order of a query's candidates (seeded by the pipeline seed and the query)."""
    return np.random.default_rng([seed, zlib.crc32(query_id.encode()), 1]).permutation(n)


def judges_used(judgments: pl.DataFrame) -> list[dict]:
    """Which judge configurations produced the judgments: judge, prompt version, token budget."""
    if judgments.height == 0:
        return []
    if "max_tokens" not in judgments.columns:
        judgments = judgments.with_columns(pl.lit(None, dtype=pl.Int32).alias("max_tokens"))
    return (
        judgments.group_by("judge", "prompt_version", "max_tokens")
        .agg(pl.len().alias("judgments"), pl.col("winner").is_null().sum().alias("failures"))
        .sort("judge", "prompt_version")
        .to_dicts()
    )


@stage_asset(group_name="leaderboard", kinds={"parquet"})
def benchmark_export(
    settings: SaberSettings,
    corpus: pl.DataFrame,
    problem_annotations: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
    relevance_thresholds: pl.DataFrame,
    tournament_judgments: dict[str, pl.DataFrame],
) -> MaterializeResult:
    """The built benchmark in the exchange format (queries, documents, manifest)."""
    cfg = settings.load()
    domain_order = domain_names(cfg.ontology)
    ratings = concat_partitions(relevance_ratings)
    row_of = {i: k for k, i in enumerate(corpus["id"].to_list())}
    text = {r[0]: (r[1], r[2]) for r in corpus.select("id", "problem", "solution").iter_rows()}
    dom = dict(
        zip(
            problem_annotations["id"].to_list(),
            problem_annotations["domains"].to_list(),
            strict=True,
        )
    )
    q_rows = []
    if ratings.height:
        for (qid,), frame in ratings.sort("query_id", "position").group_by(
            "query_id", maintain_order=True
        ):
            domains = list(
                dict.fromkeys([*frame["domain"].unique().to_list(), *(dom.get(qid) or [])])
            )
            # candidates are selected group by group; a seeded shuffle hides that order
            frame = frame[shuffled_order(frame.height, cfg.seed, qid)]
            q_rows.append(
                {
                    "id": qid,
                    "problem": text[qid][0],
                    "solution": text[qid][1],
                    "candidates": [row_of[c] for c in frame["candidate_id"]],
                    "relevance_scores": frame["rating"].to_list(),
                    "domains": [d for d in domain_order if d in domains],
                }
            )
    queries = pl.DataFrame(q_rows, schema=QUERY_SCHEMA)
    documents = corpus.select("id", "problem", "solution")
    manifest = {
        "name": cfg.name,
        "corpus_version": corpus_version(corpus),
        "judge_backend": cfg.llm.judge_backend,
        "judge_model": cfg.llm.model,
        "judges": judges_used(concat_partitions(tournament_judgments)),
        "seed": cfg.seed,
        "domains": domain_order,
        "candidate_order": f"shuffled per query: numpy default_rng([{cfg.seed}, crc32(query id), 1])",
        "thresholds": {
            "topic": float(relevance_thresholds["topic_threshold"][0]),
            "summary": float(relevance_thresholds["summary_threshold"][0]),
            "source": relevance_thresholds["source"][0],
        },
        "candidates_per_group": cfg.candidates.candidates_per_group,
        "tournament": cfg.tournament.model_dump(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    bench = Benchmark(queries, documents, manifest)
    bench.validate("built benchmark")
    path = bench.write(settings.output_dir() / "benchmark")
    return MaterializeResult(
        metadata={
            "queries": queries.height,
            "documents": documents.height,
            "path": MetadataValue.path(str(path)),
            "judge_backend": cfg.llm.judge_backend,
            "manifest": MetadataValue.json(manifest),
        }
    )


@stage_asset(group_name="leaderboard", kinds={"parquet"}, deps=["benchmark_export"])
def evaluation_benchmark(settings: SaberSettings) -> MaterializeResult:
    """The benchmark the retrievers are scored on: the built one, or any exchange-format directory
    given as ``leaderboard.benchmark`` (validated on import)."""
    src = settings.load().leaderboard.benchmark
    path = settings.output_dir() / "benchmark" if src is None else Path(src).expanduser()
    bench = Benchmark.read(path)
    out = bench.write(settings.output_dir() / "evaluation_benchmark")
    per_domain = (
        bench.queries.select(pl.col("domains").explode()).group_by("domains").len().sort("domains")
    )
    return MaterializeResult(
        metadata={
            "source": str(path),
            "queries": bench.queries.height,
            "documents": bench.documents.height,
            "candidates_per_query": int(bench.queries["candidates"].list.len().median() or 0),
            "per_domain": markdown_table(per_domain),
            "path": MetadataValue.path(str(out)),
        }
    )


def registered_entry(settings: SaberSettings, name: str, db=None):
    """(the registry, the named entry); a name no longer registered is an error that says so."""
    entries = registry_for(settings.load(), db, settings.home_dir())
    entry = next((e for e in entries if e.name == name), None)
    if entry is None:
        raise ValueError(
            f"retriever {name!r} is no longer in the registry: its earlier outputs are kept, nothing to run"
        )
    return entries, entry


def entry_settings(settings: SaberSettings, entry) -> list[str]:
    return [
        x
        for x in settings.load().leaderboard.settings
        if entry.settings is None or x in entry.settings
    ]


def prepare_index(
    settings: SaberSettings, retriever, entry, bench: Benchmark, setting: str
) -> IndexInfo | None:
    """Load (or build once and keep) the retriever's index for this setting's documents; None for
    retrievers without document-side work of their own (fusion, two-stage). Settings that show
    the same documents (statement→full, full→full) share one index."""
    full = settings.load().leaderboard.full_corpus and entry.full_corpus
    if not has_index(retriever, full):
        return None
    docs = index_documents(
        document_texts(bench, setting), bench.queries["candidates"].to_list(), full
    )
    side = document_side(setting)
    path = index_root(settings, entry.name) / side
    return ensure_index(retriever, entry.definition(), side, docs, path)


@observable_source_asset(group_name="leaderboard", partitions_def=retriever_partitions)
def retriever_registry(
    context, settings: SaberSettings, stores: StoresResource
) -> DataVersionsByPartition:
    """One registry entry per `retriever` partition: its data version hashes the entry (and the
    entries a fusion reads), so that adding or changing one entry marks only that retriever's
    index and runs unsynced. A removed entry is not observed again: its partitions keep their
    last version and their runs, and the leaderboard stops showing it."""
    have = set(context.instance.get_dynamic_partitions(retriever_partitions.name))
    entries = registry_for(settings.load(), stores.db())
    versions = registry_versions(definitions_by_name(entries))
    return DataVersionsByPartition({k: v for k, v in versions.items() if k in have})


def drop_per_setting_indexes(root: Path) -> list[str]:
    """Remove index folders of the earlier layout (one per setting, now one per document side):
    left behind they would hold a second copy of every document-side index on disk."""
    gone = [s for s in SETTINGS if (root / s).is_dir()]
    for s in gone:
        shutil.rmtree(root / s, ignore_errors=True)
    return gone


@stage_asset(
    group_name="leaderboard",
    kinds={"parquet", "numpy"},
    deps=["evaluation_benchmark", retriever_registry],
    pool="llm",  # document embeddings share the GPU with the judge and the re-ranker
)
def retriever_index(
    context: AssetExecutionContext, settings: SaberSettings, stores: StoresResource
) -> MaterializeResult:
    """One retriever's document-side work per setting (tokens, term statistics and matrices, the
    Approach Zero index, document embeddings), built once per document set and read by every
    domain's run. An index that already matches the documents and the entry is kept as it is."""
    entries, entry = registered_entry(settings, context.partition_key, stores.db())
    retriever = build_retriever(
        entry, RetrieverResources(embedding_cache=EmbeddingCache(stores.db()), entries=entries)
    )
    bench = Benchmark.read(settings.output_dir() / "evaluation_benchmark")
    for old in drop_per_setting_indexes(index_root(settings, entry.name)):
        context.log.info(f"{entry.name}: removed the per-setting index folder {old!r}")
    by_side: dict[str, list[str]] = {}
    for s in entry_settings(settings, entry):
        by_side.setdefault(document_side(s), []).append(s)
    infos = [prepare_index(settings, retriever, entry, bench, s[0]) for s in by_side.values()]
    infos = [i for i in infos if i is not None]
    for i in infos:
        if i.rebuilt_because:
            context.log.warning(f"{entry.name} / {i.setting}: index rebuilt ({i.rebuilt_because})")
    table = pl.DataFrame(
        [
            {
                "documents_of": i.setting,
                "settings": ", ".join(by_side[i.setting]),
                "documents": i.documents,
                "built": i.built,
                "seconds": round(i.seconds, 2),
                "MB": round(i.bytes / 2**20, 2),
                "rebuilt_because": i.rebuilt_because or "",
            }
            for i in infos
        ],
        schema={
            "documents_of": pl.String,
            "settings": pl.String,
            "documents": pl.Int64,
            "built": pl.Boolean,
            "seconds": pl.Float64,
            "MB": pl.Float64,
            "rebuilt_because": pl.String,
        },
    )
    return MaterializeResult(
        metadata={
            "retriever": entry.name,
            "kind": entry.kind,
            "indexes": markdown_table(table) if infos else "none: no document-side work of its own",
            "built": sum(i.built for i in infos),
            "MB": round(sum(i.bytes for i in infos) / 2**20, 2),
            "path": MetadataValue.path(str(index_root(settings, entry.name))),
        }
    )


@stage_asset(
    group_name="leaderboard",
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
            retriever_registry,
            partition_mapping=MultiToSingleDimensionPartitionMapping("retriever"),
        ),
    ],
    pool="llm",  # embedding models and the re-ranker's LLM share the GPU / judge server
)
def retriever_runs(
    context: AssetExecutionContext,
    settings: SaberSettings,
    stores: StoresResource,
    llm: LLMResource,
) -> MaterializeResult:
    """One retriever on one domain's queries, every setting: per-query nDCG and TREC run files."""
    from ranx import Run

    cfg = settings.load().leaderboard
    # a run launched by tag (GraphQL, UI) may carry the key as its string "domain|retriever"
    key = context.partition_key
    if not hasattr(key, "keys_by_dimension"):
        key = context.assets_def.partitions_def.get_partition_key_from_str(str(key))
    key = key.keys_by_dimension
    name, domain_key = key["retriever"], key["domain"]
    domain = domain_title(settings.load().ontology, domain_key)
    entries, entry = registered_entry(settings, name, stores.db())
    tasks = (
        tasks_for(llm, stores)
        if entry.kind == "two-stage" or _needs_judge(entry, entries)
        else None
    )
    resources = RetrieverResources(
        embedding_cache=EmbeddingCache(stores.db()),
        # an LLM backend re-ranks with its pointwise judge; the CPU backend's judge is never a
        # contestant, so two-stage retrievers get a retriever-side re-ranker (registry)
        pointwise_judge=tasks.pointwise_judge
        if tasks and tasks.pointwise_judge.backend != "cpu"
        else None,
        translator=tasks.translator if tasks else None,
        entries=entries,
    )
    retriever = build_retriever(entry, resources)
    bench = Benchmark.read(settings.output_dir() / "evaluation_benchmark")
    rows = [i for i, ds in enumerate(bench.queries["domains"].to_list()) if domain in ds]
    out_dir = runs_dir(settings) / name
    out_dir.mkdir(parents=True, exist_ok=True)
    frames, meta = [], {}
    t0 = time.perf_counter()
    doc_ids = bench.documents["id"].to_list()
    for setting in entry_settings(settings, entry):
        index = prepare_index(settings, retriever, entry, bench, setting)
        if index is not None:
            meta[f"index {setting}"] = (
                f"{'built' if index.built else 'read'} in {index.seconds:.2f}s"
                + (f" (rebuilt: {index.rebuilt_because})" if index.rebuilt_because else "")
            )
        df = evaluate(retriever, bench, setting, cfg.k, rows, cfg.full_corpus and entry.full_corpus)
        frames.append(df)
        run = {}
        for qid, cands, scores in zip(
            df["query_id"], bench.queries[rows]["candidates"], df["scores"], strict=True
        ):
            if scores is not None:
                run[qid] = {doc_ids[c]: float(s) for c, s in zip(cands, scores, strict=True)}
        if run:
            Run(run, name=f"{name}-{setting}").save(
                str(out_dir / f"{domain_key}.{setting}.trec"), kind="trec"
            )
        meta[f"ndcg@{cfg.k} {setting}"] = round(float(df["ndcg"].mean()), 4) if df.height else None
    result = pl.concat(frames).with_columns(
        pl.lit(name).alias("retriever"), pl.lit(domain).alias("partition_domain")
    )
    result.write_parquet(out_dir / f"{domain_key}.parquet")
    failed = int(result["failed"].sum())
    if failed:
        context.log.warning(f"{name} failed on {failed} query-settings (counted, scored 0)")
    return MaterializeResult(
        metadata={
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
    )


CPU_JUDGE_CAVEAT = (
    "**Caveat: CPU judge.** These ratings come from the CPU stand-in judge, not an LLM: it "
    "prefers the candidate with the higher s = 0.45·e + 0.25·k + 0.20·t + 0.10·u, where e is the "
    "MiniLM (all-MiniLM-L6-v2) cosine of problem + solution, k the overlap of named techniques "
    "in the solutions, t the topic signal (BMA of Lin) and u the summary signal (formula "
    "cpu-evidence-judge/v1). No retriever registered by default uses MiniLM, but t and u also "
    "chose the candidates, and a stand-in is not a mathematician: compare retrievers for real "
    "only on a benchmark judged by an LLM.\n\n"
)


def superscript_board(board: pl.DataFrame) -> str:
    """ranx's convention: per setting, each system gets a letter, and its nDCG@10 carries the
    letters of the systems it is significantly better than (paired randomization test, Holm)."""
    lines = ["Significance (paired randomization test, Holm-corrected over the pairs of a "
             "setting): a superscript names the systems a row is significantly better than."]  # fmt: skip
    m = score_column(board)
    for (setting,), part in board.group_by("setting", maintain_order=True):
        letter = {
            r: chr(ord("a") + k) if k < 26 else f"s{k}" for k, r in enumerate(part["retriever"])
        }
        lines += [
            "",
            f"**{setting}**",
            "",
            f"| | retriever | nDCG@{m.split('@')[1]} | rank (95%) |",
            "|---|---|---|---|",
        ]
        for r in part.iter_rows(named=True):
            sup = "".join(
                sorted(letter[x] for x in (r.get("beats") or "").split(", ") if x in letter)
            )
            cell = f"{r[m]:.4f}" + (f"<sup>{sup}</sup>" if sup else "")
            lines.append(
                f"| {letter[r['retriever']]} | {r['retriever']} | {cell} | {r.get('rank_ci') or ''} |"
            )
    return "\n".join(lines)


def _needs_judge(entry, entries) -> bool:
    """A fusion that contains a two-stage retriever needs the judge too."""
    if entry.kind != "fusion":
        return False
    by_name = {e.name: e for e in entries}
    return any(
        by_name[c].kind == "two-stage" or _needs_judge(by_name[c], entries)
        for c in entry.params.get("retrievers", [])
    )


def contamination_view(board: pl.DataFrame, metric: str) -> list[pl.Expr]:
    """The contamination columns of the markdown board, when any row has checked training
    data (they would be empty otherwise)."""
    if checked_rows(board).is_empty():
        return []
    return [
        pl.col("contaminated_share").round(3),
        pl.col(f"{metric}_clean").round(4),
        pl.col("ci_low_clean").round(4),
        pl.col("ci_high_clean").round(4),
    ]


def _bar_chart(table: pl.DataFrame) -> MetadataValue:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.35 * table.height + 1.2))
    labels = [f"{r} / {s}" for r, s in zip(table["retriever"], table["setting"], strict=True)]
    y = np.arange(table.height)
    m = score_column(table)
    ax.barh(
        y,
        table[m].to_numpy(),
        xerr=[table[m] - table["ci_low"], table["ci_high"] - table[m]],
        color="#4c72b0",
    )
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"nDCG@{m.split('@')[1]} (exponential gain), 95% bootstrap CI")
    return figure_markdown(fig, "leaderboard")


@stage_asset(
    group_name="leaderboard",
    kinds={"duckdb", "polars"},
    deps=["retriever_runs", retriever_registry, "contamination", "own_candidate_matches"],
)
def leaderboard(
    context: AssetExecutionContext,
    settings: SaberSettings,
    warehouse: Warehouse,
    stores: StoresResource,
) -> MaterializeResult:
    """One row per retriever × setting: overall and per-domain nDCG@10 with 95% CIs, failures,
    the full-corpus track and latency. Retrievers removed from the registry keep their run files
    but leave the board."""
    cfg = settings.load()
    entries = registry_for(cfg, stores.db())
    bench = Benchmark.read(settings.output_dir() / "evaluation_benchmark")
    manifest = bench.manifest
    domains = bench.domain_list()
    bench_id, code = benchmark_id(bench), code_digest(SCORING_CODE)
    tables, all_runs = [], []
    lb = cfg.leaderboard
    declared, audits = declared_training(entries), audited_items(contamination_dir(settings))
    excluded = (
        own_matched_queries(contamination_dir(settings))
        if lb.contamination.exclude_own_matches
        else set()
    )

    def rescore(runs: pl.DataFrame) -> pl.DataFrame:
        return report(runs, domains, lb.bootstrap_resamples, cfg.seed, k=lb.k)

    for e in entries:
        files = sorted((runs_dir(settings) / e.name).glob("*.parquet"))
        if not files:
            why = unavailable_reason(e, entries)
            context.log.warning(
                f"no runs for {e.name!r}: " + (f"it cannot run here ({why})" if why else "not yet")
            )
            continue
        runs = pl.concat([pl.read_parquet(f) for f in files])
        if excluded:
            runs = runs.filter(~pl.col("query_id").is_in(sorted(excluded)))
        all_runs.append(runs.with_columns(pl.lit(e.name).alias("retriever")))
        rep = rescore(runs)
        if rep.is_empty():
            context.log.warning(
                f"{e.name!r}: its runs hold no query (the benchmark has no query in any domain)"
            )
            continue
        rep = rep.join(
            contamination_columns(
                rep, runs, bench, declared[e.name], audits, lb.contamination.top_candidates, rescore
            ),
            on="setting",
        )
        gone = e.discovered is not None and e.discovered.status == "gone"
        rep = rep.with_columns(
            pl.lit(e.origin).alias("origin"),
            # a discovered model that left its server keeps its rows, flagged
            pl.lit(e.discovered.last_seen if gone else None, dtype=pl.String).alias(
                "gone_last_seen"
            ),
        )
        rep = with_provenance(rep, e.name, provenance(e, bench_id, code))
        tables.append(
            rep.with_columns(pl.lit(e.name).alias("retriever"), pl.lit(e.kind).alias("kind"))
        )
    if not tables and bench.queries.height == 0:
        context.log.warning(
            "the benchmark has no queries: the leaderboard is empty (too few viable queries: see relevance_thresholds)"
        )
        return MaterializeResult(
            metadata={**stage_metadata(0), "warning": "the benchmark has no queries"}
        )
    if not tables:
        raise ValueError("no retriever has scored any query: materialise retriever_runs first")
    metric = metric_column(lb.k)
    t0 = time.perf_counter()
    cols = ["retriever", "query_id", "setting", "domains", "ndcg"]
    tests, ranks = significance_tables(
        pl.concat([r.select(cols) for r in all_runs]), domains, lb.bootstrap_resamples,
        lb.test_resamples, cfg.seed, lb.alpha,
    )  # fmt: skip
    test_seconds = time.perf_counter() - t0
    board = (
        pl.concat(tables, how="diagonal")
        .with_columns(pl.lit(manifest.get("judge_backend", "unknown")).alias("judge_backend"))
        .join(ranks.select("setting", "retriever", "rank_ci"), on=["setting", "retriever"],
              how="left")
        .join(beats_column(tests), on=["setting", "retriever"], how="left")
        .select("retriever", "kind", "setting", pl.all().exclude("retriever", "kind", "setting"))
        .sort("setting", metric, descending=[False, True])
    )  # fmt: skip
    out = settings.output_dir() / "leaderboard"
    out.mkdir(parents=True, exist_ok=True)
    tests.write_parquet(out / "significance.parquet")
    tests.write_csv(out / "significance.csv")
    board.write_csv(out / "leaderboard.csv")
    board.write_parquet(out / "leaderboard.parquet")  # the warehouse's `leaderboard` view
    refresh_warehouse(warehouse, context)
    md = markdown_table(
        board.select(
            "retriever",
            "setting",
            "row_id",
            pl.col(metric).round(4),
            pl.col("ci_low").round(4),
            pl.col("ci_high").round(4),
            *[pl.col(d).round(4) for d in domains if d in board.columns],
            "failed",
            pl.col("median_latency_ms").round(2),
            "rank_ci",
            "beats",
            *contamination_view(board, metric),
        ),
        max_rows=500,
        max_chars=40,
    )
    judge = manifest.get("judge_backend", "unknown")
    caveat = CPU_JUDGE_CAVEAT if judge == "cpu" else ""
    legend = superscript_board(board)
    (out / "leaderboard.md").write_text(
        f"Judge backend: {judge}\n\n{caveat}" + md.value + "\n\n" + legend + "\n"
    )
    heat = {
        f"p-values {s}": figure_markdown(pvalue_heatmap(tests, s), f"p-values, {s}")
        for s in board["setting"].unique(maintain_order=True).to_list()
        if tests.filter(pl.col("setting") == s).height
    }
    return MaterializeResult(
        metadata={
            **stage_metadata(board.height),
            "judge_backend": judge,
            "caveat": MetadataValue.md(caveat or "none"),
            "table": md,
            "chart": _bar_chart(board),
            "significance": MetadataValue.md(legend),
            "significance_seconds": round(test_seconds, 2),
            "contamination": MetadataValue.md(contamination_paragraph(board)),
            "own_match_queries_excluded": len(excluded),
            **heat,
            "csv": MetadataValue.path(str(out / "leaderboard.csv")),
            "best": json.dumps(
                board.group_by("setting")
                .agg(pl.col("retriever").first(), pl.col(metric).first().round(4))
                .to_dicts()
            ),
        }
    )
