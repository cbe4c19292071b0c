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

FILES = {
    "pairs": "pairs.parquet", "tasks": "tasks.json", "config": "label_config.xml",
    "instructions": "instructions.html", "study": "study.json", "project": "project.json",
    "unconverted": "unconverted_formulas.csv", "refused": "refused.csv", "preview": "preview.html",
}  # fmt: skip


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
    from saber_resources.label_studio import LabelStudioError

    try:
        with holding_home(data_home(), f"saber study {args.action}"):
            return act(args)
    except LabelStudioError as exc:  # the server's answer, never the key
        print(f"saber: {exc}", file=sys.stderr)
        return 2


def act(args) -> int:
    cfg = load_config(args.config)
    folder = Path(args.study_dir) if args.study_dir else Outputs.of(cfg).human_study
    if args.action == "export":
        return export(args, cfg, folder)
    if args.action == "push":
        return push(folder)
    from saber_resources.label_studio import LabelStudio

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


def benchmark_ratings(path: Path):
    """(ratings: domain, query_id, candidate_id, rating; texts: id -> (problem, solution)) of an
    exchange-format benchmark."""
    import polars as pl

    from saber_assets.benchmark.data import Benchmark

    bench = Benchmark.read(path)
    docs = bench.documents["id"].to_list()
    rows = [
        (domains[0] if domains else None, q, docs[c], r)
        for q, cands, scores, domains in bench.queries.select(
            "id", "candidates", "relevance_scores", "domains"
        ).iter_rows()
        for c, r in zip(cands, scores, strict=True)
    ]
    ratings = pl.DataFrame(
        rows, schema=["domain", "query_id", "candidate_id", "rating"], orient="row"
    )
    texts = {}
    for frame in (bench.documents, bench.queries):
        for i, p, s in frame.select("id", "problem", "solution").iter_rows():
            texts[i] = (p, s)
    return ratings, texts


def export(args, cfg, folder: Path) -> int:
    import polars as pl

    from saber_assets.study.human_study import (
        INSTRUCTIONS,
        label_config,
        sample_study,
        study_tasks,
    )

    if folder.exists() and any(folder.iterdir()) and not args.force:
        raise ValueError(
            f"{folder} already holds a study (its labels would no longer match): pass --force "
            "to replace it, or --study-dir for a new one"
        )
    bench = Outputs.of(cfg).benchmark_folder(args.benchmark, scored=False)
    ratings, texts = benchmark_ratings(bench)
    seed = cfg.seed if args.seed is None else args.seed
    name = args.name or cfg.name
    sample = sample_study(ratings, args.pairs, seed, args.double_share, study=name)
    tasks, unconverted = study_tasks(sample.pairs, texts)
    folder.mkdir(parents=True, exist_ok=True)
    write_whole(folder / FILES["pairs"], sample.pairs)
    write_whole(folder / FILES["tasks"], json.dumps(tasks, ensure_ascii=False))
    write_whole(folder / FILES["config"], label_config())
    write_whole(folder / FILES["instructions"], INSTRUCTIONS)
    write_whole(folder / FILES["unconverted"], pl.DataFrame(
        unconverted, schema={"task": pl.String, "item": pl.String, "latex": pl.String,
                             "reason": pl.String},
    ))  # fmt: skip
    write_whole(folder / FILES["preview"], preview_html(tasks[:5]))
    counts = sample.pairs.group_by("stratum").len().sort("stratum").rows()
    from importlib.metadata import version

    meta = {
        "study": name, "seed": seed, "pairs": sample.pairs.height,
        "double_share": args.double_share,
        "two_annotator_tasks": int((sample.pairs["annotators"] == 2).sum()),
        "strata": {stratum_name(s): n for s, n in counts}, "notes": sample.notes,
        "benchmark": str(bench.resolve()), "config": cfg.name,
        "formulas_unconverted": len(unconverted), "latex2mathml": version("latex2mathml"),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }  # fmt: skip
    write_whole(folder / FILES["study"], json.dumps(meta, indent=2, ensure_ascii=False))
    print(f"saber study export: {meta['pairs']} pairs ({meta['two_annotator_tasks']} for two "
          f"annotators), strata {meta['strata']}, seed {seed} -> {folder}")  # fmt: skip
    for note in sample.notes:
        print(f"  note: {note}")
    print(f"  formulas left as LaTeX source: {len(unconverted)} ({FILES['unconverted']})")
    return 0


def stratum_name(lower: int) -> str:
    from saber_assets.study.human_study import STRATA

    upper = next((s for s in STRATA if s > lower), None)
    return f"Δr in [{lower}, {upper})" if upper is not None else f"Δr >= {lower}"


def preview_html(tasks: list[dict]) -> str:
    """The first tasks as one page, to look at without Label Studio."""
    from saber_assets.site.math_html import CSS

    body = "".join(
        f"<section><h3>{t['data']['saber_task']}</h3><h4>Query</h4>{t['data']['query_html']}"
        f"<div style='display:flex;gap:2em'><div style='flex:1'><h4>Candidate 1</h4>"
        f"{t['data']['first_html']}</div><div style='flex:1'><h4>Candidate 2</h4>"
        f"{t['data']['second_html']}</div></div></section><hr>"
        for t in tasks
    )
    return f"<!doctype html><meta charset=utf-8><style>{CSS}</style><body>{body}</body>"


def read_study(folder: Path):
    import polars as pl

    if not (folder / FILES["pairs"]).exists():
        raise FileNotFoundError(f"no study in {folder}: run `saber study export` first")
    meta = json.loads((folder / FILES["study"]).read_text())
    return pl.read_parquet(folder / FILES["pairs"]), meta


def project_title(meta: dict) -> str:
    return f"saber study: {meta['study']}"


def push(folder: Path) -> int:
    from saber_resources.label_studio import LabelStudio

    _, meta = read_study(folder)
    tasks = json.loads((folder / FILES["tasks"]).read_text())
    ls = LabelStudio.from_env()
    project, created = ls.upsert_project(
        project_title(meta), (folder / FILES["config"]).read_text(),
        (folder / FILES["instructions"]).read_text(),
    )  # fmt: skip
    have = {t["data"].get("saber_task") for t in ls.tasks(project["id"])}
    new = [t for t in tasks if t["data"]["saber_task"] not in have]
    ls.import_tasks(project["id"], new)
    write_whole(folder / FILES["project"], json.dumps(
        {"url": ls.url, "id": project["id"], "title": project["title"],
         "label_studio": ls.version(),
         "pushed_at": datetime.now(UTC).isoformat(timespec="seconds")}, indent=2,
    ))  # fmt: skip
    print(f"saber study push: project {project['id']} ({'created' if created else 'updated'}) "
          f"at {ls.url}/projects/{project['id']}: {len(new)} tasks added, "
          f"{len(tasks) - len(new)} already there")  # fmt: skip
    return 0


def read_project(folder: Path, ls) -> dict:
    path = folder / FILES["project"]
    if path.exists():
        return json.loads(path.read_text())
    _, meta = read_study(folder)
    found = ls.find_project(project_title(meta))
    if found is None:
        raise FileNotFoundError(f"no project {project_title(meta)!r} at {ls.url}: push it first")
    return found


def import_labels(cfg, folder: Path, export_json, bench: str | None, emails) -> int:
    """Read an export against the study and the benchmark; store what is valid; refused labels
    go to refused.csv with their reasons (and the exit status says so)."""
    from saber_assets.pipeline import open_stores
    from saber_assets.study.human_study import (
        labels_from_export,
        store_labels,
        stored_annotators,
    )

    pairs, meta = read_study(folder)
    ratings, _ = benchmark_ratings(
        Outputs.of(cfg).benchmark_folder(bench or meta.get("benchmark"), scored=False)
    )
    rated = set(ratings.select("query_id", "candidate_id").iter_rows())
    db = open_stores(cfg)
    stored = stored_annotators(db, pairs["task_id"].to_list())
    labels, refused = labels_from_export(export_json, pairs, rated, emails, stored)
    new, already = store_labels(db, labels)
    write_whole(folder / FILES["refused"], refused)
    print(f"saber study: {labels.height} labels read: {new} new, {already} already stored; "
          f"{labels['annotator'].n_unique()} annotators")  # fmt: skip
    if refused.height:
        print(f"  {refused.height} refused (reasons in {folder / FILES['refused']}):",
              file=sys.stderr)  # fmt: skip
        for r in refused.head(5).iter_rows(named=True):
            print(f"    task {r['task']}: {r['reason']}", file=sys.stderr)
        return 1
    return 0
