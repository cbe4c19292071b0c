"""The tiny config: a 30-problem source of its own (and a bad row) beside a MATH sample, and
its two-retriever registry; the config the suite's shared builds and the faults rehearsal start
from."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def write_jsonl(path: Path, rows: list, raw_lines: list[bytes] | None = None) -> Path:
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows) + b"".join(raw_lines or [])
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def write_tiny_inputs(root: Path) -> None:
    """The tiny config's own source (30 problems and a bad row) and its retriever registry, in
    ``root``."""
    rows = [
        {
            "id": i,
            "problem": f"Problem {i}: find the {i}-th prime number and prove it.",
            "solution": f"Sieve up to {i * 10}.",
        }
        for i in range(30)
    ]
    rows.append({"id": 99, "problem": "", "solution": "orphan"})
    write_jsonl(root / "mine.jsonl", rows)
    (root / "retrievers.yaml").write_text(
        "retrievers:\n  - {name: bm25, kind: bm25}\n  - {name: jaccard-no-tok, kind: jaccard, params: {tokenizer: plain}}\n"
    )


def tiny_doc(root: Path, **extra) -> dict:
    """The tiny config (inputs in ``root``, written by ``write_tiny_inputs``); a section in
    ``extra`` replaces its own."""
    doc = {
        "name": "tiny",
        "corpus": {
            "sources": [
                {
                    "name": "mine",
                    "path": str(root / "mine.jsonl"),
                    "fields": {"id": "id", "problem": "problem", "solution": "solution"},
                },
                {"name": "math", "bundled": "math", "sample_size": 300},
            ]
        },
        "signals": {"rows_per_shard": 128, "shards": 2, "floor_topic": 0.3, "floor_summary": 0.1},
        "candidates": {
            "queries_per_domain": 2,
            "candidates_per_group": 3,
            "quota_per_domain": 3,
            "topic_threshold": 0.5,
            "summary_threshold": 0.2,
        },
        "tournament": {"rounds": 4},
        "retrievers": {"registry": str(root / "retrievers.yaml")},
        "leaderboard": {"bootstrap_resamples": 100},
    }
    return {**doc, **extra}
