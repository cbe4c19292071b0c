"""`saber ui`: the Dagster UI on the project-local instance."""

from __future__ import annotations

import argparse
import os
import sys

from saber_assets.build.run import prepare_dagster_home
from saber_assets.config import REPO_ROOT, data_home


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="open the Dagster UI on the project-local instance")
    p.add_argument("--port", type=int, default=3000)


def run(args: argparse.Namespace) -> int:
    return ui(args.port)


def ui(port: int) -> int:
    prepare_dagster_home(data_home())
    os.chdir(REPO_ROOT)
    cmd = [sys.executable, "-m", "dagster", "dev", "-w", "workspace.yaml", "-p", str(port)]
    os.execv(sys.executable, cmd)
    return 0  # not reached
