"""The contamination audit against a synthetic training corpus: time and peak memory, with the
corpus stage's dedup on the same rows as the baseline measured in the same run.

    uv run python perf/contamination.py              # 100,000 training rows
    uv run python perf/contamination.py --n 200000

The training corpus: the bundled MATH and OlympiadBench statements, each copied with its numbers
shifted and a row number appended (so rows are distinct but realistic), to ``--n`` rows,
streamed from a JSONL file; the benchmark side: 100 queries and 3,000 candidates drawn from the
bundled statements. Each variant runs in its own fresh process (peak RSS is the process's own):

- ``dedup``: the corpus stage's ``find_duplicates`` over the training rows (what building a
  corpus of that size costs in this step) — the baseline;
- ``audit``: ``contamination.audit`` of the benchmark items against the same rows, streamed
  through the asset's reader (``contamination.training_rows``).

Printed: seconds, peak RSS, both as ratios to the baseline, and the linear extrapolation of the
audit to 1M rows (datatrove's signature, bucket and cluster steps are linear in rows).

Measured on the 2-core box (100,000 rows): dedup 42.1 s, 0.25 GB; audit 57.1 s (×1.36), 0.25 GB
(×1.01); ~9.5 min at 1M rows. The rows stream through a file into datatrove's on-disk steps, so
memory stays flat with the corpus size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def statements() -> list[tuple[str, str]]:
    out = []
    for name, key in (("math", "problem"), ("olympiadbench", "question")):
        with gzip.open(ROOT / "data" / "corpora" / f"{name}.jsonl.gz", "rt") as f:
            out += [(f"{name}:{r['id']}", r[key]) for r in map(json.loads, f) if r.get(key)]
    return out


def write_training(path: Path, n: int) -> None:
    base = statements()
    with open(path, "w") as f:
        for k in range(n):
            sid, text = base[k % len(base)]
            shift = k // len(base) + 1
            text = re.sub(r"\d+", lambda m, s=shift: str(int(m.group()) + s), text)
            f.write(json.dumps({"id": f"syn{k}", "problem": f"{text} (row {k})"}) + "\n")


def rows(path: Path):
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            yield r["id"], r["problem"]


def child(variant: str, path: Path) -> None:
    import resource

    import polars as pl

    from saber_assets.contamination.matches import TrainingRead, audit, training_rows
    from saber_assets.corpus.dedup import DedupItem, find_duplicates, minhash_config
    from saber_assets.retrievers.entries import TrainingCorpus

    start = time.perf_counter()
    if variant == "dedup":
        items = [DedupItem(i, t, 0, k) for k, (i, t) in enumerate(rows(path))]
        found = len(find_duplicates(items, minhash_config(5, 14, 8, 1)))
    else:
        base = statements()
        items = pl.DataFrame(base[:3100], schema=["item", "text"], orient="row")
        # the asset's own reader: the file streamed row by row, as a declared training corpus
        corpus = TrainingCorpus(name="synthetic", path=str(path),
                                fields={"id": "id", "problem": "problem"})  # fmt: skip
        matches, _ = audit(items, training_rows(corpus, [path], TrainingRead()))
        found = matches["item"].n_unique()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps({"seconds": seconds, "peak_gb": peak, "found": found}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--child", choices=["dedup", "audit"])
    ap.add_argument("--path")
    args = ap.parse_args()
    if args.child:
        child(args.child, Path(args.path))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "training.jsonl"
        write_training(path, args.n)
        got = {}
        for variant in ("dedup", "audit"):
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant, "--path", str(path)],
                check=True, capture_output=True, text=True,
                env={"TQDM_DISABLE": "1", **__import__("os").environ},
            )  # fmt: skip
            got[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    b, a = got["dedup"], got["audit"]
    print(f"training rows: {args.n:,}")
    print(f"{'variant':<8} {'seconds':>9} {'peak GB':>8} {'x time':>7} {'x memory':>9}  found")
    for name, r in got.items():
        print(f"{name:<8} {r['seconds']:>9.1f} {r['peak_gb']:>8.2f} "
              f"{r['seconds'] / b['seconds']:>7.2f} {r['peak_gb'] / b['peak_gb']:>9.2f}  {r['found']}")  # fmt: skip
    print(f"audit at 1M rows (linear): ~{a['seconds'] * 1_000_000 / args.n / 60:.1f} min")


if __name__ == "__main__":
    main()
