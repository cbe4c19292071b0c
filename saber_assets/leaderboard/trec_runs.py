"""TREC run files (qid Q0 docid rank score tag): written by the runs stage beside its scores,
read by `saber evaluate --run` for an outside system's runs. Their own module: an edit to how
outside runs are scored must not move the runs stage's code version (hours of GPU at scale)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from saber_assets.benchmark.data import BenchmarkFormatError
from saber_assets.outputs import written_whole


def write_run(path: Path, run: Mapping[str, Mapping[str, float]], tag: str) -> None:
    """``run`` ({qid: {docid: score}}) as a TREC run file that ``read_run`` reads back: queries in
    key order, each one's documents by score, highest first (ties in the order given), ranks
    from 1, the score as Python prints it. Written whole (no half file on a failure)."""
    with written_whole(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for qid in sorted(run):
            ranked = sorted(run[qid].items(), key=lambda item: -item[1])
            f.writelines(
                f"{qid} Q0 {doc} {rank} {score!r} {tag}\n"
                for rank, (doc, score) in enumerate(ranked, 1)
            )


def read_run(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """A TREC run file (qid Q0 docid rank score tag) as {tag: {qid: {docid: score}}}. A file may
    hold several runs (one per setting, told apart by their tag); a malformed line is an error
    naming it."""
    runs: dict[str, dict[str, dict[str, float]]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise BenchmarkFormatError(
                    f"{path}: line {n}: expected 'qid Q0 docid rank score tag', got {len(parts)} fields"
                )
            qid, _, doc, _, score, tag = parts
            try:
                value = float(score)
            except ValueError:
                raise BenchmarkFormatError(
                    f"{path}: line {n}: score {score!r} is not a number"
                ) from None
            runs.setdefault(tag, {}).setdefault(qid, {})[doc] = value
    if not runs:
        raise BenchmarkFormatError(f"{path}: empty run file")
    return runs
