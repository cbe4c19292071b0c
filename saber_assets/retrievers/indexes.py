"""Retriever indexes: a retriever's document-side work for one setting — tokens, term statistics
and sparse matrices, the Approach Zero index, document embeddings — written once per document
set and read by every domain's run (in any process) instead of being redone per partition.

A retriever takes part by having ``build_index(docs, path)`` and ``load_index(docs, path)``; the
loaded state must be exactly what it would have computed itself (the runs' scores do not change).
An index is keyed by the index format, the retriever's entry and the document texts: a changed
corpus, setting or parameter is a different key and the index is rebuilt. A broken index (a
file missing or unreadable) is rebuilt too, and the reason is returned, never hidden.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from saber_assets.benchmark.data import Benchmark
from saber_assets.benchmark.texts import document_side, document_texts
from saber_assets.pipeline import PipelineResource
from saber_assets.retrievers.base import texts_digest

INDEX_FORMAT = 1

# The index state this process loaded last, one retriever's (its document sides): a build runs
# a retriever's runs of every domain one after another in one process (``orchestration.plan``'s order),
# and at 283K documents each of those runs read the same index again, setting by setting. Kept
# by where the index lies, what its manifest says and its files' identities, and given
# only to retrievers that name the state their ``load_index`` sets (``index_state``).
_LOADED: dict[tuple, dict] = {}


@dataclass
class IndexInfo:
    setting: str
    documents: int
    built: bool  # False: an index written earlier was read
    seconds: float
    bytes: int
    rebuilt_because: str | None = None


def index_key(entry: dict, setting: str, docs: list[str]) -> str:
    """Content key of an index: format, the retriever's entry, the setting, every document text."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([INDEX_FORMAT, entry, setting], sort_keys=True, default=str).encode())
    h.update(texts_digest(docs))
    return h.hexdigest()


def index_documents(
    doc_texts: list[str], candidate_rows: list[list[int]], full_corpus: bool
) -> list[str]:
    """The documents a retriever's index covers: all of them when it searches the whole corpus,
    else the union of the queries' candidates (in document order)."""
    if full_corpus:
        return doc_texts
    rows = sorted({r for cands in candidate_rows for r in cands})
    return [doc_texts[r] for r in rows]


def documents_to_index(retriever, bench: Benchmark, setting: str, full_corpus: bool) -> list[str]:
    """The documents of the retriever's index in ``setting``: every document where it searches
    the whole corpus, or where its candidates' scores depend on every document (Approach Zero's
    ``index_covers_corpus``: its index over the candidates alone was built and never read, and
    every process indexed the corpus again, 24 of the sample's first domain's 25 s); else the
    union of the queries' candidates (a dense retriever's vectors do not depend on the others)."""
    every = full_corpus or getattr(retriever, "index_covers_corpus", False)
    return index_documents(
        document_texts(bench, setting), bench.queries["candidates"].to_list(), every
    )


def has_index(retriever, full_corpus: bool) -> bool:
    if not (hasattr(retriever, "build_index") and hasattr(retriever, "load_index")):
        return False
    return full_corpus or not getattr(retriever, "index_needs_corpus", False)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def ensure_index(
    retriever,
    entry: dict,
    setting: str,
    docs: list[str],
    path: Path,
    use: bool = True,
    shared: Path | None = None,
) -> IndexInfo:
    """Load the index at ``path`` into ``retriever`` if it matches these documents, else build it
    (into a scratch folder, then moved into place: a run killed halfway leaves no half index).
    ``use=False``: the caller scores nothing with it (the index stage), so an index just built
    is not read back. ``shared``: where document-side work that retrievers share lies (token
    tables, ``token_table``), for a retriever that takes it (``tokens_dir``)."""
    if shared is not None and hasattr(retriever, "tokens_dir"):
        retriever.tokens_dir = shared
    key = index_key(entry, setting, docs)
    manifest = path / "manifest.json"
    reason = None
    t0 = time.perf_counter()
    if manifest.exists():
        try:
            stored = json.loads(manifest.read_text())
            if stored.get("key") == key:
                _load(retriever, docs, path, key)
                # the size the build wrote down: Approach Zero's index is ~390K files at 13.5K
                # documents, and walking them took 19 s of each run that loaded it
                size = stored.get("bytes")
                size = size if isinstance(size, int) else _size(path)
                return IndexInfo(setting, len(docs), False, time.perf_counter() - t0, size)
            reason = "documents or parameters changed"
        except Exception as exc:  # a broken index is rebuilt, and says why
            reason = f"unreadable index: {type(exc).__name__}: {exc}"
    scratch = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        retriever.build_index(docs, scratch)
        seconds = time.perf_counter() - t0
        size = _size(scratch)
        (scratch / "manifest.json").write_text(
            json.dumps(
                {
                    "key": key,
                    "format": INDEX_FORMAT,
                    "setting": setting,
                    "documents": len(docs),
                    "build_seconds": round(seconds, 3),
                    "bytes": size,
                    "entry": entry,
                },  # fmt: skip
                indent=1,
                default=str,
            )
        )
        old = path.parent / f".{path.name}.old.{uuid.uuid4().hex[:8]}"
        if path.exists():
            path.rename(old)
        scratch.rename(path)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if use:  # read back what was written: a run sees the same state whether it built or loaded
        _load(retriever, docs, path, key)
    return IndexInfo(setting, len(docs), True, seconds, size, reason)


def _load(retriever, docs: list[str], path: Path, key: str) -> None:
    """``retriever.load_index``, or the state the same index left when this process last loaded
    it (the loaded objects are only read by scoring)."""
    names = getattr(retriever, "index_state", ())
    if not names:
        retriever.load_index(docs, path)
        return
    here = path.resolve()
    files = tuple(  # a file rewritten or broken since is read (and found broken) again
        (str(f), st.st_ino, st.st_size, st.st_mtime_ns)
        for f in sorted(here.rglob("*"))
        if (st := f.stat()) and f.is_file()
    )
    memo = (type(retriever), str(here), key, files)
    state = _LOADED.get(memo)
    if state is None:
        # another retriever's, or this side's before it was rebuilt: freed before this is read
        for old in [m for m in _LOADED if m[1] == memo[1] or Path(m[1]).parent != here.parent]:
            del _LOADED[old]
        retriever.load_index(docs, path)
        state = _LOADED[memo] = {name: getattr(retriever, name) for name in names}
    for name, value in state.items():
        setattr(retriever, name, value)


def prepare_index(
    pipeline: PipelineResource, retriever, entry, bench: Benchmark, setting: str, use: bool = True
) -> IndexInfo | None:
    """Load (or build once and keep) the retriever's index for this setting's documents; None for
    retrievers without document-side work of their own (fusion, two-stage). Settings that show
    the same documents (statement→full, full→full) share one index."""
    full = pipeline.load().retrievers.full_corpus and entry.full_corpus
    if not has_index(retriever, full):
        return None
    docs = documents_to_index(retriever, bench, setting, full)
    side = document_side(setting)
    path = pipeline.outputs().index(entry.name) / side
    shared = pipeline.outputs().token_tables
    return ensure_index(retriever, entry.definition(), side, docs, path, use, shared)
