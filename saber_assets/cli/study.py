"""`saber study` (once `saber annotate`, still accepted): the paper's human study on a built
benchmark, with Label Studio.

    saber study export            pairs sampled by Δr, written as a Label Studio project
    saber study push              the project into a running Label Studio
    saber study pull              people's labels out of it, into the stores' human_labels
    saber study import FILE       the same from a JSON export saved by hand

The study lives in one folder (default ``<outputs>/<config name>/human_study``): the sampled
pairs with their strata and shown order, the tasks, the labelling config, the instructions, what
was pushed where, every raw export pulled, and the labels refused with their reasons."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from saber_assets.config import data_home, load_config
from saber_assets.home_lock import holding_home
from saber_assets.outputs import Outputs, write_whole
from saber_resources.label_studio import LabelStudioError


def add_parser(sub) -> None:
    # `annotate` was its name: it also meant the LLM's labels of problems (the annotations stage)
    p = sub.add_parser(
        "study", aliases=["annotate"], help="the human study: pairs for people in Label Studio"
    )
    acts = p.add_subparsers(dest="action", required=True)
    common = [("--config", "pipeline config YAML"),
              ("--study-dir", "the study's folder (default <outputs>/<name>/human_study)")]  # fmt: skip
    ex = acts.add_parser("export", help="sample pairs by Δr and write the Label Studio project")
    ex.add_argument("--pairs", type=int, default=200, help="pairs to label (default 200)")
    ex.add_argument(
        "--double-share", type=float, default=0.1,
        help="share of pairs labelled by two annotators (default 0.1)",
    )  # fmt: skip
    ex.add_argument("--seed", type=int, help="sampling seed (default the config's seed)")
    ex.add_argument("--name", help="the study's name (default the config's name)")
    ex.add_argument("--benchmark", help="exchange-format directory (default: the built one)")
    ex.add_argument("--force", action="store_true", help="replace an existing study folder")
    acts.add_parser("push", help="create or update the project in Label Studio, add its tasks")
    acts.add_parser("pull", help="export the labels from Label Studio into the stores")
    im = acts.add_parser("import", help="a Label Studio JSON export file into the stores")
    im.add_argument("file", help="the JSON export (Label Studio: Export → JSON)")
    for a in acts.choices.values():
        for flag, text in common:
            a.add_argument(flag, help=text)
    for a in (acts.choices["pull"], acts.choices["import"]):
        a.add_argument("--benchmark", help="exchange-format directory (default: the built one)")


def run(args) -> int:
    try:
        with holding_home(data_home(), f"saber study {args.action}"):
            return act(args)
    except LabelStudioError as exc:  # the server's answer, never the key
        print(f"saber: {exc}", file=sys.stderr)
        return 2


def act(args) -> int:
    # here, not at the top: the study's module reaches Dagster through the stores, 0.43 s of
    # `saber --help`'s 0.69 s (every command's parser is loaded for it)
    from saber_assets.study.study_folder import export, import_labels, push, read_project
    from saber_resources.label_studio import LabelStudio

    cfg = load_config(args.config)
    folder = Path(args.study_dir) if args.study_dir else Outputs.of(cfg).human_study
    if args.action == "export":
        return export(cfg, folder, args.pairs, args.double_share, args.seed, args.name,
                      args.benchmark, args.force)  # fmt: skip
    if args.action == "push":
        return push(folder)
    if args.action == "pull":
        ls = LabelStudio.from_env()
        project = read_project(folder, ls)
        export_json = ls.export(project["id"])
        raw = folder / "exports" / f"export-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        write_whole(raw, json.dumps(export_json))  # kept as pulled: nothing people did is lost
        print(f"saber study pull: {ls.url} project {project['id']} -> {raw}")
        return import_labels(cfg, folder, export_json, args.benchmark, ls.user_emails())
    export_json = json.loads(Path(args.file).read_text())
    return import_labels(cfg, folder, export_json, args.benchmark, {})
