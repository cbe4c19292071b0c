"""Approach Zero through pya0.

One index over all documents of a setting (built on tmpfs once per process and document set),
searched once per query: that one search gives the full-corpus track and, with
``candidates: corpus`` (the default), the candidates' scores too — their scores in the corpus
index. The difference from an index over the query's candidates alone (``candidates: own-index``,
the earlier behaviour, one index per query): the engine's text-term weights use the statistics
of the whole document set rather than of the candidates, so candidate scores, and occasionally
their order, differ; formula matching is per document pair either way. Queries are searched by
``workers`` processes at once (the engine is single-threaded C).

The engine's cost grows with the list it returns (14K documents: ~2.6 s per query for all of
them, ~0.1 s for its top 1,000). ``depth: 1000`` asks for the engine's own top 1,000 (as an
ARQMath run would; the rest score 0) — but it is not the exhaustive ranking cut short: the
engine's pruning changes the scores of the documents it returns too (measured: a document at
7.5 exhaustively scores 21.1 in a top-250 list), so it is a different system, opt-in. The
default, ``depth: 0``, ranks every document.

pya0's own returned ids are unreliable (off by one or two), so each document carries our id in
the ``url`` field. Formulas go to the engine as [imath] spans; a document the engine does not
return scores 0. An engine failure raises ``RetrieverFailed``: the query is counted as failed.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from saber_assets.retrievers.a0_search import (
    quiet_c_output,
    score_rows_task,
    search,
    search_task,
)
from saber_assets.retrievers.base import Kind, RetrieverFailed, RetrieverSkipped, docs_key
from saber_assets.retrievers.tokenize import plain_tokens, split_math
from saber_resources.math_spans import LATEX_SPANS, SpanScanner, delimiter, dollars_and_brackets


def _tmp_root() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# Full-corpus indexes outlive one retriever object: every domain partition of a run in the same
# process reuses them (key: the document texts).
_CORPUS_INDEXES: dict[tuple, str] = {}
# Temporary index folders are named for the process that made them and removed when it exits:
# tmpfs is memory, and kept indexes outlived their processes (190 of them, 1.3 GB of RAM, after
# a day of builds on one machine); a killed process's are removed by the next one that makes one
TMP_PREFIX = "a0-"
_OWN_TMP: set[str] = set()
_SWEPT: set[str] = set()


def _tmp_dir() -> str:
    """A new folder for an engine index, owned by this process."""
    root = _tmp_root() or tempfile.gettempdir()
    if root not in _SWEPT:  # once per process: own-index mode makes a folder per query
        remove_orphans(root)
        _SWEPT.add(root)
    tmp = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", dir=root)
    _OWN_TMP.add(tmp)
    return tmp


def _discard(tmp: str) -> None:
    shutil.rmtree(tmp, ignore_errors=True)
    _OWN_TMP.discard(tmp)


@atexit.register
def _remove_own_tmp() -> None:
    for tmp in list(_OWN_TMP):
        _discard(tmp)


def remove_orphans(root: str) -> list[str]:
    """Remove the index folders under ``root`` whose process no longer runs; returns them."""
    gone = []
    for entry in os.scandir(root):
        owner = entry.name[len(TMP_PREFIX) :].split("-", 1)[0]
        if not (entry.name.startswith(TMP_PREFIX) and owner.isdigit() and entry.is_dir()):
            continue
        try:
            os.kill(int(owner), 0)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
            gone.append(entry.path)
        except PermissionError:  # another user's live process
            pass
    return gone


def to_engine_text(text: str) -> str:
    return LATEX_SPANS.sub(lambda m: f" [imath]{m.body.strip()}[/imath] ", text)


# The queries the reference evaluation does not ask its engine (it crashed on them), by the md5 of
# the query text as the setting shows it (approach0_processor.py); left out of its means. The
# reference's list holds 30 entries, one twice.
REFERENCE_SKIP = frozenset(
    """
    199b11579b8b7298a613b1ca2e041661 6892f32a9b3b1c33423b72ca99032e3b f5b65a45f9fcc050d3bc09e7251c6e6f
    175324faed909ccf469ebb699449f236 3c20d12c7f956a95716b54c3a5a18657 cd11b4b3032267c0c2ee4c158946a900
    77a07ca2724aef9be026aedd856b7015 c0805a4c75470d9217c8f47495793c31 467db1c46a5b32833b051f02ef77d933
    0131eb5a7384ba6c2308a8af1c5d7d74 bdfa1a8b8dfaecd02f12e2d7c236fbd0 9a1fefdab9c1e5182eb8a9a3253eece7
    010d2c257c9421cb447816bfcda0ecdf 15970d80da7b9d40f50e844474aa5d85 9184436f35cd4f5ec0afb21e06f31d76
    6aa8861d549689f41ad0a22453391648 c14db7d65c26c4b04355187d1f7dee40 5d56202d067cc417523ce51ddd72199b
    12b526d94e6c5bba5e3acc09f8fbe267 20428a09daeec87bc7868216339cd566 5c6e53511f82fa690239eb0fbf821751
    aadbc12ff59fbc72e08bb03100033732 2ef84af93672344b9150d799c4a755c5 1fbbcb4c4b7654f1eca51d4b8b90e45d
    ac7cb7dca2130d0ab7bfff93cbd8f1ce 65c16346697a42d035567ef5c812ac74 16f5db20f98541810ff3f63ecdde7ecf
    97ddf65b322494fe26d665dd7155ffe3 ecc600c795c74028decbb11e610c3155
    """.split()
)
# the reference's formula delimiters, tried in this order at each place (its regex's
# alternatives: $$…$$, $…$, \[…\], \(…\), equation and align, a star on either end or neither)
REFERENCE_MATH = SpanScanner(
    [
        *dollars_and_brackets(),
        delimiter("equation", r"\\begin\{equation\*?\}", r"\\end\{equation\*?\}"),
        delimiter("align", r"\\begin\{align\*?\}", r"\\end\{align\*?\}"),
    ]
)


def reference_keywords(text: str) -> list[dict]:
    """The query as the reference sends it: every prose stretch between formulas (one term each,
    stripped) and every formula, in reading order; a NUL is a space and a lone surrogate is
    replaced (the engine's C reader takes neither)."""
    text = text.replace("\x00", " ").encode("utf-8", errors="replace").decode("utf-8")
    chunks, at = [], 0
    for m in REFERENCE_MATH.finditer(text):
        if prose := text[at : m.start].strip():
            chunks.append({"type": "term", "str": prose})
        if formula := m.body.strip():
            chunks.append({"type": "tex", "str": formula})
        at = m.end
    if prose := text[at:].strip():
        chunks.append({"type": "term", "str": prose})
    return chunks


class Approach0Retriever:
    def __init__(
        self,
        name: str = "approach0",
        max_terms: int = 12,
        max_formulas: int = 6,
        candidates: str = "corpus",
        workers: int = 2,
        depth: int = 0,
        query: str = "terms",
        skip: str | list[str] | None = None,
    ) -> None:
        if candidates not in ("corpus", "own-index"):
            raise ValueError("candidates must be 'corpus' or 'own-index'")
        if query not in ("terms", "reference"):
            raise ValueError("query must be 'terms' or 'reference'")
        if isinstance(skip, str) and skip != "reference":
            raise ValueError("skip must be 'reference' or a list of md5 hex digests")
        self.name = name
        self.max_terms = max_terms
        self.max_formulas = max_formulas
        self.candidates_from_corpus = candidates == "corpus"
        self.workers = workers
        self.depth = depth
        # `terms`: up to max_formulas formulas and max_terms distinct words; `reference`: the
        # reference's query, every prose stretch and every formula (reference_keywords)
        self.query = query
        self.skip = REFERENCE_SKIP if skip == "reference" else frozenset(skip or ())

    def skipped(self, query: str) -> RetrieverSkipped | None:
        """Why ``query`` is not searched (its text's md5 is in ``skip``), or None."""
        digest = hashlib.md5(query.encode("utf-8", errors="replace")).hexdigest()
        if digest not in self.skip:
            return None
        return RetrieverSkipped(
            f"md5 {digest} is on the skip list (the reference's engine crashed on it)"
        )

    def query_keywords(self, query: str) -> list[dict]:
        if self.query == "reference":
            return reference_keywords(query)
        prose, formulas = split_math(query)
        terms = list(dict.fromkeys(t for t in plain_tokens(prose) if len(t) > 2))[: self.max_terms]
        kws = [{"type": "tex", "str": f} for f in formulas[: self.max_formulas]]
        kws += [{"type": "term", "str": t} for t in terms]
        return kws

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        return self._search(query, docs, keep=False)

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        """Scores of every document (the index over all documents is built once per process and
        kept; the engine ranks every document it matches, the rest score 0)."""
        return self._search(query, all_docs, keep=True)

    def corpus_scores_batch(self, queries: list[str], all_docs: list[str]) -> list:
        """``corpus_scores`` of many queries, searched by ``workers`` processes at once; a query
        the engine fails on gives its ``RetrieverFailed`` in place of its scores. The workers are
        spawned (not forked: a Dagster step has threads) once per process and reused."""
        return self._batch(
            queries, all_docs, lambda n, ix, kws: (ix, kws, len(all_docs), self.depth), search_task
        )

    def candidate_scores_batch(
        self, queries: list[str], rows: list[list[int]], all_docs: list[str]
    ) -> list:
        """Each query's scores of its candidate ``rows`` in the index over every document, without
        the full-corpus ranking: the engine is asked for those documents only (``score_rows``),
        the same scores as ``corpus_scores_batch(...)[n][rows[n]]`` at a fraction of the cost.
        Searched by ``workers`` processes; a failed query gives its ``RetrieverFailed``."""
        if len(rows) != len(queries):
            raise ValueError(f"{len(rows)} candidate lists for {len(queries)} queries")
        return self._batch(
            queries,
            all_docs,
            lambda n, ix, kws: (ix, kws, list(rows[n]), len(all_docs)),
            score_rows_task,
        )

    def _batch(self, queries: list[str], all_docs: list[str], args, task) -> list:
        """``task(args(n, index path, keywords))`` per query in the worker pool; a query without
        keywords or one the engine fails on gives its ``RetrieverFailed`` in place."""
        if not queries:
            return []
        ix_path = self._index(all_docs, keep=True)
        tasks, out = [], []
        for n, q in enumerate(queries):
            if skip := self.skipped(q):
                out.append(skip)
                continue
            kws = self.query_keywords(q)
            out.append(None if kws else RetrieverFailed("query has neither formulas nor terms"))
            if kws:
                tasks.append(args(n, ix_path, kws))
        results = iter(_map_searches(tasks, self.workers, task))
        for n, r in enumerate(out):
            if r is None:
                got = next(results)
                out[n] = RetrieverFailed(got) if isinstance(got, str) else got
        return out

    @property
    def candidates_by_row(self) -> bool:
        """Candidate scores read from the corpus index by document (``candidate_scores_batch``):
        exact only for the exhaustive engine (``depth: 0``); a pruned top-k is a different list."""
        return self.candidates_from_corpus and self.depth == 0

    @property
    def index_covers_corpus(self) -> bool:
        """Whether its candidates are scored in the index over every document (their scores
        depend on the other documents' statistics): that index is the one to build and keep."""
        return self.candidates_by_row

    @property
    def index_needs_corpus(self) -> bool:
        """Whether the index over every document serves the full-corpus track only. With
        ``candidates: corpus`` it serves the candidates too; ``own-index`` builds one per query."""
        return not self.candidates_by_row

    def build_index(self, docs: list[str], path: Path) -> None:
        """The engine's index over every document, written under ``path`` (kept on disk: every
        domain's run, in any process, searches it)."""
        path.mkdir(parents=True, exist_ok=True)
        # the engine writes many small files: on tmpfs, then copied (sample: 212 s on disk)
        ix_path = self._index(docs, keep=False)
        try:
            shutil.copytree(ix_path, path / "ix")
        finally:
            _discard(os.path.dirname(ix_path))

    def load_index(self, docs: list[str], path: Path) -> None:
        if not (path / "ix").is_dir():
            raise ValueError(f"no Approach Zero index under {path}")
        _CORPUS_INDEXES[self._key(docs)] = str(path / "ix")

    def _key(self, docs: list[str]) -> tuple:
        """An index's key: its documents and how they were written for the engine."""
        return (self.query, docs_key(docs))

    def engine_text(self, doc: str) -> str:
        """A document as the engine indexes it: prose, and formulas as [imath] spans (with
        ``query: reference``, the reference's delimiters and spacing)."""
        if self.query == "terms":
            return to_engine_text(doc)
        return " ".join(
            c["str"] if c["type"] == "term" else f"[imath]{c['str']}[/imath]"
            for c in reference_keywords(doc)
        )

    def _index(self, docs: list[str], keep: bool) -> str:
        """Path of an index over ``docs``: the kept one for this document set, or a new one."""
        key = self._key(docs)
        if keep and key in _CORPUS_INDEXES:
            return _CORPUS_INDEXES[key]
        tmp = _tmp_dir()
        ix_path = os.path.join(tmp, "ix")
        try:
            _write_index(ix_path, [self.engine_text(d) for d in docs])
        except RetrieverFailed:
            _discard(tmp)
            raise
        if keep:
            _CORPUS_INDEXES[key] = ix_path
        return ix_path

    def _search(self, query: str, docs: list[str], keep: bool) -> np.ndarray:
        if skip := self.skipped(query):
            raise skip
        kws = self.query_keywords(query)
        if not kws:
            raise RetrieverFailed("query has neither formulas nor terms")
        ix_path = None
        try:
            ix_path = self._index(docs, keep)
            scores = search(ix_path, kws, len(docs), self.depth)
        finally:
            if not keep and ix_path:
                _discard(os.path.dirname(ix_path))
        if isinstance(scores, str):
            raise RetrieverFailed(scores)
        return scores


def _write_index(ix_path: str, docs: list[str]) -> None:
    """An engine index over ``docs`` (engine texts) at ``ix_path``; each document's url is its
    row."""
    import pya0

    with quiet_c_output():
        ix = pya0.index_open(ix_path, option="w")
        if ix is None:
            raise RetrieverFailed("cannot open an Approach Zero index")
        writer = pya0.index_writer(ix)
        for i, d in enumerate(docs):
            pya0.writer_add_doc(writer, content=d, url=str(i))
        pya0.writer_flush(writer)
        pya0.writer_close(writer)
        pya0.index_close(ix)


_POOLS: dict[int, object] = {}


def _map_searches(tasks: list, workers: int, task=search_task) -> list:
    """The searches, in ``workers`` processes when it pays; a broken pool (a worker killed)
    falls back to searching here."""
    if workers <= 1 or len(tasks) < 2:
        return [task(t) for t in tasks]
    from concurrent.futures.process import BrokenProcessPool

    try:
        return list(_pool(workers).map(task, tasks, chunksize=4))
    except BrokenProcessPool:
        _POOLS.pop(workers, None)
        return [task(t) for t in tasks]


def _pool(workers: int):
    """One spawned worker pool per size for the whole process (shut down at exit)."""
    if workers not in _POOLS:
        import atexit
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"))
        atexit.register(pool.shutdown, cancel_futures=True)
        _POOLS[workers] = pool
    return _POOLS[workers]


KINDS = (
    Kind(
        "approach0", Approach0Retriever, model_of=lambda entry: ("pya0", "pya0==0.3.7", "approach0")
    ),
)
