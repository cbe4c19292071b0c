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


@pytest.fixture
def tiny_config(tmp_path, make_config, monkeypatch):
    """A 330-problem corpus (a JSONL source with a bad row + a MATH sample) through every stage."""
    monkeypatch.setenv("SABER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    rows = [
        {
            "id": i,
            "problem": f"Problem {i}: find the {i}-th prime number and prove it.",
            "solution": f"Sieve up to {i * 10}.",
        }
        for i in range(30)
    ]
    rows.append({"id": 99, "problem": "", "solution": "orphan"})
    src = write_jsonl(tmp_path / "mine.jsonl", rows)
    registry = tmp_path / "retrievers.yaml"
    registry.write_text(
        "retrievers:\n  - {name: bm25, kind: bm25}\n  - {name: jaccard-no-tok, kind: jaccard, params: {tokenizer: plain}}\n"
    )

    def _make(**extra):
        corpus = {
            "sources": [
                {
                    "name": "mine",
                    "path": str(src),
                    "fields": {"id": "id", "problem": "problem", "solution": "solution"},
                },
                {"name": "math", "bundled": "math", "sample_size": 300},
            ]
        }
        small = {
            "signals": {
                "rows_per_shard": 128,
                "shards": 2,
                "floor_topic": 0.3,
                "floor_summary": 0.1,
            },
            "candidates": {
                "queries_per_domain": 2,
                "candidates_per_group": 3,
                "quota_per_domain": 3,
                "topic_threshold": 0.5,
                "summary_threshold": 0.2,
            },
            "tournament": {"rounds": 4},
            "leaderboard": {"registry": str(registry), "bootstrap_resamples": 100},
        }
        return make_config(name="tiny", corpus=corpus, **small, **extra)

    return _make


def _pg_bin(name: str) -> str | None:
    import glob
    import shutil

    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


@pytest.fixture(scope="session")
def postgres_dsn():
    """A throw-away PostgreSQL server on 127.0.0.1 (own data dir, a free port), stopped at the end.
    As root the server runs as ``nobody`` (postgres refuses root)."""
    import shutil
    import socket
    import subprocess
    import tempfile

    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL is not installed (.ci/run installs Debian's postgresql)")
    base = Path(tempfile.mkdtemp(prefix="saber-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "nobody")
        as_user = ["runuser", "-u", "nobody", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = base / "data"
    subprocess.run(
        [*as_user, initdb, "-D", str(data), "-U", "saber", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_user,
            pg_ctl,
            "-D",
            str(data),
            "-o",
            f"-p {port} -k {base} -h 127.0.0.1 -c max_connections=200",
            "-l",
            str(base / "log"),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://saber@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def llama_parts():
    """(llama-server binary, SmolLM2 GGUF), or the test is skipped with the reason (built by
    .ci/run: `deploy/llama-server/build.sh`; the model comes with `uv sync`)."""
    from saber_resources.llama_server import ServerUnavailable, bundled_model, server_binary

    try:
        return server_binary(), bundled_model()
    except ServerUnavailable as exc:
        pytest.skip(str(exc))


def _llama_server(parts, embeddings: bool):
    """A real llama.cpp server with the bundled SmolLM2-135M-Instruct on 127.0.0.1, started once
    per session."""
    from saber_resources.llama_server import LlamaServer

    # 2 threads and 4 slots, as a user's 2-core machine runs it (`saber llm-server`)
    with LlamaServer(*parts, embeddings=embeddings) as srv:
        yield srv


@pytest.fixture(scope="session")
def llama_chat(llama_parts):
    yield from _llama_server(llama_parts, embeddings=False)


@pytest.fixture(scope="session")
def llama_embed(llama_parts):
    yield from _llama_server(llama_parts, embeddings=True)
