"""TREC run files (qid Q0 docid rank score tag), as the runs stage writes them beside its
scores. Reading an outside system's run is `outside_runs.read_run`: an edit to how outside runs are
read must not move the runs stage's code version (hours of GPU at scale)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

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
