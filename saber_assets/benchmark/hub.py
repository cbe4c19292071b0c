"""The published SABER-Math layout: two Hugging Face datasets, read as they are and written back.

The paper's benchmark is ``INSAIT-Institute/SaberMath-queries`` (problem, solution, domains,
candidates = row indices into the documents, relevance_scores in [0, 5]) and
``INSAIT-Institute/SaberMath-documents`` (problem, solution), split ``train``, each a snapshot
folder holding a dataset card (``README.md``) and ``data/train-*.parquet``. ``read_snapshots``
turns two such folders into a ``Benchmark`` (exchange format); what the files lack (ids, a
manifest) is derived and said. ``stage_push`` writes a built benchmark back in the same layout,
with a card saying how it was built, and ``push`` uploads the two folders.

Nothing here imports Dagster; the Hub is reached only through ``huggingface_hub`` and only by
``fetch_snapshot`` / ``push`` (tests pass fakes).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from saber_assets.benchmark.data import (
    QUERY_SCHEMA,
    Benchmark,
    BenchmarkFormatError,
    verification_line,
)
from saber_assets.corpus.sources import snapshot_shards
from saber_assets.outputs import copy_regular_tree
from saber_resources.yaml_text import load_yaml

QUERIES_REPO = "INSAIT-Institute/SaberMath-queries"
DOCUMENTS_REPO = "INSAIT-Institute/SaberMath-documents"
SPLIT = "train"
# the columns of the published tables (an ``id`` column is kept when present, never required)
PUBLISHED = {
    "queries": ["problem", "solution", "domains", "candidates", "relevance_scores"],
    "documents": ["problem", "solution"],
}
# the paper's domain order (Table 1's columns); a benchmark naming other domains keeps its own
PAPER_DOMAINS = ["Algebra", "Geometry", "Number Theory", "Combinatorics", "Calculus and Analysis"]
_SHA = re.compile(r"^[0-9a-f]{40}$")


def snapshot_files(folder: Path, split: str = SPLIT) -> list[Path]:
    """The split's Parquet shards of a snapshot folder, in shard order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BenchmarkFormatError(f"{folder}: not a folder (a dataset snapshot folder is needed)")
    files = snapshot_shards(folder, split)
    if not files:
        raise BenchmarkFormatError(
            f"{folder}: no data/{split}-*.parquet (a snapshot_download folder of the dataset "
            "holds its card README.md and data/train-*.parquet)"
        )
    return files


def read_card(folder: Path) -> dict:
    """The dataset card's YAML header (licence, configs, features), or {} without a card."""
    card = Path(folder) / "README.md"
    if not card.exists():
        return {}
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return {}
    head = text.split("---", 2)
    try:
        meta = load_yaml(head[1], str(card)) if len(head) == 3 else None
    except (yaml.YAMLError, ValueError) as exc:
        raise BenchmarkFormatError(f"{card}: unreadable card header: {exc}") from None
    return meta if isinstance(meta, dict) else {}


def _table_schema(table: str) -> dict:
    if table == "queries":
        return {k: v for k, v in QUERY_SCHEMA.items() if k != "id"}
    return {"problem": pl.String, "solution": pl.String}


def read_table(files: list[Path], table: str) -> tuple[pl.DataFrame, list[tuple[str, int]]]:
    """The shards of one table concatenated, cast to the exchange types (``datasets`` writes
    strings as ``string`` or ``large_string``, grades as float32 or float64, indices as int32 or
    int64: all are accepted); a missing column or an uncastable one names the file and field."""
    schema = _table_schema(table)
    frames, sources = [], []
    for f in files:
        try:
            frame = pl.read_parquet(f)
        except Exception as exc:
            raise BenchmarkFormatError(f"{f}: unreadable Parquet: {exc}") from None
        missing = [c for c in schema if c not in frame.columns]
        if missing:
            raise BenchmarkFormatError(
                f"{f}: lacks columns {missing} (the published {table} have {PUBLISHED[table]})"
            )
        cols = (["id"] if "id" in frame.columns else []) + list(schema)
        try:
            frame = frame.select(cols).cast(
                {**schema, **({"id": pl.String} if "id" in cols else {})}
            )
        except Exception as exc:
            bad = next(
                (c for c in schema if not _castable(frame[c], schema[c])), "one of " + str(cols)
            )
            raise BenchmarkFormatError(
                f"{f}: field {bad!r} is {frame[bad].dtype if bad in frame.columns else '?'}, "
                f"not castable to {schema.get(bad)}: {str(exc).splitlines()[0]}"
            ) from None
        frames.append(frame)
        sources.append((str(f), frame.height))
    out = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    if "id" in out.columns and out["id"].null_count():
        out = out.drop("id")  # some shards without ids: derive all of them, consistently
    return out, sources


def _castable(series: pl.Series, dtype) -> bool:
    try:
        series.cast(dtype)
        return True
    except Exception:
        return False


def revision_of(folder: Path) -> str | None:
    """The commit a ``snapshot_download`` folder holds (its name under ``snapshots/``), if any."""
    name = Path(folder).resolve().name
    return name if _SHA.match(name) and Path(folder).resolve().parent.name == "snapshots" else None


def read_snapshots(
    queries_dir: Path,
    documents_dir: Path,
    origin: dict[str, dict] | None = None,
) -> Benchmark:
    """The published layout as a validated ``Benchmark``; ``origin`` gives each table's repo and
    resolved revision (``{"queries": {"repo": ..., "revision": ...}, "documents": ...}``)."""
    origin = origin or {}
    tables, sources, provenance = {}, {}, {}
    for table, folder in (("queries", queries_dir), ("documents", documents_dir)):
        files = snapshot_files(Path(folder))
        tables[table], sources[table] = read_table(files, table)
        card = read_card(Path(folder))
        given = origin.get(table, {})
        provenance[table] = {
            "repo": given.get("repo"),
            "revision": given.get("revision") or revision_of(Path(folder)),
            "folder": str(Path(folder)),
            "files": [Path(f).relative_to(Path(folder)).as_posix() for f in files],
            "rows": tables[table].height,
            "card": (Path(folder) / "README.md").exists(),
            "license": card.get("license"),
        }
    named = tables["queries"]["domains"].explode().drop_nulls().to_list()
    # the paper's domains in Table 1's order; other names in their order of appearance
    domains = (
        [d for d in PAPER_DOMAINS if d in set(named)]
        if set(named) <= set(PAPER_DOMAINS)
        else list(dict.fromkeys(named))
    )
    manifest = {
        "name": "sabermath" if _is_published(provenance) else "hub-layout",
        "source": "huggingface-datasets",
        "hub": provenance,
        "domains": domains,
        "benchmark_id": pulled_benchmark_id(provenance),
        "derived": ["manifest: not in the published files, written from the snapshots read"],
    }
    bench = Benchmark(tables["queries"], tables["documents"], manifest, sources)
    bench.validate(str(queries_dir))
    return bench


def _is_published(provenance: dict) -> bool:
    return (
        provenance["queries"].get("repo") == QUERIES_REPO
        and provenance["documents"].get("repo") == DOCUMENTS_REPO
    )


def pulled_benchmark_id(provenance: dict) -> str:
    """``repo@revision`` of both tables (``local`` where a folder's revision is unknown)."""
    parts = []
    for table in ("queries", "documents"):
        p = provenance[table]
        repo = p.get("repo") or Path(p["folder"]).name
        parts.append(f"{repo}@{p.get('revision') or 'local'}")
    return " + ".join(parts)


class HubUnavailable(RuntimeError):
    """The Hub could not be reached (offline, unknown repo, no access): one line, naming the repo."""


def fetch_snapshot(repo: str, revision: str | None) -> tuple[Path, str]:
    """Download (or reuse from the cache) one dataset's card and Parquet files; returns the folder
    and the commit it resolved to."""
    try:
        from huggingface_hub import HfApi, snapshot_download

        sha = HfApi().dataset_info(repo, revision=revision).sha
        folder = snapshot_download(
            repo, repo_type="dataset", revision=sha, allow_patterns=["README.md", "data/*"]
        )
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise HubUnavailable(
            f"cannot fetch the dataset {repo!r} from the Hugging Face Hub ({type(exc).__name__}: "
            f"{first}); offline, pass two snapshot folders with --queries-dir and --documents-dir"
        ) from None
    return Path(folder), str(sha)


def pull(
    out: Path,
    queries_dir: Path | None = None,
    documents_dir: Path | None = None,
    revisions: dict[str, str] | None = None,
    repos: tuple[str, str] = (QUERIES_REPO, DOCUMENTS_REPO),
    fetch: Callable[[str, str | None], tuple[Path, str]] = fetch_snapshot,
) -> Benchmark:
    """The published benchmark (fetched, or from two snapshot folders) written under ``out`` in
    the exchange format."""
    revisions = revisions or {}
    unknown = set(revisions) - {"queries", "documents"}
    if unknown:
        raise ValueError(f"--revision takes queries=SHA or documents=SHA, not {sorted(unknown)}")
    if (queries_dir is None) != (documents_dir is None):
        raise ValueError("give both --queries-dir and --documents-dir, or neither")
    origin = {}
    folders = {"queries": queries_dir, "documents": documents_dir}
    for table, repo in zip(("queries", "documents"), repos, strict=True):
        if folders[table] is None:
            folders[table], sha = fetch(repo, revisions.get(table))
            origin[table] = {"repo": repo, "revision": sha}
        else:
            origin[table] = {"repo": repo, "revision": revisions.get(table)}
    bench = read_snapshots(folders["queries"], folders["documents"], origin)
    bench.write(Path(out))
    return bench


# ------------------------------------------------------------------------------- push


def _features(table: str) -> dict:
    """The tables' ``datasets`` features, for the card and the Parquet schema metadata."""
    string = {"dtype": "string", "_type": "Value"}
    feats = {"id": string, "problem": string, "solution": string}
    if table == "queries":
        feats |= {
            "domains": {"feature": string, "_type": "Sequence"},
            "candidates": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "Sequence"},
            "relevance_scores": {
                "feature": {"dtype": "float64", "_type": "Value"},
                "_type": "Sequence",
            },
        }
    return feats


ARROW = {
    "queries": pa.schema(
        [
            ("id", pa.string()),
            ("problem", pa.string()),
            ("solution", pa.string()),
            ("domains", pa.list_(pa.string())),
            ("candidates", pa.list_(pa.int64())),
            ("relevance_scores", pa.list_(pa.float64())),
        ]
    ),
    "documents": pa.schema(
        [("id", pa.string()), ("problem", pa.string()), ("solution", pa.string())]
    ),
}


def write_table(frame: pl.DataFrame, table: str, path: Path) -> None:
    """One Parquet shard as ``datasets`` writes it: plain Arrow types and the features in the
    schema's ``huggingface`` metadata, so ``load_dataset`` reads the same types back."""
    schema = ARROW[table]
    arrow = frame.select(schema.names).to_arrow().cast(schema)
    meta = {"info": {"features": _features(table)}}
    arrow = arrow.replace_schema_metadata({"huggingface": json.dumps(meta)})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, path)


def card(bench: Benchmark, table: str, repos: dict[str, str]) -> str:
    """The dataset card: the YAML header ``datasets`` reads, then how the benchmark was built."""
    m = bench.manifest
    header = {
        "license": m.get("license", "other"),
        "task_categories": ["text-retrieval"],
        "tags": ["math", "information-retrieval", "sabermath", "saber"],
        "configs": [
            {"config_name": "default", "data_files": [{"split": SPLIT, "path": f"data/{SPLIT}-*"}]}
        ],
        "dataset_info": {
            "features": [{"name": k, **_dtype_entry(v)} for k, v in _features(table).items()],
            "splits": [{"name": SPLIT, "num_examples": getattr(bench, table).height}],
        },
    }
    other = "documents" if table == "queries" else "queries"
    t = m.get("thresholds") or {}
    lines = [
        f"# {repos[table]}",
        "",
        f"The {table} of a SABER-Math-style benchmark for mathematical information retrieval, "
        f"built with saber. Its {other} are `{repos[other]}`."
        + (
            " `candidates` holds row indices into the documents' `train` split; "
            "`relevance_scores` are Bradley-Terry strengths rescaled to [0, 5], aligned with them."
            if table == "queries"
            else " A query's `candidates` are row indices into this table."
        ),
        "",
        "## How it was built",
        "",
        f"- corpus version: {m.get('corpus_version', 'unknown')}",
        f"- ontology: {m.get('ontology', 'unknown')}",
        f"- judge: backend `{m.get('judge_backend', 'unknown')}`, model `{m.get('judge_model')}`"
        + (
            " (the CPU backend: a heuristic stand-in, not an LLM judge)"
            if m.get("judge_backend") == "cpu"
            else ""
        ),
        f"- thresholds: topic {t.get('topic')}, summary {t.get('summary')} ({t.get('source')})",
        f"- candidates per group: {m.get('candidates_per_group')}",
        f"- tournament: {json.dumps(m.get('tournament'), default=str)}",
        f"- seed: {m.get('seed')}; {m.get('candidate_order', '')}",
        f"- domains: {', '.join(bench.domain_list())}",
        f"- created: {m.get('created', 'unknown')}",
        "",
        *checks_section(bench),
        "## Licences of the sources",
        "",
        *[f"- {s}" for s in (m.get("source_licences") or ["see the corpus sources' own licences"])],
        "",
        "## Reading it",
        "",
        "`saber pull OUT --queries-dir Q --documents-dir D` (or by repository name) reads both "
        "tables back; the SABER-Math reference evaluation reads the same columns.",
    ]
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + "\n".join(lines) + "\n"


def checks_section(bench: Benchmark) -> list[str]:
    """The card's word on the build's checks: a failed one is said first and plainly (it was
    published only because the publisher asked for it)."""
    checks = bench.manifest.get("checks") or []
    failed = bench.failed_checks()
    verified = [verification_line(bench.manifest), ""]
    if failed:
        return [
            "## Failed checks: published anyway",
            "",
            "The publisher pushed this benchmark although these checks failed; its grades or "
            "numbers may reflect them:",
            "",
            *[f"- {line}" for line in failed],
            "",
            *verified,
        ]
    if checks:
        return [f"Checks: all {len(checks)} passed.", "", *verified]
    return verified


def _dtype_entry(feature: dict) -> dict:
    if feature["_type"] == "Value":
        return {"dtype": feature["dtype"]}
    return {"sequence": feature["feature"]["dtype"]}


def stage_push(
    bench: Benchmark, staging: Path, prefix: str, explorer: Path | None = None
) -> dict[str, Path]:
    """The two dataset folders of ``prefix`` (``OWNER/NAME-queries``, ``OWNER/NAME-documents``)
    under ``staging``; returns repo -> folder. ``explorer``: the built explorer site, published
    under ``explorer/`` of the queries dataset (its pages open from a clone of it)."""
    if not re.fullmatch(r"[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*", prefix):
        raise ValueError(f"--repo-prefix must be OWNER/NAME, not {prefix!r}")
    repos = {"queries": f"{prefix}-queries", "documents": f"{prefix}-documents"}
    out = {}
    for table in ("queries", "documents"):
        folder = Path(staging) / repos[table].replace("/", "__")
        write_table(
            getattr(bench, table), table, folder / "data" / f"{SPLIT}-00000-of-00001.parquet"
        )
        (folder / "README.md").write_text(card(bench, table, repos), encoding="utf-8")
        out[repos[table]] = folder
    if explorer is not None:
        if not (Path(explorer) / "index.html").exists():
            raise ValueError(f"--explorer {explorer}: no explorer there (index.html)")
        # exactly what the served site serves: its regular files, no link at any depth
        copy_regular_tree(Path(explorer), out[repos["queries"]] / "explorer")
    return out


def push(
    bench: Benchmark,
    staging: Path,
    prefix: str,
    private: bool = True,
    api=None,
    explorer: Path | None = None,
) -> dict[str, str]:
    """Create (or reuse) both dataset repos and upload their folders; returns repo -> commit URL.
    The token comes from the environment only (``HF_TOKEN``), never from arguments or files."""
    folders = stage_push(bench, staging, prefix, explorer)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=os.environ.get("HF_TOKEN") or None)
    done = {}
    for repo, folder in folders.items():
        try:
            api.create_repo(repo, repo_type="dataset", exist_ok=True, private=private)
            info = api.upload_folder(
                repo_id=repo,
                folder_path=str(folder),
                repo_type="dataset",
                commit_message=f"saber push: {bench.manifest.get('name', 'benchmark')}",
            )
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise HubUnavailable(
                f"cannot push {repo!r} to the Hugging Face Hub ({type(exc).__name__}: {first})"
            ) from None
        done[repo] = str(getattr(info, "commit_url", info))
    return done
