import gzip
import json
import os
from pathlib import Path

import pytest
import yaml

# Before anything imports numba: compile once into the checkout's ignored cache.
os.environ.setdefault(
    "NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".cache" / "numba")
)
os.environ.setdefault("TQDM_DISABLE", "1")


def write_jsonl(path: Path, rows: list, raw_lines: list[bytes] | None = None) -> Path:
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows) + b"".join(raw_lines or [])
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def make_config(tmp_path):
    """Write a pipeline config YAML into tmp_path and return its path."""

    def _make(**cfg) -> Path:
        cfg.setdefault("name", "test")
        path = tmp_path / f"{cfg['name']}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    return _make
