"""signals stage: all-pairs topic (BMA of Lin) and summary (Jaccard) signals in byte-packed shards."""

import json
import time
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
from dagster import (
    AssetExecutionContext,
    MaterializeResult,
    MetadataValue,
    Output,
)

from saber_assets.lib.declare import stage_asset, table_asset
from saber_assets.lib.figures import pyplot
from saber_assets.lib.metadata import figure_markdown, markdown_table, stage_metadata
from saber_assets.ontology.domains import domain_names
from saber_assets.ontology.tree import TopicTree
from saber_assets.outputs import read_json_or_none, write_whole
from saber_assets.pipeline import PipelineResource
from saber_assets.signals.bounds import choose_floors, stored_share
from saber_assets.signals.compute import compute_segment
from saber_assets.signals.kernels import quantize
from saber_assets.signals.pairs import HeldPairs, row_groups
from saber_assets.signals.prepare import SignalInputs, ic_hash, prepare_inputs, signal_pool
from saber_assets.signals.shards import (
    BYTES_PER_PAIR,
    LOWER,
    UPPER,
    read_header,
    read_shard,
    write_shard,
)
from saber_assets.signals.sizing import shard_pod, signal_pass_pod
from saber_assets.signals.stored import (
    cached_row_histograms,
    cut_viable_rows,
    gather_budget,
    load_summaries,
    read_floors,
    read_summary_header,
    segment_versions,
    signals_dir,
    stored_pairs,
    summary_path,
    write_floors,
    write_summaries,
)
from saber_assets.signals.summaries import (
    grown_summaries,
    thresholds_from_summaries,
    triangle_pairs,
    viability_summaries,
)
from saber_assets.signals.thresholds import (
    Cut,
    ExactSignals,
    check_floors,
    derive_thresholds,
    percentile_taus,
    percentile_thresholds,
    viable_by_domain,
    viable_per_domain,
)


def block_rows(k: int, n_shards: int, rows_per_shard: int, n: int) -> tuple[int, int]:
    start = k * rows_per_shard
    end = n if k == n_shards - 1 else (k + 1) * rows_per_shard
    return min(start, n), min(end, n)


def _manifest_path(d: Path) -> Path:
    return d / "manifest.json"


@stage_asset(
    reads=("signals.freeze_ic", "candidates.require_annotations"),
    kinds={"numpy"},
    deps=["problem_annotations", "topic_information_content", "ontology_tree"],
)
def pair_signal_inputs(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    problem_annotations: pl.DataFrame,
    topic_information_content: pl.DataFrame,
    ontology_tree: pl.DataFrame,
) -> MaterializeResult:
    """Kernel inputs: topic CSR + Lin table of the used topics, summary tokens; and the shard manifest.

    With ``signals.freeze_ic`` the IC of the first computation is kept (new topics get their current
    IC), so appending problems leaves every finished shard valid; a changed corpus prefix resets.
    """
    full = pipeline.load()
    cfg = full.signals
    pool = signal_pool(problem_annotations, full.candidates.require_annotations)
    d = signals_dir(pipeline)
    d.mkdir(parents=True, exist_ok=True)
    tree = TopicTree.from_frame(ontology_tree)
    ic = topic_information_content.sort("node")["ic"].to_numpy()
    manifest = read_json_or_none(_manifest_path(d))  # unreadable: computed afresh
    snapshot_path = d / "ic_snapshot.npy"
    # the frozen IC stands for appended problems, not for another way of counting: a changed
    # `signals.ic_counts` computes everything again (a manifest from before it counted the
    # most specific topics)
    same_counting = manifest and manifest.get("ic_counts", "most_specific") == cfg.ic_counts
    if cfg.freeze_ic and same_counting and snapshot_path.exists():
        snap = np.load(snapshot_path)
        ic_used = np.where(np.isfinite(snap), snap, ic)
        base_ic_hash = manifest["ic_hash"]
    else:
        ic_used, base_ic_hash = ic, ic_hash(ic)
    t0 = time.perf_counter()
    inputs = prepare_inputs(
        pool["id"].to_list(),
        pool["topics"].to_list(),
        pool["summary"].to_list(),
        ic_used,
        tree.parent,
        tree.depth,
    )
    inputs.ic_hash = base_ic_hash
    reset = (
        manifest is None
        or not same_counting
        or manifest["ic_hash"] != base_ic_hash
        or manifest["base_n"] > inputs.n
        or (inputs.prefix_version(manifest["base_n"]) != manifest["base_version"])
    )
    if reset:
        for f in d.glob("*.sig"):
            f.unlink()
        write_whole(snapshot_path, ic)
        inputs.ic_hash = base_ic_hash = ic_hash(ic)
        manifest = {
            "base_n": inputs.n,
            "base_version": inputs.prefix_version(inputs.n),
            "ic_hash": base_ic_hash,
            "ic_counts": cfg.ic_counts,
        }
        write_whole(_manifest_path(d), json.dumps(manifest, indent=1))
    inputs.save(d / "inputs.npz")
    return MaterializeResult(
        metadata={
            "problems": inputs.n,
            # no topic or no core idea: out of both pools (candidates.require_annotations)
            "left_out_unannotated": problem_annotations.height - pool.height,
            "used_topics": int(inputs.lin.shape[0]),
            "lin_table_mb": round(inputs.lin.nbytes / 1e6, 1),
            "summary_vocabulary": len(inputs.vocab),
            "base_rows": manifest["base_n"],
            "appended_rows": inputs.n - manifest["base_n"],
            "reset": reset,
            **stage_metadata(seconds=time.perf_counter() - t0),
            "path": MetadataValue.path(str(d)),
        }
    )


# what the shards store depends on the thresholds the candidates section can end up with
FLOORS = (
    "signals",
    *(
        f"candidates.{key}"
        for key in (
            "queries_per_domain",
            "candidates_per_group",
            "topic_threshold",
            "summary_threshold",
            "threshold_method",
            "percentile",
        )
    ),
)


@stage_asset(reads=FLOORS, pod=signal_pass_pod, deps=["pair_signal_inputs"], kinds={"numba"})
def pair_signal_bounds(
    context: AssetExecutionContext, pipeline: PipelineResource, problem_annotations: pl.DataFrame
) -> MaterializeResult:
    """The storage floors: the lowest bytes a threshold the candidates section can end up with
    may select, bounded from every row's coarse histogram of its pairs (a first kernel pass
    over every pair, storing none; given thresholds need none). The shards store only what
    lies above them."""
    full = pipeline.load()
    cfg = full.signals
    d = signals_dir(pipeline)
    inputs = SignalInputs.load(d / "inputs.npz")
    t0 = time.perf_counter()
    hist_seconds: list[float] = []

    def first_pass() -> np.ndarray:
        t = time.perf_counter()
        hist = cached_row_histograms(inputs, d, cfg.bound_bins, cfg.threads)
        hist_seconds.append(time.perf_counter() - t)
        return hist

    cand = full.candidates
    given = cand.topic_threshold is not None and cand.summary_threshold is not None
    # the summaries keep no pair: a first pass (a third of their kernel work) would only
    # bound the memory of a block of rows, so derived thresholds start at the configured floors
    bound = cfg.bound_floors and (cfg.layout == "pairs" or given)
    floors, hist = choose_floors(
        first_pass,
        signal_pool(problem_annotations, cand.require_annotations)["domains"].to_list(),
        domain_names(full.ontology),
        cand,
        (int(quantize(cfg.floor_topic)), int(quantize(cfg.floor_summary))),
        bound,
    )
    write_floors(d, floors)
    pairs = inputs.n * (inputs.n - 1) // 2
    share = stored_share(hist, floors) if hist is not None else None
    return MaterializeResult(
        metadata={
            "floor_topic": round(floors.topic / 255, 4),
            "floor_summary": round(floors.summary / 255, 4),
            "floor_topic_quanta": floors.topic,
            "floor_summary_quanta": floors.summary,
            "source": floors.source,
            "first_pass": "computed" if hist is not None else "skipped",
            "first_pass_seconds": round(sum(hist_seconds), 2),
            "pairs": pairs,
            "stored_share_at_most": share,
            **stage_metadata(seconds=time.perf_counter() - t0),
            "per_domain": MetadataValue.json(floors.detail.get("per_domain") or {}),
        }
    )


@stage_asset(reads=FLOORS, pod=shard_pod, deps=["pair_signal_bounds"], kinds={"numba"})
def pair_signal_shards(
    context: AssetExecutionContext, pipeline: PipelineResource
) -> MaterializeResult:
    """One row block of all-pairs signals (upper segment), plus lower segments for appended rows."""
    cfg = pipeline.load().signals
    d = signals_dir(pipeline)
    inputs = SignalInputs.load(d / "inputs.npz")
    manifest = read_json_or_none(_manifest_path(d))
    if manifest is None:
        raise FileNotFoundError(
            f"{_manifest_path(d)} is missing or unreadable: materialise pair_signal_inputs again"
        )
    keys = context.assets_def.partitions_def.get_partition_keys()
    start, end = block_rows(
        keys.index(context.partition_key), len(keys), cfg.rows_per_shard, inputs.n
    )
    if cfg.layout == "summaries":
        k = pipeline.load().candidates.candidates_per_group
        return _summary_shard(summary_path(d, context.partition_key), inputs, start, end, k,
                              read_floors(d), cfg.threads)  # fmt: skip
    base_n = manifest["base_n"]
    ft, fs = read_floors(d)
    todo: list[tuple[int, int, int, Path]] = []
    up_end = min(end, base_n)
    if up_end > start:
        todo.append((UPPER, start, up_end, d / f"{context.partition_key}.upper.sig"))
    covered = max(start, base_n)
    for f in sorted(d.glob(f"{context.partition_key}.lower-*.sig")):
        h = read_header(f)
        covered = max(covered, h["row_end"])
    if end > covered:
        todo.append(
            (
                LOWER,
                covered,
                end,
                d / f"{context.partition_key}.lower-{covered:09d}-{end:09d}.sig",
            )
        )
    computed = reused = 0
    pairs = stored = size = 0
    t0 = time.perf_counter()
    for kind, r0, r1, path in todo:
        n_dep = base_n if kind == UPPER else r1
        if path.exists():
            h = read_header(path)
            same = (h["n"], h["corpus_version"], h["bins"])
            # a segment stored at floors no higher than today's holds every pair needed
            low_enough = h["floor_topic"] <= ft and h["floor_summary"] <= fs
            if same == (n_dep, inputs.prefix_version(n_dep), cfg.hist_bins) and low_enough:
                reused += 1
                continue
        shard = compute_segment(
            inputs, kind, r0, r1, ft, fs, cfg.hist_bins, n_cols=base_n, threads=cfg.threads
        )
        size += write_shard(path, shard)
        computed += 1
        stored += shard.n_pairs
        pairs += int(shard.hist.sum())
    elapsed = time.perf_counter() - t0
    return MaterializeResult(
        metadata={
            "rows": MetadataValue.text(f"[{start}, {end})"),
            "segments_computed": computed,
            "segments_reused": reused,
            "pairs_computed": pairs,
            "pairs_stored": stored,
            "bytes_written": size,
            "floors_quanta": MetadataValue.text(f"topic >= {ft} or summary >= {fs}"),
            **stage_metadata(seconds=elapsed),
            "pairs_per_second": round(pairs / elapsed) if computed and elapsed > 0 else 0,
        }
    )


def _summary_shard(
    path: Path,
    inputs: SignalInputs,
    start: int,
    end: int,
    k: int,
    floors: tuple[int, int],
    threads: int,
) -> MaterializeResult:
    """The rows' viability summaries over full rows: kept where they are this corpus's, this K's
    and these floors'; after growth, only the rows a new problem reaches computed again."""
    header = {"row_start": start, "row_end": end, "n": inputs.n,
              "corpus_version": inputs.prefix_version(inputs.n), "k": k, "floors": list(floors)}  # fmt: skip
    arrays = inputs.arrays
    t0 = time.perf_counter()
    old = read_summary_header(path) if path.exists() else None
    how, recomputed = "computed", end - start
    if old == header:
        how, recomputed, size = "reused", 0, path.stat().st_size
    else:
        n0 = old and old["n"]
        grows = (
            old is not None
            and (old["row_start"], old["k"], old["floors"]) == (start, k, list(floors))
            and n0 < inputs.n
            and old["row_end"] == min(end, n0)
            and old["corpus_version"] == inputs.prefix_version(n0)
        )
        if grows:
            with np.load(path) as z:
                summary, touched = grown_summaries(
                    arrays, start, end, z["summary"], n0, k, floors, threads
                )
            how, recomputed = f"grown from {n0:,} problems", touched + max(end - max(start, n0), 0)
        else:
            summary = viability_summaries(arrays, start, end, k, floors, threads)
        size = write_summaries(path, summary, header)
    elapsed = time.perf_counter() - t0
    return MaterializeResult(
        metadata={
            "rows": MetadataValue.text(f"[{start}, {end})"),
            "layout": "summaries",
            "summaries": how,
            "rows_computed": recomputed,
            "row_pairs_computed": recomputed * max(inputs.n - 1, 0),
            "bytes_written": size if how != "reused" else 0,
            "floors_quanta": MetadataValue.text(f"topic >= {floors[0]} or summary >= {floors[1]}"),
            "candidates_per_group_K": k,
            **stage_metadata(seconds=elapsed),
        }
    )


def _hist_plot(hist_all: np.ndarray, bins: int) -> MetadataValue:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 4))
    im = ax.imshow(
        np.log10(1 + hist_all.T), origin="lower", extent=(0, 1, 0, 1), aspect="auto", cmap="viridis"
    )
    ax.set_xlabel("topic signal (BMA of Lin)")
    ax.set_ylabel("summary signal (Jaccard)")
    ax.set_title("all pairs, log10(1 + count)")
    fig.colorbar(im)
    return figure_markdown(fig, "histogram")


INDEX_SCHEMA = {
    "file": pl.String, "kind": pl.String, "n": pl.Int64, "row_start": pl.Int64,
    "row_end": pl.Int64, "pairs_stored": pl.Int64, "bytes": pl.Int64,
}  # fmt: skip


@table_asset(reads=("signals",), deps=["pair_signal_shards"])
def pair_signal_index(
    context: AssetExecutionContext, pipeline: PipelineResource
) -> Output[pl.DataFrame]:
    """Summary of every shard segment (rows, pairs, bytes), checked to cover every pair once;
    the 2-D histogram of all pairs."""
    full = pipeline.load()
    cfg = full.signals
    d = signals_dir(pipeline)
    inputs = SignalInputs.load(d / "inputs.npz")
    if cfg.layout == "summaries":
        return _summary_index(d, inputs, full.candidates.candidates_per_group)
    paths = sorted(d.glob("*.sig"))
    rows = []
    hist_all = np.zeros((cfg.hist_bins, cfg.hist_bins), dtype=np.int64)
    versions = segment_versions(inputs, paths)
    n_stored = 0
    for p in paths:  # each file is read once: header, checksum, pairs and histograms together
        shard = read_shard(p, expect_corpus_version=versions[read_header(p)["n"]])
        rows.append(
            {
                "file": p.name,
                "kind": "upper" if shard.kind == UPPER else "lower",
                "n": shard.n,
                "row_start": shard.row_start,
                "row_end": shard.row_end,
                "pairs_stored": shard.n_pairs,
                "bytes": p.stat().st_size,
            }
        )
        hist_all += shard.hist.sum(axis=0).astype(np.int64)
        n_stored += shard.n_pairs
    covered = int(hist_all.sum())
    total = inputs.n * (inputs.n - 1) // 2
    if covered != total:
        raise ValueError(
            f"shards cover {covered:,} pairs, the corpus has {total:,}: materialise every shard partition"
        )
    df = pl.DataFrame(rows, schema=INDEX_SCHEMA)  # no row: a pool no problem is left in
    stored_bytes = int(df["bytes"].sum()) if df.height else 0
    return Output(
        df,
        metadata={
            **stage_metadata(df.height),
            "problems": inputs.n,
            "pairs": total,
            "pairs_stored": n_stored,
            "stored_fraction": round(n_stored / max(total, 1), 6),
            "bytes_on_disk": stored_bytes,
            "bytes_per_corpus_pair": round(stored_bytes / max(total, 1), 5),
            "pair_bytes_per_stored_pair": BYTES_PER_PAIR,
            "segments": markdown_table(df),
            "histogram": _hist_plot(hist_all, cfg.hist_bins),
        },
    )


def _summary_index(d: Path, inputs: SignalInputs, k: int) -> Output[pl.DataFrame]:
    """The summary files, checked to be this corpus's and to cover every row once."""
    load_summaries(d, inputs, k, read_floors(d))  # raises naming what is missing or stale
    rows = []
    for p in sorted(d.glob("*.summary.npz")):
        h = read_summary_header(p)
        rows.append({"file": p.name, "kind": "summary", "n": h["n"], "row_start": h["row_start"],
                     "row_end": h["row_end"], "pairs_stored": 0, "bytes": p.stat().st_size})  # fmt: skip
    df = pl.DataFrame(rows, schema=INDEX_SCHEMA)
    total = inputs.n * (inputs.n - 1) // 2
    stored_bytes = int(df["bytes"].sum()) if df.height else 0
    return Output(
        df,
        metadata={
            **stage_metadata(df.height),
            "layout": "summaries",
            "problems": inputs.n,
            "pairs": total,
            "pairs_stored": 0,
            "bytes_on_disk": stored_bytes,
            "bytes_per_corpus_pair": round(stored_bytes / max(total, 1), 5),
            "bytes_per_problem": round(stored_bytes / max(inputs.n, 1), 1),
            "segments": markdown_table(df),
        },
    )


def _thresholds_frame(
    domain_order: list[str],
    domains: list[list[str]],
    per_domain: dict,
    viable: dict[str, int],
    quanta: tuple[int, int],
    taus: tuple[float, float] | None,
    source: str,
) -> pl.DataFrame:
    """One row per domain (its queries, viable queries, its own strictest point) with the final
    thresholds: in quanta, and exact where given or taken as a percentile."""
    rows = []
    for dname in domain_order:
        pd_ = per_domain.get(dname)
        rows.append(
            {
                "domain": dname,
                "queries_in_domain": sum(dname in ds for ds in domains),
                "viable_queries": viable[dname],
                "domain_topic_threshold": None if pd_ is None else round(pd_[0] / 255, 4),
                "domain_summary_threshold": None if pd_ is None else round(pd_[1] / 255, 4),
                "domain_viable_queries": None if pd_ is None else pd_[2],
            }
        )
    tq, sq = quanta
    return pl.DataFrame(rows).with_columns(
        pl.lit(round(tq / 255, 4)).alias("topic_threshold"),
        pl.lit(round(sq / 255, 4)).alias("summary_threshold"),
        pl.lit(tq).alias("topic_threshold_q"),
        pl.lit(sq).alias("summary_threshold_q"),
        # the exact thresholds (sim > τ) where given or taken as a percentile; null: the quanta
        pl.lit(taus and taus[0], pl.Float64).alias("topic_tau"),
        pl.lit(taus and taus[1], pl.Float64).alias("summary_tau"),
        pl.lit(source).alias("source"),
    )


def _percentile_choice(
    by: dict[str | None, tuple[float, float]], cand
) -> tuple[tuple[float, float], str, dict]:
    """(taus, source, per_domain) of percentile thresholds: per_domain in quanta, as the
    viability rule reports them (the columns divide by 255)."""
    per_domain = {d: (t * 255, s_ * 255, None) for d, (t, s_) in by.items() if d is not None}
    source = f"percentile {cand.percentile:g} ({cand.percentile_scope})"
    return percentile_taus(by, cand.percentile_scope), source, per_domain


def _thresholds_by_rows(
    pipeline: PipelineResource, pool: pl.DataFrame, domain_order: list[str]
) -> Output[pl.DataFrame]:
    """``relevance_thresholds`` from the rows' viability summaries (derived), or from group
    counts over full rows (given as numbers); the same columns as from the stored pairs."""
    full = pipeline.load()
    cand = full.candidates
    d = signals_dir(pipeline)
    inputs = SignalInputs.load(d / "inputs.npz")
    if inputs.ids != pool["id"].to_list():
        raise ValueError("the signal inputs were computed for another corpus: rematerialise them")
    domains, k, floors = pool["domains"].to_list(), cand.candidates_per_group, read_floors(d)
    t0 = time.perf_counter()
    exact = ExactSignals.of(inputs)
    taus = None
    given = cand.topic_threshold is not None and cand.summary_threshold is not None
    if given or cand.threshold_method == "percentile":
        if given:
            taus, source, per_domain = (cand.topic_threshold, cand.summary_threshold), "config", {}
        else:  # every pair's value, from the triangle computed again (twice), nothing stored
            chunks = partial(triangle_pairs, inputs.arrays, *floors, threads=full.signals.threads)
            by = percentile_thresholds(
                chunks, inputs.n, domains, domain_order, cand.percentile, floors, exact
            )
            taus, source, per_domain = _percentile_choice(by, cand)
        cuts = Cut(taus[0], cand.threshold_rule), Cut(taus[1], cand.threshold_rule)
        check_floors(*cuts, floors)
        viable_rows = cut_viable_rows(d, inputs, cuts, k, exact, full.signals.threads)
        viable = viable_by_domain(viable_rows, domains, domain_order)
        quanta = cuts[0].q, cuts[1].q
    else:
        summary = load_summaries(d, inputs, k, floors)
        choice = thresholds_from_summaries(
            summary, domains, domain_order, cand.queries_per_domain, k, *floors
        )
        quanta, source = (choice.topic_q, choice.summary_q), "derived"
        per_domain, viable = choice.per_domain, choice.viable_at_final
    df = _thresholds_frame(domain_order, domains, per_domain, viable, quanta, taus, source)
    return Output(
        df,
        metadata={
            "topic_threshold": round(quanta[0] / 255, 4),
            "summary_threshold": round(quanta[1] / 255, 4),
            "topic_threshold_quanta": quanta[0],
            "summary_threshold_quanta": quanta[1],
            "source": source,
            "layout": "summaries",
            "recomputed_pairs": exact.recomputed,
            "queries_per_domain_Q": cand.queries_per_domain,
            "candidates_per_group_K": k,
            **stage_metadata(seconds=time.perf_counter() - t0),
            "per_domain": markdown_table(df.select(df.columns[:6])),
        },
    )


@table_asset(reads=("signals", "candidates"), deps=["pair_signal_index"])
def relevance_thresholds(
    context: AssetExecutionContext, pipeline: PipelineResource, problem_annotations: pl.DataFrame
) -> Output[pl.DataFrame]:
    """Topic / summary relevance thresholds: given in config (compared exactly), or derived from
    the stored pairs: per domain the strictest with >= Q viable queries (exact at 1/255), or a
    percentile of all pair similarities (exact); the minimum over domains."""
    full = pipeline.load()
    cfg, cand = full.signals, full.candidates
    domain_order = domain_names(full.ontology)
    pool = signal_pool(problem_annotations, cand.require_annotations)
    if cfg.layout == "summaries":
        return _thresholds_by_rows(pipeline, pool, domain_order)
    inputs, pairs = stored_pairs(pipeline, pool["id"].to_list())
    domains = pool["domains"].to_list()
    ft, fs = pairs.floors()
    k = cand.candidates_per_group
    t0 = time.perf_counter()
    budget = gather_budget(cfg.gather_memory_gib)
    pairs = pairs.held(budget)  # read once where they fit: every pass below then reads memory
    degrees = pairs.degrees()
    exact = ExactSignals.of(inputs)
    taus: tuple[float, float] | None = None  # exact thresholds: given, or percentiles
    if cand.topic_threshold is not None and cand.summary_threshold is not None:
        taus, source, per_domain = (cand.topic_threshold, cand.summary_threshold), "config", {}
    elif cand.threshold_method == "percentile":
        by = percentile_thresholds(
            pairs.chunks, inputs.n, domains, domain_order, cand.percentile, (ft, fs), exact
        )
        taus, source, per_domain = _percentile_choice(by, cand)
    else:
        # the search starts at this config's floors: segments reused from a config with lower
        # floors hold more pairs, and a derivation over them could end below what a fresh
        # build can choose (there it refuses instead)
        need = read_floors(signals_dir(pipeline))
        ft, fs = max(ft, need[0]), max(fs, need[1])
        blocks = pairs.row_blocks(budget, degrees)
        choice = derive_thresholds(
            blocks, domains, domain_order, cand.queries_per_domain, k, ft, fs
        )
        tq, sq, source = choice.topic_q, choice.summary_q, "derived"
        per_domain, viable = choice.per_domain, choice.viable_at_final
    if taus is not None:
        cuts = Cut(taus[0], cand.threshold_rule), Cut(taus[1], cand.threshold_rule)
        tq, sq = cuts[0].q, cuts[1].q
        viable = viable_per_domain(pairs.chunks(), domains, domain_order, k, *cuts, exact)
    check_floors(*(cuts if taus is not None else (tq, sq)), (ft, fs))
    df = _thresholds_frame(domain_order, domains, per_domain, viable, (tq, sq), taus, source)
    return Output(
        df,
        metadata={
            "topic_threshold": round(tq / 255, 4),
            "summary_threshold": round(sq / 255, 4),
            "topic_threshold_quanta": tq,
            "summary_threshold_quanta": sq,
            "source": source,
            "topic_tau": taus and taus[0],
            "summary_tau": taus and taus[1],
            # pairs whose byte lies within a quantum of an exact τ, decided on their exact value
            "recomputed_pairs": exact.recomputed,
            "recompute_seconds": round(exact.seconds, 3),
            "rule": "per domain the strictest (largest τt+τs in quanta, then τt) with >= Q viable "
            "queries; final = minimum over domains"
            if source == "derived"
            else "given (sim > τ, exactly)"
            if source == "config"
            else "the percentile of all pair similarities (per domain: then the minimum)",
            "queries_per_domain_Q": cand.queries_per_domain,
            "candidates_per_group_K": k,
            **stage_metadata(seconds=time.perf_counter() - t0),
            "stored_pairs": int(degrees.sum() // 2),
            # the derivation gathers rows in groups; given thresholds only count, in one pass
            "row_groups": (1 if isinstance(pairs, HeldPairs) else len(row_groups(degrees, budget)))
            if source == "derived"
            else 0,
            "gather_budget_mib": round(budget / 2**20),
            "pairs_held_in_memory": isinstance(pairs, HeldPairs),
            "per_domain": markdown_table(
                df.drop(
                    "topic_threshold",
                    "summary_threshold",
                    "topic_threshold_q",
                    "summary_threshold_q",
                    "topic_tau",
                    "summary_tau",
                    "source",
                )
            ),
        },
    )
