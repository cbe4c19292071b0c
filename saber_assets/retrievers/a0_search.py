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


def _with_index(ix_path: str, work):
    """``work(pya0, ix)`` on the index at ``ix_path`` opened read-only, the engine's C output
    silenced and the index closed after; an index that does not open or an engine exception
    comes back as the error string."""
    import pya0

    with quiet_c_output():
        try:
            ix = pya0.index_open(ix_path, option="r")
            if ix is None:
                return f"cannot open the Approach Zero index {ix_path}"
            try:
                return work(pya0, ix)
            finally:
                pya0.index_close(ix)
        except Exception as exc:
            return f"Approach Zero failed: {exc}"


def search(ix_path: str, keywords: list[dict], n_docs: int, depth: int = 0) -> np.ndarray | str:
    """Scores of the ``n_docs`` documents of the index at ``ix_path`` (a document the engine does
    not return scores 0; ids travel in the ``url`` field), or the engine's error as a string.
    ``depth`` > 0: the engine's own top ``depth`` only (see ``Approach0Retriever``)."""
    topk = min(depth, n_docs) if depth > 0 else n_docs
    res = _with_index(
        ix_path, lambda pya0, ix: json.loads(pya0.search(ix, keywords, verbose=False, topk=topk))
    )
    if isinstance(res, str):
        return res
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


NO_HIT = 2  # the engine's ret_code for "No hit found"

# our row -> the engine's docid, per index (pya0's docids are not reliably row + 1); keyed by the
# folder's inode and mtime too, since a rebuilt index is moved into the same path
_DOCIDS: dict[tuple, dict[int, int]] = {}


def _engine_docids(pya0, ix, ix_path: str, n_docs: int) -> dict[int, int]:
    """Every document's engine docid, read from the index's stored urls (~20 µs a document)."""
    try:
        st = os.stat(ix_path)
        key: tuple = (ix_path, st.st_ino, st.st_mtime_ns)
    except OSError:
        key = (ix_path,)
    if key not in _DOCIDS:
        found: dict[int, int] = {}
        docid, misses = 1, 0
        while len(found) < n_docs and misses < 1000:  # docids start at 1; a few may be skipped
            doc = pya0.index_lookup_doc(ix, docid)
            url = str((doc or {}).get("url", ""))
            if url.isdigit():
                found.setdefault(int(url), docid)
                misses = 0
            else:
                misses += 1
            docid += 1
        _DOCIDS[key] = found
    return _DOCIDS[key]


def score_rows(
    ix_path: str, keywords: list[dict], rows: list[int], n_docs: int
) -> np.ndarray | str:
    """The exhaustive search's scores of the documents at ``rows`` only, each asked of the engine
    by its docid (``pya0.search(..., docid=)``, ~2 ms a document at 13.5K documents, where the
    exhaustive search costs ~5 s: the engine writes a highlighted snippet for every hit it
    returns). Equal to ``search(...)[rows]``: the same scores, a document the engine does not
    match scores 0, and a negative score reads as 0 as it does there. Or the error as a string."""
    scores = np.zeros(len(rows))

    def work(pya0, ix) -> np.ndarray | str:
        docids = _engine_docids(pya0, ix, ix_path, n_docs)

        def ask(docid: int) -> dict:
            return json.loads(pya0.search(ix, keywords, verbose=False, topk=1, docid=docid))

        # asked from the first document, the engine answers the first match anywhere: "no hit"
        # there means none in the index, a failed query as in the exhaustive search
        first = ask(min(docids.values(), default=1))
        if first.get("ret_code") != 0:
            return f"Approach Zero: {first.get('ret_str')}"
        for n, row in enumerate(rows):
            if row not in docids:
                return f"document row {row} is not in the Approach Zero index {ix_path}"
            res = ask(docids[row])
            if res.get("ret_code") == NO_HIT:  # no match at or after this document
                continue
            if res.get("ret_code") != 0:
                return f"Approach Zero: {res.get('ret_str')}"
            for hit in res.get("hits", []):
                url = str(hit.get("field_url", ""))
                if url == str(row):
                    scores[n] = max(scores[n], float(hit["score"]))
                elif not (url.isdigit() and int(url) > row):
                    return (
                        f"Approach Zero answered document {url!r} when asked for row {row} "
                        f"(docid {docids[row]})"
                    )
                # else: the engine skips to the next document that matches: this one does not,
                # and scores 0 as in the exhaustive search
        return scores

    return _with_index(ix_path, work)


def score_rows_task(args: tuple[str, list[dict], list[int], int]) -> np.ndarray | str:
    return score_rows(*args)
