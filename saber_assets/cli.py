"""`saber` command line: build the benchmark, open the UI."""

import argparse
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

from saber_assets import annotate, llm_server_cli, registry_cli
from saber_assets.settings import DEFAULT_CONFIG, REPO_ROOT, data_home, load_config
from saber_assets.stages import select_help

# datatrove draws progress bars on stderr; the build prints its own summary.
os.environ.setdefault("TQDM_DISABLE", "1")


def prepare_dagster_home(home: Path) -> Path:
    """Project-local DAGSTER_HOME with the repo's dagster.yaml, so run history survives restarts."""
    dagster_home = home / "dagster_home"
    dagster_home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO_ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    return dagster_home


def _summary_value(metadata: dict, key: str):
    v = metadata.get(key)
    return None if v is None else getattr(v, "value", v)


def _report(result, seconds: float) -> None:
    """One line per materialisation: asset, partition, rows; failed checks too."""
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        part = f" [{mat.partition}]" if mat.partition else ""
        rows = _summary_value(mat.metadata, "dagster/row_count")
        print(f"  {mat.asset_key.to_user_string() + part:<40} rows={rows}", flush=True)
    for check in result.get_asset_check_evaluations():
        if not check.passed:
            print(f"  CHECK FAILED: {check.asset_key.to_user_string()} / {check.check_name}")
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    print(
        f"  ({result.dagster_run.job_name} {'ok' if result.success else 'FAILED'} in "
        f"{seconds:.1f}s, process peak RSS {peak:.2f} GB)",
        flush=True,
    )


def sync_partitions(instance, cfg) -> dict[str, list[str]]:
    """Add a `retriever` partition for every registry entry, and a `training_corpus` partition
    for every training corpus with text it declares, that lacks one (never removes any); returns
    the new keys by partitioning."""
    from saber_assets.contamination.matches import checked_corpora
    from saber_assets.retrievers.discovery import registry_for

    entries = registry_for(cfg)
    wanted = {
        "retriever": [e.name for e in entries],
        "training_corpus": list(checked_corpora(entries)),
    }
    added = {}
    for name, keys in wanted.items():
        have = set(instance.get_dynamic_partitions(name))
        added[name] = [k for k in keys if k not in have]
        if added[name]:
            instance.add_dynamic_partitions(name, added[name])
    return added


def domain_selection(select: list[str], keys: dict[str, str]) -> list[str]:
    """``domain=NAME`` by a domain's title (as the UI and the leaderboard show it) or its
    partition key, rewritten to the key; a name that is neither is an error listing the domains
    (selecting nothing would look like a build with nothing to do)."""
    out = []
    by_key = set(keys.values())
    for x in select:
        if x.startswith("domain="):
            name = x.split("=", 1)[1]
            if name not in keys and name not in by_key:
                listing = ", ".join(repr(t) for t in keys)
                raise ValueError(f"--select domain={name}: no such domain; the domains: {listing}")
            x = f"domain={keys.get(name, name)}"
        out.append(x)
    return out


def observe_sources(defs, instance) -> None:
    """Observe the input files and the registry entries (their data versions) before a build
    asks what is unsynced; a failed observation is an error (the versions would be guesses)."""
    from saber_assets.build import OBSERVE_JOBS

    for job in OBSERVE_JOBS:
        res = defs.resolve_job_def(job).execute_in_process(instance=instance, raise_on_error=False)
        if not res.success:
            raise RuntimeError(f"{job} failed: the input files or the registry could not be read")


def build_remote(url: str, defs, cfg, force: bool, select: list[str], stages: list) -> int:
    """The build on a running deployment (``saber_assets.remote``): its own Dagster says what is
    unsynced."""
    from dagster import AssetKey, DagsterInstance

    from saber_assets.build import (
        fan_in_parents,
        partition_filter,
        runnable_names,
        stage_partition_keys,
    )
    from saber_assets.remote import build_on

    with DagsterInstance.ephemeral() as scratch:  # the partitions, not run history
        names = sync_partitions(scratch, cfg)
        repo = defs.get_repository_def()
        retrievers = runnable_names(cfg)
        domains = [x.split("=", 1)[1] for x in select if x.startswith("domain=")]
        plan = [
            (stage, [p for p in stage_partition_keys(repo, scratch, stage) if keep(p)])
            for stage in stages
            for keep in [partition_filter(stage, domains, retrievers)]
        ]
        fan_in = {
            (a, p): [(k.to_user_string(), ups) for k, ups in edges]
            for stage, partitions in plan
            for p in partitions
            for a in stage.assets
            if (edges := fan_in_parents(scratch, repo.asset_graph, AssetKey(a), p))
        }
    print(f"saber build --on {url}: {sum(len(p) for _, p in plan)} steps in the plan", flush=True)
    return build_on(url, plan, names, force, fan_in=fan_in)


def build(
    config: str | None,
    log_level: str,
    force: bool = False,
    select: list[str] | None = None,
    on: str | None = None,
) -> int:
    cfg = load_config(config)  # fail fast, before Dagster starts, on a bad config file
    home = data_home()
    from dagster import DagsterInstance

    from saber_assets.build import partition_filter, runnable_names, selected_stages, stage_steps
    from saber_assets.definitions import make_definitions
    from saber_assets.lib.dead_runs import process_tags, reap_dead_runs
    from saber_assets.ontology.domains import domain_keys

    defs = make_definitions(config, home)
    select = domain_selection(select or [], domain_keys(cfg.ontology))
    stages = selected_stages(select)  # an unknown stage name fails here, before anything runs
    if on:
        return build_remote(on, defs, cfg, force, select, stages)
    prepare_dagster_home(home)
    instance = DagsterInstance.get()
    t0 = time.perf_counter()
    print(
        f"saber build: config {config or DEFAULT_CONFIG} ({cfg.name}), outputs under {home / cfg.name}",
        flush=True,
    )
    run_config = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    for run_id in reap_dead_runs(instance):
        print(f"  run {run_id} of a killed build marked failed, its pool slots freed", flush=True)
    sync_partitions(instance, cfg)
    observe_sources(defs, instance)
    retrievers = runnable_names(cfg)
    domains = [x.split("=", 1)[1] for x in select if x.startswith("domain=")]
    failed, ran, skipped = [], 0, 0
    for stage in stages:
        if failed:
            break  # later stages need this one complete
        if stage.alias == "analyses" and _no_queries(home / cfg.name):
            # the analyses read queries, ratings and a leaderboard: over none they have nothing
            # to say, and a build whose model found no viable query still finishes
            print(
                "  analyses skipped: the benchmark has no query (no viable query in any domain: "
                "see relevance_thresholds)",
                flush=True,
            )
            continue
        # asked only now: the previous stage may have given this one new inputs
        keep = partition_filter(stage, domains, retrievers)
        for step in stage_steps(defs.get_repository_def(), instance, stage, keep, force):
            if not step.reasons:
                skipped += 1
                continue
            if log_level.upper() in ("DEBUG", "INFO"):
                print(f"  {step.label}: {'; '.join(step.reasons[:3])}", flush=True)
            t1 = time.perf_counter()
            result = defs.resolve_job_def(step.job).execute_in_process(
                instance=instance,
                raise_on_error=False,
                run_config=run_config,
                partition_key=step.partition,
                tags=process_tags(),
            )
            ran += 1
            _report(result, time.perf_counter() - t1)
            if not result.success:
                failed.append(result)
    elapsed = time.perf_counter() - t0
    from saber_resources.warehouse import Warehouse

    wh = defs.resources["warehouse"]
    assert isinstance(wh, Warehouse)
    views = wh.refresh_views()
    print(f"steps:     {ran} run, {skipped} up to date (`--force` rebuilds them)")
    print(f"parquet:   {wh.parquet_dir}")
    print(f"warehouse: {wh.path} (views: {', '.join(views) or 'none'})")
    print(f"dagster:   {os.environ['DAGSTER_HOME']} (open the UI with `uv run saber ui`)")
    report = home / cfg.name / "report" / "index.html"
    if report.exists():
        print(f"report:    {report}")
    if failed:
        for res in failed:
            for ev in res.all_events:
                if ev.is_step_failure:
                    print(
                        f"FAILED step {ev.step_key}: {ev.step_failure_data.error.message.strip()}",
                        file=sys.stderr,
                    )
        print(f"saber build FAILED after {elapsed:.1f}s", file=sys.stderr)
        return 1
    print(f"saber build finished in {elapsed:.1f}s")
    return 0


def _no_queries(outputs: Path) -> bool:
    """Whether the built evaluation benchmark exists and holds no query."""
    queries = outputs / "evaluation_benchmark" / "queries.parquet"
    if not queries.exists():
        return False
    import pyarrow.parquet as pq

    return pq.ParquetFile(queries).metadata.num_rows == 0


def _benchmark_dir(given: str | None, cfg) -> Path:
    """The given exchange-format directory, else the built (evaluation) benchmark."""
    if given:
        return Path(given)
    built = data_home() / cfg.name / "evaluation_benchmark"
    return built if built.exists() else data_home() / cfg.name / "benchmark"


def _print_report(label: str, bench_dir: Path, bench, rep, k: int) -> None:
    from saber_assets.leaderboard.metrics import metric_column

    m = metric_column(k)
    print(
        f"{label} on {bench_dir}: {bench.queries.height} queries, {bench.documents.height} documents"
    )
    for r in rep.iter_rows(named=True):
        print(
            f"\n[{r['setting']}]  nDCG@{k} = {r[m]:.4f}  95% CI [{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
            f"  ({r['queries']} queries, {r['failed']} failed, median {r['median_latency_ms'] or 0:.1f} ms/query)"
            + (f"  row_id {r['row_id']}" if r.get("row_id") else "")
        )
        for d in bench.domain_list():
            if r[d] is not None and r[d] == r[d]:
                print(f"  {d:<22} {r[d]:.4f}  {r[d + ' ci']}")
        full = r[f"full_ndcg'@{k}"]
        if full is not None:
            print(
                f"  full corpus: nDCG'@{k} {full:.4f}, recall@100 of the top-5 rated {r['full_recall_top5@100']:.4f}"
            )


def _evaluate_run_file(args, cfg, bench, bench_dir: Path) -> int:
    """An outside system's TREC run, scored with the leaderboard's metric and CIs; a file with
    several tags is several runs (the tag names the setting: `NAME-statement-full`)."""
    import json

    import polars as pl

    from saber_assets.leaderboard.evaluate import report
    from saber_assets.leaderboard.outside_runs import evaluate_run, read_run, setting_of

    runs = read_run(Path(args.run))
    wanted = args.setting[0] if args.setting and len(args.setting) == 1 else None
    frames = []
    for tag, run in runs.items():
        setting = setting_of(tag, wanted or "statement-full")
        if args.setting and setting not in args.setting:
            continue
        frames.append(evaluate_run(run, bench, setting, args.k, not args.no_full_corpus))
    if not frames:
        raise ValueError(f"{args.run}: no run for the settings {args.setting}")
    rep = report(pl.concat(frames), bench.domain_list(), args.resamples, cfg.seed, k=args.k)
    if args.json:
        out = {"run": str(args.run), "benchmark": str(bench_dir), "k": args.k}
        print(json.dumps({**out, "settings": rep.to_dicts()}, indent=2, default=float))
        return 0
    _print_report(f"run {args.run}", bench_dir, bench, rep, args.k)
    return 0


def cost_cmd(args) -> int:
    """LLM calls, tokens and GPU-hours of a build, per stage, for the config's throughput."""
    import numpy as np
    import polars as pl

    from saber_assets.lib.cost import PAPER, build_cost, cost_table
    from saber_assets.ontology.domains import domain_names

    cfg = load_config(args.config)
    out = data_home() / cfg.name / "parquet"
    if (out / "corpus.parquet").exists():
        corpus = pl.read_parquet(out / "corpus.parquet", columns=["problem", "solution"])
        origin = f"the built corpus ({corpus.height:,} problems)"
    else:
        from saber_assets.corpus.build import build_corpus

        corpus = build_corpus(cfg.corpus, cfg.seed).corpus.select("problem", "solution")
        origin = f"the configured sources ({corpus.height:,} problems, not built yet)"
    rng = np.random.default_rng(cfg.seed)
    rows = corpus.rows()
    sample = [rows[i] for i in rng.choice(len(rows), min(200, len(rows)), replace=False)]
    calls = None
    if (out / "topic_annotations").exists():
        calls = pl.read_parquet(out / "topic_annotations", columns=["calls"])["calls"].mean()
    n = args.problems or corpus.height
    stages = build_cost(cfg, n, sample, len(domain_names(cfg.ontology)), calls)
    table = cost_table(stages, cfg)
    c = cfg.cost
    print(f"saber cost: config {args.config or DEFAULT_CONFIG} ({cfg.name}), {n:,} problems")
    print(f"  prompts measured on {len(sample)} problems of {origin}")
    topic = f"{calls:.2f} measured" if calls else f"{c.topic_calls_per_problem} assumed"
    print(f"  topic-scoring requests per problem: {topic}")
    print(
        f"  throughput per GPU (cost.*, assumptions): prefill {c.prefill_tokens_per_s:,.0f} "
        f"tok/s, decode {c.decode_tokens_per_s:,.0f} tok/s; {c.chars_per_token} chars/token"
    )
    with pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_rows=20, tbl_width_chars=120):  # fmt: skip
        print(table)
    print(f"the paper: {PAPER}")
    from saber_assets.lib.cost import model_len_needed
    from saber_resources.prompts import problem_text

    texts = [problem_text(p, s) for p, s in corpus.iter_rows()]
    need, detail = model_len_needed(cfg, texts)
    have = cfg.llm.max_model_len
    print(
        f"served context length needed: {need:,} tokens (longest judge prompt "
        f"{detail['prompt_tokens']:,} + answer budget {detail['answer_tokens']:,}); "
        f"llm.max_model_len = {have or 'the model’s own'}"
        + (
            " — TOO SMALL: raise it and the server's --max-model-len"
            if have and have < need
            else ""
        )
    )
    return 0


def export_cmd(args) -> int:
    """The built benchmark (or --benchmark DIR) as BEIR, TREC qrels or an MTEB reranking task."""
    from saber_assets.benchmark.data import Benchmark
    from saber_assets.benchmark.formats import export

    cfg = load_config(args.config)
    bench_dir = Path(args.benchmark) if args.benchmark else data_home() / cfg.name / "benchmark"
    files = export(Benchmark.read(bench_dir), args.format, Path(args.dir), args.setting)
    print(f"{args.format} ({args.setting}) from {bench_dir}: {len(files)} files under {args.dir}")
    return 0


def _entries_to_run(args, entries) -> tuple[list, list[tuple[str, str]]]:
    """The registry entries this evaluation runs, and (name, reason) for each one it does not."""
    from saber_assets.retrievers.entries import RegistryError
    from saber_assets.retrievers.registry import runnable, unavailable_reason

    if not args.retriever:
        run, skipped = runnable(entries, args.opt_in)
        hint = " (run it by name, or all of them with --opt-in)"
        return run, [(n, why + hint if why == "an opt-in variant" else why) for n, why in skipped]
    named = [e for e in entries if e.name == args.retriever]
    if not named:
        raise RegistryError(f"no retriever named {args.retriever!r} in the registry")
    why = unavailable_reason(named[0], entries)
    if why:
        raise RegistryError(f"retriever {args.retriever!r} cannot run here: {why}")
    return named, []


def _registry(args, cfg) -> tuple[Path, list]:
    """The registry file (``--registry``, else the config's; a path relative to the repository
    or to the working folder) and its entries."""
    from saber_assets.retrievers.discovery import registry_for
    from saber_assets.retrievers.registry import load_registry

    if not args.registry:  # the config's: with the models discovered on its servers
        return cfg.leaderboard.registry_path(), registry_for(cfg)
    registry = args.registry
    path = Path(registry) if Path(registry).is_absolute() else REPO_ROOT / registry
    if not path.exists() and Path(registry).exists():
        path = Path(registry)
    return path, load_registry(path)


def _retriever_resources(args, entries):
    """What the retrievers need, with embeddings cached in the config's stores."""
    from saber_assets.definitions import make_definitions
    from saber_assets.retrievers.registry import RetrieverResources
    from saber_resources.cache import EmbeddingCache

    stores = make_definitions(args.config).resources["stores"]
    return RetrieverResources(embedding_cache=EmbeddingCache(stores.db()), entries=entries)


def evaluate_cmd(args) -> int:
    """The command-line twin of the leaderboard asset: one registered retriever, or every entry
    of a registry (``--registry FILE`` alone, or ``--compare-paper``)."""
    import json

    import polars as pl

    from saber_assets.benchmark.data import Benchmark
    from saber_assets.benchmark.texts import SETTINGS
    from saber_assets.leaderboard.evaluate import evaluate, report
    from saber_assets.leaderboard.paper import apply_protocol
    from saber_assets.retrievers.registry import build_retriever

    cfg = load_config(args.config)
    bench_dir = _benchmark_dir(args.benchmark, cfg)
    bench = Benchmark.read(bench_dir)
    if args.run:
        return _evaluate_run_file(args, cfg, bench, bench_dir)
    if args.reproduce:
        return _reproduce(args, cfg, bench, bench_dir)
    if not args.retriever and not (args.registry or args.compare_paper):
        raise ValueError("give a retriever name from the registry, --registry FILE, or --run FILE")
    _, entries = _registry(args, cfg)
    chosen, skipped = _entries_to_run(args, entries)
    resources = _retriever_resources(args, entries)
    domains = bench.domain_list()
    relevance = bench.relevance()
    other = "saber" if args.protocol == "reference" else "reference"
    from saber_assets.leaderboard.provenance import benchmark_id, provenance, with_provenance

    bench_id = benchmark_id(bench)
    results = []  # (entry, report under --protocol, report under the other protocol)
    for entry in chosen:
        retriever = build_retriever(entry, resources)
        settings = args.setting or [
            s for s in SETTINGS if entry.settings is None or s in entry.settings
        ]
        full = entry.full_corpus and not args.no_full_corpus
        runs = pl.concat([evaluate(retriever, bench, s, args.k, None, full) for s in settings])
        reps = [
            report(
                apply_protocol(runs, relevance, args.k, p),
                domains,
                args.resamples,
                cfg.seed,
                drop_failed=p == "reference",
                k=args.k,
            )  # fmt: skip
            for p in (args.protocol, other)
        ]
        # the saber protocol's rows are the leaderboard's: only they carry its row ids
        fields = provenance(entry, bench_id)
        reps = [with_provenance(r, entry.name, fields) for r in reps]
        results.append((entry, *reps))
    if args.json and args.retriever and not args.compare_paper:  # one retriever: its report
        entry, rep, alt = results[0]
        out = {"retriever": entry.name, "kind": entry.kind, "benchmark": str(bench_dir),
               "k": args.k, "protocol": args.protocol, "settings": rep.to_dicts(),
               f"settings_{other}_protocol": alt.to_dicts()}  # fmt: skip
        print(json.dumps(out, indent=2, default=float))
        return 0
    if args.json:
        out = {"benchmark": str(bench_dir), "k": args.k, "protocol": args.protocol,
               "skipped": [{"retriever": n, "reason": r} for n, r in skipped]}  # fmt: skip
        out["retrievers"] = [
            {"retriever": e.name, "kind": e.kind, "meta": e.meta.model_dump(),
             "settings": rep.to_dicts(), f"settings_{other}_protocol": alt.to_dicts()}
            for e, rep, alt in results
        ]  # fmt: skip
        if args.compare_paper:
            out["compare_paper"] = _paper_table(results, domains, args.table).to_dicts()
        print(json.dumps(out, indent=2, default=float))
        return 0
    if args.retriever and not args.compare_paper:
        entry, rep, _ = results[0]
        _print_report(f"{entry.name} ({entry.kind})", bench_dir, bench, rep, args.k)
        return 0
    _print_registry_run(args, bench_dir, bench, results, skipped, other)
    if args.compare_paper:
        _print_paper_comparison(bench, results, domains, args.table, args.protocol)
    return 0


def _print_registry_run(args, bench_dir, bench, results, skipped, other) -> None:
    from saber_assets.leaderboard.metrics import metric_column

    print(
        f"registry run on {bench_dir}: {bench.queries.height} queries, "
        f"{bench.documents.height} documents; {len(results)} retrievers ran, {len(skipped)} did not"
    )
    for name, why in skipped:
        print(f"  not run: {name}: {why}")
    print(
        f"\nnDCG@{args.k}, {args.protocol} protocol (and the {other} protocol's, and the difference)"
    )
    print(
        f"  {'retriever':<34} {'setting':<20} {'ours':>6} {other:>9} {'diff':>7} {'failed':>6}"
        "  row_id"
    )
    m = metric_column(args.k)
    for entry, rep, alt in results:
        alt_of = {r["setting"]: r[m] for r in alt.iter_rows(named=True)}
        for r in rep.iter_rows(named=True):
            a = alt_of.get(r["setting"])
            print(
                f"  {entry.name:<34} {r['setting']:<20} {r[m]:>6.3f} {a:>9.3f} "
                f"{r[m] - a:>+7.3f} {r['failed']:>6}  {r['row_id']}"
            )


def _paper_table(results, domains, table: str):
    import polars as pl

    from saber_assets.leaderboard.paper import compare, domain_cells, paper_figures

    cells = pl.concat(
        [domain_cells(rep, e.meta.paper_system or e.name, domains) for e, rep, _ in results]
    )
    return compare(cells, paper_figures(), table)


def _print_paper_comparison(bench, results, domains, table: str, protocol: str) -> None:
    from saber_assets.leaderboard.paper import fmt, is_published

    print(f"\nbeside the paper ({table} table; ours under the {protocol} protocol)")
    if not is_published(bench.manifest):
        print(
            "  NOTE: this benchmark is not the published SABER-Math (pull it with `saber pull`): "
            "the paper's figures stand beside ours for the layout only, and the differences say "
            "nothing about reproducing the paper"
        )
    cmp = _paper_table(results, domains, table)
    print(
        f"  {'system':<32} {'setting':<20} {'domain':<22} {'ours':>6} {'paper':>6} "
        f"{'diff':>7} {'in CI':>5}  flag"
    )
    for r in cmp.iter_rows(named=True):
        print(
            f"  {r['system']:<32} {r['setting']:<20} {r['domain']:<22} {fmt(r['ours']):>6} "
            f"{fmt(r['paper']):>6} {fmt(r['diff'], signed=True):>7} {fmt(r['in_paper_ci']):>5}"
            f"  {r['flag']}"
        )


def _reproduce(args, cfg, bench, bench_dir: Path) -> int:
    """Rerun exactly one leaderboard row (``row_id``) and say whether it matches: the row's
    recorded provenance against today's, then its nDCG and interval recomputed."""
    import polars as pl

    from saber_assets.leaderboard.evaluate import evaluate, report
    from saber_assets.leaderboard.metrics import metric_column, score_column
    from saber_assets.leaderboard.provenance import (
        PROVENANCE_COLUMNS,
        benchmark_id,
        provenance,
        row_id,
    )
    from saber_assets.retrievers.registry import build_retriever

    board_path = (
        Path(args.leaderboard)
        if args.leaderboard
        else data_home() / cfg.name / "leaderboard" / "leaderboard.parquet"
    )
    if not board_path.exists():
        raise FileNotFoundError(f"no leaderboard at {board_path}: build it, or pass --leaderboard")
    board = pl.read_parquet(board_path)
    if "row_id" not in board.columns:
        raise ValueError(f"{board_path}: written before rows had ids: rebuild the leaderboard")
    hit = board.filter(pl.col("row_id") == args.reproduce)
    if hit.is_empty():
        raise ValueError(f"no row {args.reproduce!r} in {board_path}")
    row = hit.row(0, named=True)
    recorded, m = score_column(board), metric_column(args.k)
    _, entries = _registry(args, cfg)
    entry = next((e for e in entries if e.name == row["retriever"]), None)
    if entry is None:
        raise ValueError(f"row {args.reproduce}: no retriever {row['retriever']!r} in the registry")
    now = provenance(entry, benchmark_id(bench))
    print(f"row {args.reproduce}: {row['retriever']} ({row['kind']}), {row['setting']}, "
          f"recorded nDCG@{recorded.split('@')[1]} {row[recorded]:.6f}")  # fmt: skip
    changed = [
        f"{c}: {row[c]} -> {now[c]}"
        for c in PROVENANCE_COLUMNS[1:]
        if str(row.get(c)) != str(now[c]) and not str(now[c]).startswith("api:")
    ]
    for line in changed:
        print(f"  provenance changed: {line}")
    retriever = build_retriever(entry, _retriever_resources(args, entries))
    runs = evaluate(retriever, bench, row["setting"], args.k, None, full_corpus=False)
    rep = report(
        runs, bench.domain_list(), cfg.leaderboard.bootstrap_resamples, cfg.seed, k=args.k
    ).row(0, named=True)
    same_id = row_id(now, entry.name, row["setting"]) == args.reproduce
    diffs = {c: abs(rep[c] - row[c]) for c in ("ci_low", "ci_high")}
    diffs[m] = abs(rep[m] - row[recorded])
    matches = all(d <= 1e-9 for d in diffs.values())
    print(
        f"  rerun: nDCG@{args.k} {rep[m]:.6f} [{rep['ci_low']:.6f}, {rep['ci_high']:.6f}] "
        f"on {bench_dir}"
    )
    verdict = "matches" if matches else f"differs (nDCG by {rep[m] - row[recorded]:+.6f})"
    print(f"reproduced: {verdict}; provenance {'identical' if same_id else 'changed'}")
    return 0 if matches and same_id else 1


def _revisions(given: list[str] | None) -> dict[str, str]:
    out = {}
    for item in given or []:
        table, sep, sha = item.partition("=")
        if not sep or not sha:
            raise ValueError(f"--revision takes queries=SHA or documents=SHA, not {item!r}")
        out[table] = sha
    return out


def pull_cmd(args) -> int:
    """The published SABER-Math (two Hub datasets, or two snapshot folders) in the exchange format."""
    from saber_assets.benchmark.hub import HubUnavailable, pull

    dirs = (args.queries_dir, args.documents_dir)
    try:
        bench = pull(
            Path(args.out),
            *(Path(d) if d else None for d in dirs),
            revisions=_revisions(args.revision),
            repos=(args.queries_repo, args.documents_repo),
        )
    except HubUnavailable as exc:
        print(f"saber: {exc}", file=sys.stderr)
        return 2
    hub = bench.manifest["hub"]
    print(
        f"saber pull: {bench.queries.height} queries, {bench.documents.height} documents "
        f"-> {args.out} (exchange format)"
    )
    for table in ("queries", "documents"):
        h = hub[table]
        print(f"  {table}: {h['repo']} @ {h['revision'] or 'unknown revision (local folder)'}, "
              f"{len(h['files'])} file(s) from {h['folder']}")  # fmt: skip
    for note in bench.manifest.get("derived", []):
        print(f"  derived: {note}")
    return 0


def push_cmd(args) -> int:
    """A built benchmark as two Hub datasets (``PREFIX-queries``, ``PREFIX-documents``)."""
    import tempfile

    from saber_assets.benchmark.data import Benchmark
    from saber_assets.benchmark.hub import HubUnavailable, push, stage_push

    bench = Benchmark.read(Path(args.dir))
    if args.stage_only:
        folders = stage_push(bench, Path(args.stage_only), args.repo_prefix)
        for repo, folder in folders.items():
            print(f"staged {repo}: {folder}")
        return 0
    with tempfile.TemporaryDirectory(prefix="saber-push-") as staging:
        try:
            done = push(bench, Path(staging), args.repo_prefix, private=args.private)
        except HubUnavailable as exc:
            print(f"saber: {exc}", file=sys.stderr)
            return 2
    for repo, url in done.items():
        print(f"pushed {repo}: {url}")
    return 0


def warehouse_cmd(config: str | None, rebuild: bool) -> int:
    """Refresh (or rebuild from scratch) the DuckDB warehouse: views over the Parquet outputs."""
    load_config(config)
    from saber_assets.definitions import make_definitions

    wh = make_definitions(config).resources["warehouse"]
    if rebuild and Path(wh.path).exists():
        Path(wh.path).unlink()
    views = wh.refresh_views()
    print(f"warehouse: {wh.path}\nviews: {', '.join(views) or 'none (build first)'}")
    return 0


def report_cmd(config: str | None) -> int:
    """Print the path of the benchmark report (the `benchmark_report` asset writes it)."""
    from saber_assets.analyses.report_assets import report_path
    from saber_assets.resources import SaberSettings

    load_config(config)  # a bad config is reported like everywhere else
    path = report_path(SaberSettings(config_file=str(config or DEFAULT_CONFIG)))
    if not path.exists():
        print(
            f"saber: no report at {path} yet: run `saber build` (or materialise "
            "benchmark_report in the UI)",
            file=sys.stderr,
        )
        return 1
    print(path)
    return 0


def ui(port: int) -> int:
    prepare_dagster_home(data_home())
    os.chdir(REPO_ROOT)
    cmd = [sys.executable, "-m", "dagster", "dev", "-w", "workspace.yaml", "-p", str(port)]
    os.execv(sys.executable, cmd)
    return 0  # not reached


def _quiet_dagster_notices() -> None:
    """Dagster's notices that an API this project pins and tests is in beta or preview say nothing
    a user of `saber` can act on; pytest and the UI's code server still show them."""
    warnings.filterwarnings("ignore", message=r".* is currently in (beta|preview)")


def build_parser() -> argparse.ArgumentParser:
    """The `saber` command line: every command and its options (the docs' command lines are
    checked against it, tests/test_docs.py)."""
    parser = argparse.ArgumentParser(
        prog="saber", description="Build and evaluate SABER-Math-style benchmarks."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="materialise every asset on a pipeline config")
    p_build.add_argument(
        "--config", help=f"pipeline config YAML (default {DEFAULT_CONFIG.relative_to(REPO_ROOT)})"
    )
    p_build.add_argument(
        "--log-level", default="WARNING", help="Dagster console log level (default WARNING)"
    )
    p_build.add_argument(
        "--force", action="store_true", help="rebuild every step, up to date or not"
    )
    p_build.add_argument(
        "--on", metavar="URL", help="launch the build on a running Dagster webserver (GraphQL)"
    )
    p_build.add_argument(
        "--select",
        action="append",
        help="only these stages: " + select_help() + "; and/or domain=NAME (a title or its "
        "partition key); repeatable",
    )
    p_eval = sub.add_parser(
        "evaluate", help="score registered retrievers on a benchmark (exchange format)"
    )
    p_eval.add_argument(
        "retriever", nargs="?", help="a name from the retriever registry (retrievers.yaml)"
    )
    p_eval.add_argument(
        "--run",
        metavar="FILE",
        help="score an outside system's TREC run file instead (qid Q0 docid rank score tag; "
        "a tag ending in a setting name says which setting it ranks)",
    )
    p_eval.add_argument(
        "--benchmark", help="exchange-format directory (default: the built benchmark)"
    )
    p_eval.add_argument(
        "--setting",
        action="append",
        choices=["statement-statement", "statement-full", "full-full"],
        help="repeatable; default all three",
    )
    p_eval.add_argument("--k", type=int, default=10)
    p_eval.add_argument("--json", action="store_true", help="machine-readable report")
    p_eval.add_argument("--config", help="pipeline config (for the default benchmark and seed)")
    p_eval.add_argument("--registry", help="retriever registry YAML (default: the config's)")
    p_eval.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    p_eval.add_argument("--no-full-corpus", action="store_true", help="skip the full-corpus track")
    p_eval.add_argument(
        "--compare-paper", action="store_true",
        help="put the numbers beside the SABER-Math paper's (every entry of the registry)",
    )  # fmt: skip
    p_eval.add_argument(
        "--table", default="main", choices=["main", "ci", "additional"],
        help="which of the paper's tables to compare with (default main: Table 1)",
    )  # fmt: skip
    p_eval.add_argument(
        "--protocol", default="saber", choices=["saber", "reference"],
        help="saber (failed queries count 0, ties at their expected value) or the reference "
        "evaluation's (failed queries left out, ties in numpy.argsort order)",
    )  # fmt: skip
    p_eval.add_argument(
        "--opt-in", action="store_true", help="also run the registry's opt-in variants"
    )
    p_eval.add_argument(
        "--reproduce", metavar="ROW_ID", help="rerun one leaderboard row and say if it matches"
    )
    p_eval.add_argument(
        "--leaderboard", help="leaderboard.parquet for --reproduce (default: built)"
    )
    p_pull = sub.add_parser(
        "pull", help="the published SABER-Math (two Hub datasets) in the exchange format"
    )
    p_pull.add_argument("out", help="output directory (exchange format)")
    p_pull.add_argument("--queries-dir", help="a snapshot folder of the queries dataset (offline)")
    p_pull.add_argument("--documents-dir", help="a snapshot folder of the documents dataset")
    p_pull.add_argument(
        "--revision", action="append", metavar="TABLE=SHA",
        help="pin a dataset: queries=SHA and/or documents=SHA (default: the newest)",
    )  # fmt: skip
    p_pull.add_argument("--queries-repo", default="INSAIT-Institute/SaberMath-queries")
    p_pull.add_argument("--documents-repo", default="INSAIT-Institute/SaberMath-documents")
    p_push = sub.add_parser("push", help="a built benchmark as two Hub datasets with a card")
    p_push.add_argument("dir", help="exchange-format directory (e.g. .saber/sample/benchmark)")
    p_push.add_argument("--repo-prefix", required=True, metavar="OWNER/NAME")
    p_push.add_argument("--private", action="store_true")
    p_push.add_argument(
        "--stage-only",
        metavar="DIR",
        help="write the two dataset folders under DIR, upload nothing",
    )
    p_wh = sub.add_parser(
        "warehouse", help="refresh the DuckDB warehouse (views over the Parquet outputs)"
    )
    p_wh.add_argument("--config", help="pipeline config YAML")
    p_wh.add_argument("--rebuild", action="store_true", help="delete the file and recreate it")
    p_cost = sub.add_parser("cost", help="LLM calls, tokens and GPU-hours of a build")
    p_cost.add_argument("--config", help="pipeline config YAML")
    p_cost.add_argument(
        "--problems", type=int, help="corpus size to cost (default: the corpus's own)"
    )
    p_exp = sub.add_parser("export", help="write the benchmark as BEIR, TREC qrels or MTEB")
    p_exp.add_argument("--format", required=True, choices=["beir", "trec", "mteb"])
    p_exp.add_argument("dir", help="output directory")
    p_exp.add_argument(
        "--setting",
        default="statement-full",
        choices=["statement-statement", "statement-full", "full-full"],
        help="which texts queries and documents carry (default statement-full)",
    )
    p_exp.add_argument("--benchmark", help="exchange-format directory (default: the built one)")
    p_exp.add_argument("--config", help="pipeline config YAML")
    p_rep = sub.add_parser("report", help="print the path of the HTML benchmark report")
    p_rep.add_argument("--config", help="pipeline config YAML")
    annotate.add_parser(sub)
    registry_cli.add_parser(sub)
    llm_server_cli.add_parser(sub)
    p_ui = sub.add_parser("ui", help="open the Dagster UI on the project-local instance")
    p_ui.add_argument("--port", type=int, default=3000)
    return parser


def main(argv: list[str] | None = None) -> int:
    _quiet_dagster_notices()
    args = build_parser().parse_args(argv)
    try:
        if args.command == "build":
            return build(args.config, args.log_level, args.force, args.select, args.on)
        if args.command == "evaluate":
            return evaluate_cmd(args)
        if args.command == "pull":
            return pull_cmd(args)
        if args.command == "push":
            return push_cmd(args)
        if args.command == "warehouse":
            return warehouse_cmd(args.config, args.rebuild)
        if args.command == "cost":
            return cost_cmd(args)
        if args.command == "export":
            return export_cmd(args)
        if args.command == "report":
            return report_cmd(args.config)
        if args.command == "annotate":
            return annotate.run(args)
        if args.command == "registry":
            return registry_cli.run(args)
        if args.command == "llm-server":
            return llm_server_cli.run(args)
        return ui(args.port)
    except (FileNotFoundError, ValueError) as exc:  # config, registry and benchmark errors
        print(f"saber: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
