"""`saber ui`: the Dagster UI on the project-local instance."""

from __future__ import annotations

import argparse
import sys

from saber_assets.cli.stop import interrupt_on_stop_signals
from saber_assets.config import REPO_ROOT, data_home
from saber_assets.home_lock import holding_home, run_group
from saber_assets.orchestration.launch import prepare_dagster_home


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="open the Dagster UI on the project-local instance")
    p.add_argument("--port", type=int, default=3000)


def run(args: argparse.Namespace) -> int:
    return ui(args.port)


def ui(port: int) -> int:
    """`dagster dev` on the home's instance, the home held for as long as it runs: the runs the
    UI and its sensors launch write the home, so no other command may meanwhile (it is told to
    launch through the UI: ``saber build --on``). Ctrl-C or SIGTERM stop the UI, then free it."""
    home = data_home()
    prepare_dagster_home(home)
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "dagster", "dev", "-w", "workspace.yaml", "-p", str(port)]
    with holding_home(home, f"saber ui --port {port}", advice=f"launch through the UI: "
                      f"`saber build --on {url}`, or stop the UI") as held:  # fmt: skip
        interrupt_on_stop_signals()
        # dagster dev, its daemon and its run workers: one group that holds the home with this
        # process and is stopped if it dies, even by kill -9 (home_lock.run_group)
        group = run_group(held, cmd, cwd=REPO_ROOT)
        try:
            return group.proc.wait()
        except KeyboardInterrupt:  # dagster dev stops its runs and its daemon, then exits
            group.stop()
            return 0
        finally:
            group.close()
