"""The human study's folder (``saber study``): pairs sampled by Δr from a built benchmark,
written as a Label Studio project (``export``), pushed into a running Label Studio (``push``),
and people's labels read back against the study and the benchmark into the stores
(``import_labels``), the refused ones kept with their reasons. The folder holds the sampled pairs
with their strata and shown order, the tasks, the labelling config, the instructions, what was
pushed where, every raw export pulled and the labels refused."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.lib.math_html import CSS
from saber_assets.outputs import Outputs, write_whole
from saber_assets.pipeline import open_stores
from saber_assets.study.human_study import (
    INSTRUCTIONS,
    STRATA,
    label_config,
    labels_from_export,
    sample_study,
    store_labels,
    stored_annotators,
    study_tasks,
)
from saber_resources.label_studio import LabelStudio

FILES = {
    "pairs": "pairs.parquet", "tasks": "tasks.json", "config": "label_config.xml",
    "instructions": "instructions.html", "study": "study.json", "project": "project.json",
    "unconverted": "unconverted_formulas.csv", "refused": "refused.csv", "preview": "preview.html",
}  # fmt: skip


def export(cfg, folder: Path, pairs: int, double_share: float, seed: int | None = None,
           name: str | None = None, benchmark: str | None = None, force: bool = False) -> int:  # fmt: skip
    """Sample ``pairs`` pairs by Δr from the benchmark and write the Label Studio project."""
    if folder.exists() and any(folder.iterdir()) and not force:
        raise ValueError(
            f"{folder} already holds a study (its labels would no longer match): pass --force "
            "to replace it, or --study-dir for a new one"
        )
    bench = Outputs.of(cfg).benchmark_folder(benchmark, scored=False)
    ratings, texts = benchmark_ratings(bench)
    seed = cfg.seed if seed is None else seed
    name = name or cfg.name
    sample = sample_study(ratings, pairs, seed, double_share, study=name)
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
    meta = {
        "study": name, "seed": seed, "pairs": sample.pairs.height,
        "double_share": double_share,
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


def benchmark_ratings(path: Path):
    """(ratings: domain, query_id, candidate_id, rating; texts: id -> (problem, solution)) of an
    exchange-format benchmark."""
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


def stratum_name(lower: int) -> str:
    upper = next((s for s in STRATA if s > lower), None)
    return f"Δr in [{lower}, {upper})" if upper is not None else f"Δr >= {lower}"


def preview_html(tasks: list[dict]) -> str:
    """The first tasks as one page, to look at without Label Studio."""
    body = "".join(
        f"<section><h3>{t['data']['saber_task']}</h3><h4>Query</h4>{t['data']['query_html']}"
        f"<div style='display:flex;gap:2em'><div style='flex:1'><h4>Candidate 1</h4>"
        f"{t['data']['first_html']}</div><div style='flex:1'><h4>Candidate 2</h4>"
        f"{t['data']['second_html']}</div></div></section><hr>"
        for t in tasks
    )
    return f"<!doctype html><meta charset=utf-8><style>{CSS}</style><body>{body}</body>"


def read_study(folder: Path):
    if not (folder / FILES["pairs"]).exists():
        raise FileNotFoundError(f"no study in {folder}: run `saber study export` first")
    meta = json.loads((folder / FILES["study"]).read_text())
    return pl.read_parquet(folder / FILES["pairs"]), meta


def project_title(meta: dict) -> str:
    return f"saber study: {meta['study']}"


def push(folder: Path) -> int:
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
