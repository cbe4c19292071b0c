"""The CPU summarizer against a baseline summarizer from git history, in one run.

    uv run python perf/core_ideas.py                       # every bundled problem
    uv run python perf/core_ideas.py --baseline 36389dc    # the extractive summarizer
    uv run python perf/core_ideas.py --homes OLD_HOME NEW_HOME   # + the built pools

Printed: per bundled source and subject, the share of problems given a core idea by each
summarizer; the time per problem of each, as a ratio; examples of ideas and of solutions given
none. With ``--homes`` (two built sample homes, baseline's first), over 200,000 random pairs of
each home's pool: the share of topic-relevant pairs (topic > the home's threshold) whose core
ideas share a token (summary signal > 0), and the share that are summary-relevant too.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from saber_assets.config import DATA_DIR  # noqa: E402
from saber_resources.cpu_tasks import CPUSummarizer  # noqa: E402

BASELINE = "36389dc"  # the last commit with the extractive summarizer (cpu-extractive/v1)


def bundled() -> list[dict]:
    rows = []
    for name in ("math", "olympiadbench"):
        with gzip.open(DATA_DIR / "corpora" / f"{name}.jsonl.gz", "rt") as f:
            for line in f:
                r = json.loads(line)
                sol = r["solution"]
                rows.append(
                    {
                        "source": name,
                        "subject": r.get("type") or r.get("subfield") or "",
                        "problem": r.get("problem") or r["question"],
                        "solution": "\n\n".join(sol) if isinstance(sol, list) else sol,
                    }
                )
    return rows


def baseline_summarizer(rev: str):
    """``CPUSummarizer`` of ``cpu_tasks.py`` at ``rev``, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:saber_resources/cpu_tasks.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "baseline_cpu_tasks.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_cpu_tasks", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.CPUSummarizer()


def timed(summarizer, rows: list[dict]) -> tuple[list[str | None], float]:
    t0 = time.perf_counter()
    ideas = [summarizer.summarize(r["problem"], r["solution"]) for r in rows]
    return ideas, time.perf_counter() - t0


def pool_pairs(home: Path, n_pairs: int = 200_000, seed: int = 0) -> dict:
    """Topic-relevant pairs of a built home's pool that share a core-idea token."""
    from saber_assets.signals.kernels import pair_values
    from saber_assets.signals.prepare import SignalInputs

    name = next(p for p in home.iterdir() if (p / "signals").is_dir())
    inputs = SignalInputs.load(name / "signals" / "inputs.npz")
    thr = pl.read_parquet(name / "parquet" / "relevance_thresholds.parquet").row(0, named=True)
    rng = np.random.default_rng(seed)
    i = rng.integers(0, inputs.n, n_pairs)
    j = rng.integers(0, inputs.n, n_pairs)
    keep = i != j
    t, s = pair_values(*inputs.arrays, i[keep], j[keep])
    topical = t > thr["topic_threshold"]
    return {
        "pool": inputs.n,
        "topic_relevant": int(topical.sum()),
        "share_a_token": float((s[topical] > 0).mean()),
        "also_summary_relevant": float((s[topical] > thr["summary_threshold"]).mean()),
        "summary_relevant_of_all": float((s > thr["summary_threshold"]).mean()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the baseline")
    ap.add_argument("--homes", nargs=2, type=Path, metavar=("BASELINE_HOME", "HOME"))
    args = ap.parse_args()
    rows = bundled()
    old, new = baseline_summarizer(args.baseline), CPUSummarizer()
    old_ideas, old_s = timed(old, rows)
    new_ideas, new_s = timed(new, rows)
    table = (
        pl.DataFrame(
            {
                "source": [r["source"] for r in rows],
                "subject": [r["subject"] for r in rows],
                "baseline": [x is not None for x in old_ideas],
                "current": [x is not None for x in new_ideas],
            }
        )
        .group_by("source", "subject")
        .agg(pl.len().alias("problems"), pl.col("baseline").mean(), pl.col("current").mean())
        .sort("source", "subject")
    )
    with pl.Config(tbl_rows=-1, tbl_width_chars=120, float_precision=3):
        print(table)
    n = len(rows)
    print(
        f"all {n:,} problems: baseline {sum(x is not None for x in old_ideas) / n:.1%} "
        f"({old.version}), current {sum(x is not None for x in new_ideas) / n:.1%} "
        f"({new.version})"
    )
    print(
        f"time per problem: baseline {1000 * old_s / n:.3f} ms, current {1000 * new_s / n:.3f} ms "
        f"(ratio {new_s / old_s:.2f})"
    )
    print("distinct ideas:", len(set(x for x in new_ideas if x)))
    methods = Counter(x.split(" via ", 1)[1] for x in new_ideas if x)
    print("most common methods:", methods.most_common(8))
    rng = np.random.default_rng(1)
    print("examples:")
    for k in rng.choice(n, 6, replace=False):
        print(f"  {rows[k]['problem'][:90]!r}\n    -> {new_ideas[k]}")
    print("no core idea:")
    for k in [k for k, x in enumerate(new_ideas) if x is None][:6]:
        print(f"  solution {rows[k]['solution'][:90]!r}")
    if args.homes:
        for label, home in zip(("baseline", "current"), args.homes, strict=True):
            print(label, pool_pairs(home))


if __name__ == "__main__":
    main()
