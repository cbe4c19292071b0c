"""`saber evaluate`: registered retrievers (or an outside run file) scored on a benchmark, beside
the paper's numbers if asked, or one leaderboard row reproduced."""

from __future__ import annotations

import argparse
from pathlib import Path

from saber_assets.benchmark.texts import SETTINGS
from saber_assets.config import REPO_ROOT, data_home, load_config
from saber_assets.home_lock import holding_home
from saber_assets.leaderboard.board import CI_HIGH, CI_LOW
from saber_assets.outputs import Outputs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate", help="score registered retrievers on a benchmark (exchange format)"
    )
    p.add_argument(
        "retriever", nargs="?", help="a name from the retriever registry (retrievers.yaml)"
    )
    p.add_argument(
        "--run",
        metavar="FILE",
        help="score an outside system's TREC run file instead (qid Q0 docid rank score tag; "
        "a tag ending in a setting name says which setting it ranks)",
    )
    p.add_argument("--benchmark", help="exchange-format directory (default: the built benchmark)")
    p.add_argument(
        "--setting", action="append", choices=SETTINGS, help="repeatable; default all three"
    )
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("--config", help="pipeline config (for the default benchmark and seed)")
    p.add_argument("--registry", help="retriever registry YAML (default: the config's)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    p.add_argument("--no-full-corpus", action="store_true", help="skip the full-corpus track")
    p.add_argument(
        "--compare-paper", action="store_true",
        help="put the numbers beside the SABER-Math paper's (every entry of the registry)",
    )  # fmt: skip
    p.add_argument(
        "--table", default="main", choices=["main", "ci", "additional"],
        help="which of the paper's tables to compare with (default main: Table 1)",
    )  # fmt: skip
    p.add_argument(
        "--protocol", default="saber", choices=["saber", "reference"],
        help="saber (ties at their expected value) or the reference evaluation's (ties in "
        "numpy.argsort order); in both a query on the retriever's skip list is left out and "
        "any other failure scores 0, as the reference scores an engine failure",
    )  # fmt: skip
    p.add_argument("--opt-in", action="store_true", help="also run the registry's opt-in variants")
    p.add_argument(
        "--reproduce", metavar="ROW_ID", help="rerun one leaderboard row and say if it matches"
    )
    p.add_argument("--leaderboard", help="leaderboard.parquet for --reproduce (default: built)")


def run(args: argparse.Namespace) -> int:
    with holding_home(data_home(), "saber evaluate"):  # it writes embeddings into the stores
        return evaluate_cmd(args)


def print_report(label: str, bench_dir: Path, bench, rep, k: int) -> None:
    from saber_assets.leaderboard.board import domain_ci, domain_mean, metric_column

    m = metric_column(k)
    print(
        f"{label} on {bench_dir}: {bench.queries.height} queries, {bench.documents.height} documents"
    )
    for r in rep.iter_rows(named=True):
        print(
            f"\n[{r['setting']}]  nDCG@{k} = {r[m]:.4f}  95% CI [{r[CI_LOW]:.4f}, {r[CI_HIGH]:.4f}]"
            f"  ({r['queries']} queries, {r['failed']} failed, median {r['median_latency_ms'] or 0:.1f} ms/query)"
            + (f"  row_id {r['row_id']}" if r.get("row_id") else "")
        )
        for d in bench.domain_list():
            mean = r[domain_mean(d)]
            if mean is not None and mean == mean:
                print(f"  {d:<22} {mean:.4f}  {r[domain_ci(d)]}")
        full = r[f"full_ndcg'@{k}"]
        if full is not None:
            print(
                f"  full corpus: nDCG'@{k} {full:.4f}, recall@100 of the top-5 rated {r['full_recall_top5@100']:.4f}"
                f"; judged@{k} {r[f'judged@{k}']:.2f}, nDCG@{k} with unjudged as 0 {r[f'full_ndcg@{k}']:.4f}"
            )


def evaluate_run_file(args, cfg, bench, bench_dir: Path) -> int:
    """An outside system's TREC run, scored with the leaderboard's metric and CIs; a file with
    several tags is several runs (the tag names the setting: `NAME-statement-full`)."""
    import json

    import polars as pl

    from saber_assets.leaderboard.scores import score_table
    from saber_assets.runs.outside import evaluate_run, read_run, runs_by_setting

    runs = runs_by_setting(read_run(Path(args.run)), args.setting)
    frames = [
        evaluate_run(run, bench, setting, args.k, not args.no_full_corpus)
        for setting, (_, run) in runs.items()
    ]
    if not frames:
        raise ValueError(f"{args.run}: no run for the settings {args.setting}")
    rep = score_table(pl.concat(frames), bench.domain_list(), args.resamples, cfg.seed, k=args.k)
    if args.json:
        out = {"run": str(args.run), "benchmark": str(bench_dir), "k": args.k}
        print(json.dumps({**out, "settings": rep.to_dicts()}, indent=2, default=float))
        return 0
    print_report(f"run {args.run}", bench_dir, bench, rep, args.k)
    return 0


def entries_to_run(args, entries) -> tuple[list, list[tuple[str, str]]]:
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


def registry(args, cfg) -> tuple[Path, list]:
    """The registry file (``--registry``, else the config's; a path relative to the repository
    or to the working folder) and its entries."""
    from saber_assets.retrievers.discovery import registry_for
    from saber_assets.retrievers.registry import load_registry

    if not args.registry:  # the config's: with the models discovered on its servers
        return cfg.retrievers.registry_path(), registry_for(cfg)
    registry = args.registry
    path = Path(registry) if Path(registry).is_absolute() else REPO_ROOT / registry
    if not path.exists() and Path(registry).exists():
        path = Path(registry)
    return path, load_registry(path)


def retriever_resources(cfg, entries):
    """What the retrievers need, with embeddings cached in the config's stores (as the assets
    give them)."""
    from saber_assets.pipeline import open_stores
    from saber_assets.retrievers.registry import RetrieverResources

    return RetrieverResources.from_stores(open_stores(cfg), entries)


def evaluate_cmd(args) -> int:
    """The command-line twin of the leaderboard asset: one registered retriever, or every entry
    of a registry (``--registry FILE`` alone, or ``--compare-paper``)."""
    import json

    import polars as pl

    from saber_assets.benchmark.data import Benchmark
    from saber_assets.benchmark.texts import SETTINGS
    from saber_assets.leaderboard.paper import apply_protocol
    from saber_assets.leaderboard.rows import entry_rows
    from saber_assets.retrievers.registry import build_retriever
    from saber_assets.runs.evaluate import evaluate
    from saber_assets.runs.provenance import benchmark_id

    cfg = load_config(args.config)
    bench_dir = Outputs.of(cfg).benchmark_folder(args.benchmark)
    bench = Benchmark.read(bench_dir)
    if args.run:
        return evaluate_run_file(args, cfg, bench, bench_dir)
    if args.reproduce:
        return reproduce(args, cfg, bench, bench_dir)
    if not args.retriever and not (args.registry or args.compare_paper):
        raise ValueError("give a retriever name from the registry, --registry FILE, or --run FILE")
    _, entries = registry(args, cfg)
    chosen, skipped = entries_to_run(args, entries)
    resources = retriever_resources(cfg, entries)
    domains = bench.domain_list()
    relevance = bench.relevance()
    other = "saber" if args.protocol == "reference" else "reference"
    bench_id = benchmark_id(bench)
    results = []  # (entry, report under --protocol, report under the other protocol)
    for entry in chosen:
        retriever = build_retriever(entry, resources)
        settings = args.setting or [
            s for s in SETTINGS if entry.settings is None or s in entry.settings
        ]
        full = entry.full_corpus and not args.no_full_corpus
        runs = pl.concat([evaluate(retriever, bench, s, args.k, None, full) for s in settings])
        # the saber protocol's rows are the leaderboard's: only they carry its row ids
        reps = [
            entry_rows(
                entry,
                apply_protocol(runs, relevance, args.k, p),
                domains,
                bench_id,
                resamples=args.resamples,
                seed=cfg.seed,
                k=args.k,
            )  # fmt: skip
            for p in (args.protocol, other)
        ]
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
            out["compare_paper"] = paper_table(results, domains, args.table).to_dicts()
        print(json.dumps(out, indent=2, default=float))
        return 0
    if args.retriever and not args.compare_paper:
        entry, rep, _ = results[0]
        print_report(f"{entry.name} ({entry.kind})", bench_dir, bench, rep, args.k)
        return 0
    print_registry_run(args, bench_dir, bench, results, skipped, other)
    if args.compare_paper:
        print_paper_comparison(bench, results, domains, args.table, args.protocol)
    return 0


def print_registry_run(args, bench_dir, bench, results, skipped, other) -> None:
    from saber_assets.leaderboard.board import metric_column

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


def paper_table(results, domains, table: str):
    import polars as pl

    from saber_assets.leaderboard.paper import compare, domain_cells, paper_figures

    cells = pl.concat(
        [domain_cells(rep, e.meta.paper_system or e.name, domains) for e, rep, _ in results]
    )
    return compare(cells, paper_figures(), table)


def print_paper_comparison(bench, results, domains, table: str, protocol: str) -> None:
    from saber_assets.leaderboard.paper import fmt, is_published

    print(f"\nbeside the paper ({table} table; ours under the {protocol} protocol)")
    if not is_published(bench.manifest):
        print(
            "  NOTE: this benchmark is not the published SABER-Math (pull it with `saber pull`): "
            "the paper's figures stand beside ours for the layout only, and the differences say "
            "nothing about reproducing the paper"
        )
    cmp = paper_table(results, domains, table)
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


def reproduce(args, cfg, bench, bench_dir: Path) -> int:
    """Rerun exactly one leaderboard row (``row_id``) and say whether it matches: the row's
    recorded provenance against today's, then its nDCG and interval recomputed."""
    import polars as pl

    from saber_assets.leaderboard.board import TABLE, metric_column, score_column
    from saber_assets.leaderboard.rows import entry_rows
    from saber_assets.retrievers.registry import build_retriever
    from saber_assets.runs.evaluate import evaluate
    from saber_assets.runs.provenance import PROVENANCE_COLUMNS, benchmark_id, provenance

    board_path = Path(args.leaderboard) if args.leaderboard else Outputs.of(cfg).leaderboard / TABLE
    if not board_path.is_file():
        raise FileNotFoundError(f"no leaderboard at {board_path}: build it, or pass --leaderboard")
    board = pl.read_parquet(board_path)  # a board file named by the user: read as given
    if "row_id" not in board.columns:
        raise ValueError(f"{board_path}: written before rows had ids: rebuild the leaderboard")
    hit = board.filter(pl.col("row_id") == args.reproduce)
    if hit.is_empty():
        raise ValueError(f"no row {args.reproduce!r} in {board_path}")
    row = hit.row(0, named=True)
    recorded, m = score_column(board), metric_column(args.k)
    _, entries = registry(args, cfg)
    entry = next((e for e in entries if e.name == row["retriever"]), None)
    if entry is None:
        raise ValueError(f"row {args.reproduce}: no retriever {row['retriever']!r} in the registry")
    bench_id = benchmark_id(bench)
    now = provenance(entry, bench_id)
    print(f"row {args.reproduce}: {row['retriever']} ({row['kind']}), {row['setting']}, "
          f"recorded nDCG@{recorded.split('@')[1]} {row[recorded]:.6f}")  # fmt: skip
    changed = [
        f"{c}: {row[c]} -> {now[c]}"
        for c in PROVENANCE_COLUMNS[1:]
        if str(row.get(c)) != str(now[c]) and not str(now[c]).startswith("api:")
    ]
    for line in changed:
        print(f"  provenance changed: {line}")
    retriever = build_retriever(entry, retriever_resources(cfg, entries))
    runs = evaluate(retriever, bench, row["setting"], args.k, None, full_corpus=False)
    rep = entry_rows(
        entry, runs, bench.domain_list(), bench_id, resamples=cfg.leaderboard.bootstrap_resamples,
        seed=cfg.seed, k=args.k,
    ).row(0, named=True)  # fmt: skip
    same_id = rep["row_id"] == args.reproduce
    diffs = {c: abs(rep[c] - row[c]) for c in (CI_LOW, CI_HIGH)}
    diffs[m] = abs(rep[m] - row[recorded])
    matches = all(d <= 1e-9 for d in diffs.values())
    print(
        f"  rerun: nDCG@{args.k} {rep[m]:.6f} [{rep[CI_LOW]:.6f}, {rep[CI_HIGH]:.6f}] "
        f"on {bench_dir}"
    )
    verdict = "matches" if matches else f"differs (nDCG by {rep[m] - row[recorded]:+.6f})"
    print(f"reproduced: {verdict}; provenance {'identical' if same_id else 'changed'}")
    return 0 if matches and same_id else 1
