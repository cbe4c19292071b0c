"""The benchmark in the IR ecosystem's formats: written, and read back.

- BEIR: ``corpus.jsonl`` (_id, title, text), ``queries.jsonl`` (_id, text), ``qrels/test.tsv``
  (query-id, corpus-id, score). BEIR wants integer grades: the continuous rating r ∈ [0, 5] is
  rounded half up (⌊r + ½⌋, so 2.5 → 3); the exact ratings are in ``qrels/test.continuous.tsv``.
  Every record also carries ``metadata`` (problem, solution; a query's domains) so that
  ``read_beir`` rebuilds the benchmark exactly.
- TREC: ``qrels.txt`` (qid 0 docid grade, the same integer rounding, for trec_eval) and
  ``qrels.continuous.txt`` (the ratings themselves, for tools that take graded floats).
- MTEB (reranking, v2 layout): BEIR's three files plus ``top_ranked.jsonl`` — each query's
  candidate list, the documents a reranker must order.

Texts follow a setting: queries are statements (or statement + solution for full-full),
documents statement + solution (or statements for statement-statement), as the leaderboard shows
them. An outside system's TREC run file is scored in ``runs/outside.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from saber_assets.benchmark.data import QUERY_SCHEMA, Benchmark, BenchmarkFormatError
from saber_assets.benchmark.texts import setting_texts
from saber_assets.outputs import write_whole, written_whole

FORMATS = ("beir", "trec", "mteb")


def integer_grade(rating: float) -> int:
    """Round half up into 0..5 (BEIR and trec_eval want integers)."""
    return int(min(5, max(0, math.floor(rating + 0.5))))


def _qrels(bench: Benchmark) -> list[tuple[str, str, float]]:
    doc_ids = bench.documents["id"].to_list()
    return [
        (qid, doc_ids[c], float(r))
        for qid, cands, rels in bench.queries.select(
            "id", "candidates", "relevance_scores"
        ).iter_rows()
        for c, r in zip(cands, rels, strict=True)
    ]


def _jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with written_whole(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _write_beir_files(bench: Benchmark, out: Path, setting: str) -> None:
    _jsonl(
        out / "corpus.jsonl",
        (
            {"_id": d, "title": "", "text": setting_texts(setting, p, s, as_query=False),
             "metadata": {"problem": p, "solution": s}}
            for d, p, s in bench.documents.select("id", "problem", "solution").iter_rows()
        ),
    )  # fmt: skip
    _jsonl(
        out / "queries.jsonl",
        (
            {"_id": q, "text": setting_texts(setting, p, s, as_query=True),
             "metadata": {"problem": p, "solution": s, "domains": list(ds)}}
            for q, p, s, ds in bench.queries.select("id", "problem", "solution", "domains").iter_rows()
        ),
    )  # fmt: skip
    qrels = _qrels(bench)
    (out / "qrels").mkdir(exist_ok=True)
    header = "query-id\tcorpus-id\tscore\n"
    write_whole(
        out / "qrels" / "test.tsv",
        header + "".join(f"{q}\t{d}\t{integer_grade(r)}\n" for q, d, r in qrels),
    )
    write_whole(
        out / "qrels" / "test.continuous.tsv",
        header + "".join(f"{q}\t{d}\t{r!r}\n" for q, d, r in qrels),
    )


def export(bench: Benchmark, fmt: str, out: Path, setting: str = "statement-full") -> list[Path]:
    """Write ``bench`` in ``fmt`` under ``out``; returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "beir":
        _write_beir_files(bench, out, setting)
    elif fmt == "mteb":
        _write_beir_files(bench, out, setting)
        doc_ids = bench.documents["id"].to_list()
        _jsonl(
            out / "top_ranked.jsonl",
            (
                {"query-id": q, "corpus-ids": [doc_ids[c] for c in cands]}
                for q, cands in bench.queries.select("id", "candidates").iter_rows()
            ),
        )
    elif fmt == "trec":
        qrels = _qrels(bench)
        write_whole(
            out / "qrels.txt", "".join(f"{q} 0 {d} {integer_grade(r)}\n" for q, d, r in qrels)
        )
        write_whole(
            out / "qrels.continuous.txt", "".join(f"{q} 0 {d} {r!r}\n" for q, d, r in qrels)
        )
    else:
        raise ValueError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    write_whole(
        out / "manifest.json",
        json.dumps(
            {**bench.manifest, "exported_as": fmt, "setting": setting}, indent=2, default=str
        ),
    )
    return sorted(p for p in out.rglob("*") if p.is_file())


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise BenchmarkFormatError(f"{path}: line {n}: {exc.msg}") from None
    return rows


def read_qrels(path: Path) -> list[tuple[str, str, float]]:
    """A BEIR ``.tsv`` (with header) or a TREC qrels file (qid iter docid grade)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts or (n == 1 and parts[0] == "query-id"):
                continue
            if len(parts) not in (3, 4):
                raise BenchmarkFormatError(f"{path}: line {n}: expected 3 or 4 fields")
            q, d, r = (
                (parts[0], parts[1], parts[2])
                if len(parts) == 3
                else (parts[0], parts[2], parts[3])
            )
            try:
                out.append((q, d, float(r)))
            except ValueError:
                raise BenchmarkFormatError(
                    f"{path}: line {n}: grade {r!r} is not a number"
                ) from None
    return out


def read_beir(directory: Path) -> Benchmark:
    """A BEIR (or MTEB) directory as a benchmark: candidates = each query's judged documents in
    qrels order, relevance = the continuous ratings when present, else the integer grades."""
    directory = Path(directory)
    corpus = _read_jsonl(directory / "corpus.jsonl")
    queries = _read_jsonl(directory / "queries.jsonl")
    cont = directory / "qrels" / "test.continuous.tsv"
    qrels = read_qrels(cont if cont.exists() else directory / "qrels" / "test.tsv")
    doc_ids = [d["_id"] for d in corpus]
    row_of = {d: i for i, d in enumerate(doc_ids)}
    judged: dict[str, list[tuple[int, float]]] = {}
    for q, d, r in qrels:
        if d not in row_of:
            raise BenchmarkFormatError(f"{directory}: qrels name document {d!r}, not in the corpus")
        judged.setdefault(q, []).append((row_of[d], r))

    def texts(rec: dict) -> tuple[str, str]:
        meta = rec.get("metadata") or {}
        return meta.get("problem", rec.get("text", "")), meta.get("solution", "")

    documents = pl.DataFrame(
        [(d["_id"], *texts(d)) for d in corpus], schema=["id", "problem", "solution"], orient="row"
    )
    rows = []
    for rec in queries:
        pairs = judged.get(rec["_id"], [])
        rows.append(
            {
                "id": rec["_id"],
                "problem": texts(rec)[0],
                "solution": texts(rec)[1],
                "candidates": [c for c, _ in pairs],
                "relevance_scores": [r for _, r in pairs],
                "domains": list((rec.get("metadata") or {}).get("domains", [])),
            }
        )
    manifest_path = directory / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest = {k: v for k, v in manifest.items() if k not in ("exported_as", "setting")}
    bench = Benchmark(pl.DataFrame(rows, schema=QUERY_SCHEMA), documents, manifest)
    bench.validate(str(directory))
    return bench
