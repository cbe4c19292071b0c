"""Retriever runs: bulk scoring vs one query at a time, at corpus scale.

uv run python perf/retrievers.py                 # the bundled corpora (~14K documents)
uv run python perf/retrievers.py --n 283000      # synthetic documents up to 283K
uv run python perf/retrievers.py --retrievers jaccard,bm25-corpus-idf --queries 500
# the full config's shape: its seven lexical retrievers, 492 queries x 90 candidates, 3 settings
uv run python perf/retrievers.py --queries 492 --candidates 90 --setting all \
    --retrievers bm25,bm25-no-tok,bm25-corpus-idf,tfidf,tfidf-no-tok,jaccard,jaccard-no-tok

For each retriever: queries/s of the whole run (candidate re-ranking + the full-corpus track) with
the bulk path (``evaluate`` as the leaderboard runs it) and with the earlier one-query-at-a-time
path (measured on a subset of the queries, in the same run), their ratio, and the largest score
difference between the two (0 or ~1e-16 where the candidates' scores come from the corpus
scores). Each retriever's index (``leaderboard.indexes``: what a domain run reads instead of
redoing the document side) is timed twice: built, and read back into a fresh retriever; both
paths then score with the index read back, as a leaderboard run does, so the ratio is the
scoring's (Approach Zero's index is the engine's, over every document). Texts:
statement→statement unless ``--setting`` says otherwise; the last lines sum index build + run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.benchmark.data import QUERY_SCHEMA, Benchmark
from saber_assets.benchmark.texts import SETTINGS, document_texts
from saber_assets.config import BUNDLED_SOURCES, DATA_DIR
from saber_assets.retrievers.indexes import ensure_index, has_index
from saber_assets.retrievers.registry import build_retriever, load_registry
from saber_assets.runs.evaluate import evaluate


class OneAtATime:
    """The earlier path: no bulk method, candidates scored on their own (BM25 and TF-IDF fitted on
    each query's candidates), corpus per query."""

    def __init__(self, inner):
        self.inner = inner
        if hasattr(inner, "fit_corpus"):
            self.fit_corpus = inner.fit_corpus

    def score(self, query, docs):
        # BM25 and TF-IDF with candidate statistics: bm25s / scikit-learn fitted per query
        if getattr(self.inner, "idf", "candidates") == "candidates":
            for reference in ("bm25s_scores", "sklearn_scores"):
                if hasattr(self.inner, reference):
                    return getattr(self.inner, reference)(query, docs)
        return self.inner.score(query, docs)

    def corpus_scores(self, query, docs):
        return self.inner.corpus_scores(query, docs)


def loaded(entry, setting: str, texts: list[str], path: Path | None):
    """A retriever as a leaderboard run gets it: its index read back from ``path``, if any."""
    r = build_retriever(entry)
    if path is not None:
        ensure_index(r, entry.model_dump(), setting, texts, path)
    return r


def bundled_documents() -> pl.DataFrame:
    rows = []
    for name, (path, fields) in BUNDLED_SOURCES.items():
        with gzip.open(DATA_DIR / path, "rt", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                sol = r[fields["solution"]]
                sol = sol[0] if isinstance(sol, list) else sol
                rows.append((f"{name}:{r[fields['id']]}", r[fields["problem"]], sol))
    return pl.DataFrame(rows, schema=["id", "problem", "solution"], orient="row")


def synthetic(docs: pl.DataFrame, n: int, seed: int = 0) -> pl.DataFrame:
    """Up to n documents: the bundled ones, then recombinations of their sentences."""
    if n <= docs.height:
        return docs.head(n)
    rng = np.random.default_rng(seed)
    sentences = [s for p in docs["problem"].to_list() for s in p.split(". ") if s]
    extra = n - docs.height
    picks = rng.integers(0, len(sentences), size=(extra, 3))
    nums = rng.integers(2, 500, size=extra)
    problems = [
        ". ".join(sentences[k] for k in row) + f" Find ${m}x+{m + 1}$."
        for row, m in zip(picks, nums, strict=True)
    ]
    more = pl.DataFrame(
        {
            "id": [f"syn:{i}" for i in range(extra)],
            "problem": problems,
            "solution": ["By direct computation."] * extra,
        }
    )
    return pl.concat([docs, more])


def make_benchmark(docs: pl.DataFrame, n_queries: int, k: int = 150, seed: int = 1) -> Benchmark:
    rng = np.random.default_rng(seed)
    rows = []
    for q in rng.choice(docs.height, n_queries, replace=False).tolist():
        cands = rng.choice(docs.height, k + 1, replace=False)
        cands = [int(c) for c in cands if c != q][:k]
        rows.append(
            {
                "id": docs["id"][q],
                "problem": docs["problem"][q],
                "solution": docs["solution"][q],
                "candidates": cands,
                "relevance_scores": rng.uniform(0, 5, len(cands)).tolist(),
                "domains": ["all"],
            }
        )
    return Benchmark(pl.DataFrame(rows, schema=QUERY_SCHEMA), docs, {"domains": ["all"]})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=0, help="documents (default: all bundled, ~14K)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--candidates", type=int, default=150, help="candidates per query")
    ap.add_argument("--setting", default="statement-statement", help="a setting, or 'all'")
    ap.add_argument("--baseline-queries", type=int, default=20, help="queries on the old path")
    ap.add_argument(
        "--retrievers", default="bm25,bm25-corpus-idf,tfidf,jaccard,jaccard-no-tok,approach0"
    )
    args = ap.parse_args()
    docs = bundled_documents()
    docs = synthetic(docs, args.n) if args.n else docs
    bench = make_benchmark(docs, args.queries, args.candidates)
    small = Benchmark(bench.queries.head(args.baseline_queries), docs, bench.manifest)
    entries = {e.name: e for e in load_registry()}
    settings = SETTINGS if args.setting == "all" else (args.setting,)
    print(
        f"{docs.height:,} documents, {args.queries} queries x {args.candidates} candidates, "
        f"{', '.join(settings)}"
    )
    print(
        f"{'retriever':<18}{'setting':<21}{'bulk q/s':>9}{'run s':>8}{'old q/s':>9}{'ratio':>7}"
        f"{'max |diff|':>11}{'index s':>8}{'read s':>7}"
    )
    total = {}
    for name in args.retrievers.split(","):
        for setting in settings:
            texts = document_texts(bench, setting)
            row = measure(entries[name], setting, texts, docs, bench, small)
            total[name] = total.get(name, 0.0) + row["run"] + row["index"]
            print(
                f"{name:<18}{setting:<21}{row['qps']:>9.1f}{row['run']:>8.1f}{row['old']:>9.1f}"
                f"{row['qps'] / row['old']:>7.1f}{row['diff']:>11.2g}"
                f"{row['index']:>8.1f}{row['read']:>7.2f}",
                flush=True,
            )
    print(
        "index build + run, all settings: " + ", ".join(f"{k} {v:.1f} s" for k, v in total.items())
    )
    print(f"in all: {sum(total.values()):.1f} s")


def measure(entry, setting, texts, docs, bench, small) -> dict:
    """One retriever in one setting: index built and read, the run through ``evaluate`` (bulk),
    and the old path on the small benchmark."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ix"
        built = read = float("nan")
        indexed = has_index(build_retriever(entry), True)
        if indexed:
            built = ensure_index(build_retriever(entry), entry.model_dump(), setting, texts, path)
            read = ensure_index(build_retriever(entry), entry.model_dump(), setting, texts, path)
            built, read = built.seconds, read.seconds
        retriever = loaded(entry, setting, texts, path if indexed else None)
        t = time.perf_counter()
        new = evaluate(retriever, bench, setting)
        run = time.perf_counter() - t
        t = time.perf_counter()
        old = evaluate(
            OneAtATime(loaded(entry, setting, texts, path if indexed else None)), small, setting
        )
        old_qps = small.queries.height / (time.perf_counter() - t)
    diff = max(
        float(np.max(np.abs(np.array(a) - np.array(b))))
        for a, b in zip(new["scores"].head(small.queries.height), old["scores"], strict=True)
    )
    return {"qps": bench.queries.height / run, "run": run, "old": old_qps, "diff": diff,
            "index": 0.0 if math.isnan(built) else built, "read": read}  # fmt: skip


if __name__ == "__main__":
    main()
