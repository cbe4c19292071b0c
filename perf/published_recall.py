"""The published-benchmark matching (``contamination.published.published_recall``) at the
paper's scale: a synthetic corpus of N problems against a published benchmark of M documents and Q queries,
of which a share is planted in the corpus (half exact with new spacing and numbers, half with
one word changed). Prints seconds, the process's peak RSS, and the recall found against the
recall planted.

    uv run python perf/published_recall.py --n 283000 --m 71117 --q 1000
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import polars as pl

from saber_assets.benchmark.data import QUERY_SCHEMA, Benchmark
from saber_assets.contamination.published import published_recall

WORDS = ("prime integer triangle circle polynomial root sum product digit number area angle "
         "sequence function inequality real positive find prove show compute let given such "
         "that every each the of and a an is are be for with modulo divisible square").split()  # fmt: skip


def problem(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(25, 70))
    return " ".join(words) + f" where $x^{rng.randint(2, 9)}+{rng.randint(1, 99)}y$."


def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=283_000, help="corpus problems")
    ap.add_argument("--m", type=int, default=71_117, help="published documents")
    ap.add_argument("--q", type=int, default=1_000, help="published queries")
    ap.add_argument(
        "--planted", type=float, default=0.3, help="share of the published in the corpus"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    docs = [problem(rng) for _ in range(args.m)]
    queries = [problem(rng) for _ in range(args.q)]
    planted = rng.sample(range(args.m), int(args.planted * args.m))
    corpus = [problem(rng) for _ in range(args.n - len(planted))]
    for k, i in enumerate(planted):
        if k % 2:  # exact after folding: new spacing and numbers
            corpus.append(docs[i].replace(" ", "  ").replace("x^", "x^1"))
        else:  # one word changed
            words = docs[i].split()
            words[len(words) // 2] = "omega"
            corpus.append(" ".join(words))

    def block(j: int) -> list[int]:  # every document a candidate of one query, as published
        return list(range(j * args.m // args.q, (j + 1) * args.m // args.q))

    published = Benchmark(
        pl.DataFrame(
            [
                {
                    "id": f"q{j}",
                    "problem": t,
                    "solution": "s",
                    "candidates": block(j),
                    "relevance_scores": [5.0] * len(block(j)),
                    "domains": ["Algebra"],
                }
                for j, t in enumerate(queries)
            ],
            schema=QUERY_SCHEMA,
        ),  # fmt: skip
        pl.DataFrame(
            {"id": [f"d{i}" for i in range(args.m)], "problem": docs, "solution": ["s"] * args.m}
        ),  # fmt: skip
        {"name": "synthetic"},
    )
    table = pl.DataFrame({"id": [f"src:{i}" for i in range(len(corpus))], "problem": corpus})
    t0 = time.perf_counter()
    out = published_recall(published, table)
    seconds = time.perf_counter() - t0
    cands = out["summary"].filter(pl.col("role") == "candidate", pl.col("domain") == "all")
    planted_cands = len(planted)
    print(f"corpus {args.n:,}, published {args.m:,} documents / {args.q:,} queries")
    print(f"published_recall: {seconds:.1f} s, peak RSS {peak_rss_mib():,.0f} MiB (whole process)")
    print(f"candidates found {cands['overlapping'][0]:,} of {cands['items'][0]:,} "
          f"(planted among them: {planted_cands:,}); found rows {out['found'].height:,}")  # fmt: skip


if __name__ == "__main__":
    main()
