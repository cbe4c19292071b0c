"""`saber report`: the paths of the HTML benchmark report and of the explorer; `--serve` serves
the explorer on localhost."""

from __future__ import annotations

import argparse
import sys

from saber_assets.config import load_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="print the paths of the HTML benchmark report and of the explorer"
    )
    p.add_argument("--config", help="pipeline config YAML")
    p.add_argument(
        "--serve",
        action="store_true",
        help="serve the explorer on http://127.0.0.1:PORT until interrupted",
    )
    p.add_argument("--port", type=int, default=8765, help="the port of --serve (default 8765)")


def run(args: argparse.Namespace) -> int:
    return report_cmd(args.config, args.serve, args.port)


def report_cmd(config: str | None, serve: bool = False, port: int = 8765) -> int:
    """Print where the report (``benchmark_report``) and the explorer (``benchmark_explorer``)
    are; with ``serve``, serve the explorer and its downloads (the leaderboard files, the TREC
    runs) on localhost."""
    from saber_assets.outputs import Outputs

    cfg = load_config(config)  # a bad config is reported like everywhere else
    outputs = Outputs.of(cfg)
    report, explorer = outputs.report / "index.html", outputs.explorer / "index.html"
    if not report.exists() and not explorer.exists():
        print(
            f"saber: no report at {report} yet: run `saber build` (or materialise "
            "benchmark_report and benchmark_explorer in the UI)",
            file=sys.stderr,
        )
        return 1
    for label, path in (("report", report), ("explorer", explorer)):
        print(f"{label + ':':<10}{path}" if path.exists() else f"{label + ':':<10}not built yet")
    if serve:
        if not explorer.exists():
            print("saber: no explorer to serve: run `saber build`", file=sys.stderr)
            return 1
        return serve_explorer(outputs.root, port)
    return 0


def serve_explorer(root, port: int) -> int:
    """Serve the explorer of the outputs folder ``root`` and its downloads, nothing else of it
    (``explorer_server``), on 127.0.0.1 until Ctrl-C or SIGTERM, either of which stops it at once
    (the request threads are daemons: none is waited for)."""
    from saber_assets.cli.stop import interrupt_on_stop_signals
    from saber_assets.site.explorer_server import START, explorer_server

    interrupt_on_stop_signals()
    with explorer_server(root, port) as server:
        print(f"serving http://127.0.0.1:{server.server_port}/{START} (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped", flush=True)
    return 0
