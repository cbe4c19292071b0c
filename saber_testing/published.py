"""A folder shaped like the published SABER-Math documents (``INSAIT-Institute/SaberMath-documents``
as ``snapshot_download`` leaves it: a dataset card and ``data/train-*.parquet`` shards holding
``problem`` and ``solution``), made from the bundled MATH problems."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from saber_assets.config import DATA_DIR

CARD = """---
license: cc-by-4.0
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
---

# SaberMath-documents (test fixture)
"""


def published_rows(n: int, start: int = 0) -> list[dict[str, str]]:
    """``n`` bundled MATH problems (problem, solution), from the ``start``-th on."""
    rows = []
    with gzip.open(DATA_DIR / "corpora" / "math.jsonl.gz", "rt", encoding="utf-8") as f:
        for k, line in enumerate(f):
            if k >= start + n:
                break
            if k >= start:
                r = json.loads(line)
                rows.append({"problem": r["problem"], "solution": r["solution"]})
    return rows


def write_published_documents(folder: Path, rows: list[dict[str, str]], shards: int = 2) -> Path:
    """``rows`` as the published documents' snapshot folder, split over ``shards`` files in row
    order (``train-00000-of-00002.parquet``, …)."""
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text(CARD, encoding="utf-8")
    size = -(-len(rows) // shards)
    schema = pa.schema([("problem", pa.large_string()), ("solution", pa.large_string())])
    for k in range(shards):
        part = rows[k * size : (k + 1) * size]
        table = pa.Table.from_pylist(part, schema=schema)
        pq.write_table(table, folder / "data" / f"train-{k:05d}-of-{shards:05d}.parquet")
    return folder
