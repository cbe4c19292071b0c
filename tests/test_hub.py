"""The published SABER-Math layout: snapshot folders as `snapshot_download` leaves them, read as
they are (good and bad ones), and a built benchmark pushed back through a fake of the Hub API."""

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from saber_assets.benchmark.data import Benchmark, BenchmarkFormatError
from saber_assets.benchmark.hub import (
    DOCUMENTS_REPO,
    QUERIES_REPO,
    HubUnavailable,
    pull,
    push,
    read_snapshots,
)
from saber_assets.cli import main

REPO = Path(__file__).resolve().parent.parent
SHA_Q, SHA_D = "a" * 40, "b" * 40
DOMAINS = ["Algebra", "Geometry", "Number Theory", "Combinatorics", "Calculus and Analysis"]

# the types `datasets` writes for Value("string"), Sequence(Value("int64")), Sequence(Value("float32"))
Q_SCHEMA = pa.schema(
    [
        ("problem", pa.string()),
        ("solution", pa.large_string()),
        ("domains", pa.list_(pa.string())),
        ("candidates", pa.list_(pa.int64())),
        ("relevance_scores", pa.list_(pa.float32())),
    ]
)
D_SCHEMA = pa.schema([("problem", pa.string()), ("solution", pa.string())])


def _docs(n: int = 7) -> dict:
    return {
        "problem": [f"Problem {i}: find $x^{i}$." for i in range(n)],
        "solution": [f"Use the power rule {i} times." for i in range(n)],
    }


def _queries() -> dict:
    return {
        "problem": ["Find all primes $p$ with $p^2+2$ prime.", "Area of a 3-4-5 triangle?"],
        "solution": ["Work modulo 3.", "Heron's formula."],
        "domains": [["Number Theory"], ["Geometry", "Algebra"]],
        "candidates": [[0, 2, 4], [1, 3, 5, 6]],
        "relevance_scores": [[5.0, 0.25, 1.5], [0.0, 3.0, 2.0, 4.75]],
    }


def write_snapshot(root: Path, repo: str, sha: str, shards: list[dict], schema) -> Path:
    """A folder laid out like `snapshot_download`'s: .../snapshots/<sha>/{README.md, data/...}."""
    folder = root / f"datasets--{repo.replace('/', '--')}" / "snapshots" / sha
    (folder / "data").mkdir(parents=True)
    features = {"info": {"features": {n: {"_type": "Value"} for n in schema.names}}}
    for k, cols in enumerate(shards):
        table = pa.table(cols, schema=schema).replace_schema_metadata(
            {"huggingface": json.dumps(features)}
        )
        pq.write_table(table, folder / "data" / f"train-{k:05d}-of-{len(shards):05d}.parquet")
    (folder / "README.md").write_text(
        "---\nlicense: cc-by-4.0\nconfigs:\n- config_name: default\n  data_files:\n"
        "  - split: train\n    path: data/train-*\n---\n\n# card\n"
    )
    return folder


@pytest.fixture
def snapshots(tmp_path):
    docs = _docs()
    q = write_snapshot(tmp_path, QUERIES_REPO, SHA_Q, [_queries()], Q_SCHEMA)
    # the documents in two shards: row indices run across them
    d = write_snapshot(
        tmp_path,
        DOCUMENTS_REPO,
        SHA_D,
        [{k: v[:4] for k, v in docs.items()}, {k: v[4:] for k, v in docs.items()}],
        D_SCHEMA,
    )
    return q, d


def test_published_layout_reads_as_it_is(snapshots, tmp_path):
    q, d = snapshots
    bench = read_snapshots(
        q, d, {"queries": {"repo": QUERIES_REPO}, "documents": {"repo": DOCUMENTS_REPO}}
    )
    assert bench.queries.height == 2 and bench.documents.height == 7
    # ids derived from the rows and said; a candidate index is a document row across shards
    assert bench.queries["id"].to_list() == ["q0", "q1"]
    assert bench.documents["id"].to_list()[5] == "d5"
    assert bench.documents["problem"][6] == "Problem 6: find $x^6$."
    assert any("queries.id" in n for n in bench.manifest["derived"])
    assert any("documents.id" in n for n in bench.manifest["derived"])
    # float32 grades arrive as the exchange format's float64, values kept
    assert bench.queries["relevance_scores"].dtype == pl.List(pl.Float64)
    assert bench.queries["relevance_scores"][1].to_list() == [0.0, 3.0, 2.0, 4.75]
    hub = bench.manifest["hub"]
    # the resolved revision is the snapshot folder's commit when none was given
    assert hub["queries"]["revision"] == SHA_Q and hub["documents"]["revision"] == SHA_D
    assert hub["documents"]["files"] == [
        "data/train-00000-of-00002.parquet",
        "data/train-00001-of-00002.parquet",
    ]
    assert hub["queries"]["license"] == "cc-by-4.0"
    assert bench.manifest["name"] == "sabermath"
    assert bench.manifest["benchmark_id"] == (f"{QUERIES_REPO}@{SHA_Q} + {DOCUMENTS_REPO}@{SHA_D}")
    # the paper's domains in Table 1's order, whatever order the queries name them in
    assert bench.domain_list() == ["Algebra", "Geometry", "Number Theory"]
    # written as the exchange format and read back the same
    out = tmp_path / "out"
    pulled = pull(out, q, d, revisions={"queries": "c" * 40})
    again = Benchmark.read(out)
    assert again.queries.equals(pulled.queries) and again.documents.equals(pulled.documents)
    assert again.manifest["hub"]["queries"]["revision"] == "c" * 40  # the pin wins


def _bad(tmp_path, name, q_cols=None, d_cols=None, q_schema=Q_SCHEMA):
    root = tmp_path / name
    q = write_snapshot(root, QUERIES_REPO, SHA_Q, [q_cols or _queries()], q_schema)
    d = write_snapshot(root, DOCUMENTS_REPO, SHA_D, [d_cols or _docs()], D_SCHEMA)
    return q, d


def test_bad_snapshots_fail_in_one_line_naming_file_row_and_field(tmp_path):
    past = _queries()
    past["candidates"] = [[0, 2, 4], [1, 3, 5, 7]]  # 7 documents: index 7 is past the end
    q, d = _bad(tmp_path, "past", past)
    with pytest.raises(BenchmarkFormatError) as err:
        read_snapshots(q, d)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{q / 'data' / 'train-00000-of-00001.parquet'}: row 1 (query 'q1')")
    assert "candidates holds document indices outside [0, 7): [7]" in msg

    high = _queries()
    high["relevance_scores"] = [[5.0, 0.25, 1.5], [0.0, 5.2, 2.0, 4.75]]
    q, d = _bad(tmp_path, "high", high)
    with pytest.raises(
        BenchmarkFormatError,
        match=r"train-00000-of-00001.parquet: row 1 \(query 'q1'\): relevance_scores\[1\] = 5.19999\d* \(candidate 3\) lies outside \[0, 5\]",
    ):
        read_snapshots(q, d)

    nodomains = {k: v for k, v in _queries().items() if k != "domains"}
    schema = pa.schema([f for f in Q_SCHEMA if f.name != "domains"])
    q, d = _bad(tmp_path, "nocol", nodomains, q_schema=schema)
    with pytest.raises(
        BenchmarkFormatError, match=r"train-00000-of-00001.parquet: lacks columns \['domains'\]"
    ):
        read_snapshots(q, d)

    empty = tmp_path / "empty"
    (empty / "data").mkdir(parents=True)
    with pytest.raises(BenchmarkFormatError, match=r"no data/train-\*.parquet"):
        read_snapshots(empty, d)


def test_pull_cli_offline_names_the_repo_and_reads_folders(snapshots, tmp_path):
    q, d = snapshots
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    res = subprocess.run(
        [sys.executable, "-m", "saber_assets.cli", "pull", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and QUERIES_REPO in lines[0] and "--queries-dir" in lines[0]
    assert main(["pull", str(tmp_path / "o2"), "--queries-dir", str(q), "--documents-dir", str(d),
                 "--revision", f"documents={'e' * 40}"]) == 0  # fmt: skip
    m = Benchmark.read(tmp_path / "o2").manifest
    assert m["hub"]["documents"]["revision"] == "e" * 40
    assert main(["pull", str(tmp_path / "o3"), "--queries-dir", str(q)]) == 2  # both or neither
    assert main(["pull", str(tmp_path / "o3"), "--queries-dir", str(q), "--documents-dir",
                 str(d), "--revision", "main"]) == 2  # fmt: skip


class FakeHub:
    """The two calls `push` makes of `huggingface_hub.HfApi`, into a local folder per repo."""

    def __init__(self, root: Path, fail: bool = False) -> None:
        self.root, self.fail, self.calls = root, fail, []

    def create_repo(self, repo_id, repo_type=None, exist_ok=False, private=None):
        self.calls.append(("create_repo", repo_id, repo_type, exist_ok, private))
        if self.fail:
            raise ConnectionError("Max retries exceeded\nwith url")

    def upload_folder(self, repo_id, folder_path, repo_type=None, commit_message=None):
        import shutil

        self.calls.append(("upload_folder", repo_id, repo_type, commit_message))
        sha = f"{len(self.calls):040d}"
        dest = self.root / f"datasets--{repo_id.replace('/', '--')}" / "snapshots" / sha
        shutil.copytree(folder_path, dest)

        class Info:
            commit_url = f"https://hub.invalid/datasets/{repo_id}/commit/{sha}"

        return Info()


def test_push_writes_both_datasets_and_a_card_that_read_back(tmp_path):
    from tests.test_leaderboard import toy_benchmark

    bench = toy_benchmark()
    bench.manifest.update({"judge_backend": "cpu", "judge_model": None, "seed": 7,
                           "thresholds": {"topic": 0.858, "summary": 0.2, "source": "derived"},
                           "corpus_version": "abc123"})  # fmt: skip
    hub = FakeHub(tmp_path / "hub")
    done = push(bench, tmp_path / "stage", "me/mybench", api=hub)
    assert list(done) == ["me/mybench-queries", "me/mybench-documents"]
    assert [c[0] for c in hub.calls] == ["create_repo", "upload_folder"] * 2
    assert all(c[2] == "dataset" for c in hub.calls)
    snaps = {p.parent.parent.name: p for p in (tmp_path / "hub").glob("*/snapshots/*")}
    q = snaps["datasets--me--mybench-queries"]
    d = snaps["datasets--me--mybench-documents"]
    card = (q / "README.md").read_text()
    assert "me/mybench-documents" in card and "topic 0.858" in card and "seed: 7" in card
    assert "not an LLM judge" in card  # a CPU-judged benchmark says so
    assert "path: data/train-*" in card
    back = read_snapshots(q, d, {"queries": {"repo": "me/mybench-queries"},
                                 "documents": {"repo": "me/mybench-documents"}})  # fmt: skip
    assert back.queries.select("id", "candidates", "relevance_scores", "domains").equals(
        bench.queries.select("id", "candidates", "relevance_scores", "domains")
    )
    assert back.documents.equals(bench.documents)
    # the Parquet types are those `datasets` reads back as Sequence features
    schema = pq.read_schema(q / "data" / "train-00000-of-00001.parquet")
    assert schema.field("candidates").type == pa.list_(pa.int64())
    assert b"huggingface" in schema.metadata
    with pytest.raises(
        HubUnavailable, match=r"^cannot push 'me/x-queries' .*Max retries exceeded\)$"
    ):
        push(bench, tmp_path / "stage2", "me/x", api=FakeHub(tmp_path / "h2", fail=True))
    with pytest.raises(ValueError, match="OWNER/NAME"):
        push(bench, tmp_path / "stage3", "no-owner", api=hub)


def test_push_can_publish_the_explorer_with_the_benchmark(tmp_path):
    from tests.test_leaderboard import toy_benchmark

    site = tmp_path / "explorer"
    (site / "queries").mkdir(parents=True)
    (site / "index.html").write_text("<!doctype html><title>board</title>")
    (site / "queries" / "0.html").write_text("<!doctype html><title>q</title>")
    hub = FakeHub(tmp_path / "hub")
    push(toy_benchmark(), tmp_path / "stage", "me/mybench", api=hub, explorer=site)
    snaps = {p.parent.parent.name: p for p in (tmp_path / "hub").glob("*/snapshots/*")}
    q = snaps["datasets--me--mybench-queries"]
    assert (q / "explorer" / "index.html").exists() and (
        q / "explorer" / "queries" / "0.html"
    ).exists()
    assert not (snaps["datasets--me--mybench-documents"] / "explorer").exists()
    with pytest.raises(ValueError, match="no explorer there"):
        push(toy_benchmark(), tmp_path / "s2", "me/b", api=hub, explorer=tmp_path / "nowhere")
