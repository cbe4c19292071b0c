"""One Approach Zero search, importable alone: what the search worker processes run.

Kept free of the project's heavier imports (Dagster, the LLM layer) so a spawned worker starts in
well under a second; ``quiet_c_output`` lives here for the same reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import numpy as np


@contextlib.contextmanager
def quiet_c_output():
    """pya0's C parser prints every syntax error to the process's stdout/stderr: silence them."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def search(ix_path: str, keywords: list[dict], n_docs: int, depth: int = 0) -> np.ndarray | str:
    """Scores of the ``n_docs`` documents of the index at ``ix_path`` (a document the engine does
    not return scores 0; ids travel in the ``url`` field), or the engine's error as a string.
    ``depth`` > 0: the engine's own top ``depth`` only (see ``Approach0Retriever``)."""
    import pya0

    with quiet_c_output():
        try:
            ix = pya0.index_open(ix_path, option="r")
            if ix is None:
                return f"cannot open the Approach Zero index {ix_path}"
            try:
                res = json.loads(
                    pya0.search(
                        ix,
                        keywords,
                        verbose=False,
                        topk=min(depth, n_docs) if depth > 0 else n_docs,
                    )
                )
            finally:
                pya0.index_close(ix)
        except Exception as exc:
            return f"Approach Zero failed: {exc}"
    if res.get("ret_code") != 0:
        return f"Approach Zero: {res.get('ret_str')}"
    scores = np.zeros(n_docs)
    for hit in res.get("hits", []):
        url = hit.get("field_url", "")
        if url.isdigit() and int(url) < n_docs:
            scores[int(url)] = max(scores[int(url)], float(hit["score"]))
    return scores


def search_task(args: tuple[str, list[dict], int]) -> np.ndarray | str:
    return search(*args)
