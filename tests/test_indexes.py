"""Retriever indexes: built once, read back into a fresh retriever with identical scores, and
nothing of the document side redone; stale, broken or half-written indexes are rebuilt."""

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from saber_assets.benchmark.data import Benchmark
from saber_assets.benchmark.texts import SETTINGS, document_side, document_texts
from saber_assets.retrievers import a0_search, indexes
from saber_assets.retrievers import approach0 as a0
from saber_assets.retrievers.approach0 import Approach0Retriever
from saber_assets.retrievers.assets import drop_per_setting_indexes
from saber_assets.retrievers.indexes import (
    documents_to_index,
    ensure_index,
    has_index,
    index_documents,
)
from saber_assets.retrievers.lexical import BM25Retriever, JaccardRetriever, TfidfRetriever
from saber_assets.retrievers.token_table import TokenTable
from saber_assets.retrievers.tokenize import math_tokens, plain_tokens
from saber_assets.runs.evaluate import evaluate

from .test_bulk_scoring import _bench, _dense, _ssemb

MAKERS = {
    "bm25": lambda: BM25Retriever("b"),
    "bm25-corpus-idf": lambda: BM25Retriever("b", idf="corpus"),
    "bm25-plain": lambda: BM25Retriever("b", tokenizer="plain", idf="corpus"),
    "tfidf": lambda: TfidfRetriever("t"),
    "jaccard": lambda: JaccardRetriever("j"),
    "dense": _dense,
    "ssemb": _ssemb,
}


class Counting:
    """Wraps a tokenizer or an embedder's encode and counts the texts it is given."""

    def __init__(self, fn):
        self.fn, self.texts = fn, []

    def __call__(self, arg):
        self.texts += arg if isinstance(arg, list) else [arg]
        return self.fn(arg)


def _spy(r):
    """The retriever's document-side worker, counting (tokenizer, or the document embedder)."""
    inner = r.text if hasattr(r, "text") else r
    if hasattr(inner, "docs"):
        spy = Counting(inner.docs.inner.encode)
        inner.docs.inner = type("E", (), {"encode": spy, "model_id": "hash", "revision": "1"})()
        return spy
    spy = Counting(r._tokenize)
    r._tokenize = spy
    return spy


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("setting", ["statement-statement", "statement-full"])
def test_a_loaded_index_scores_exactly_like_fitting_and_redoes_no_document_work(
    name, setting, tmp_path
):
    bench = _bench()
    docs = document_texts(bench, setting)
    entry = {"name": name, "kind": name}
    built = ensure_index(MAKERS[name](), entry, setting, docs, tmp_path / "ix")
    assert built.built and built.bytes > 0 and built.documents == len(docs)

    fresh = MAKERS[name]()
    spy = _spy(fresh)
    # a load reads the size the build wrote down instead of walking the index's files
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(indexes, "_size", lambda path: pytest.fail(f"walked {path}"))
        info = ensure_index(fresh, entry, setting, docs, tmp_path / "ix")
    assert not info.built and info.rebuilt_because is None and info.bytes == built.bytes
    with_index = evaluate(fresh, bench, setting, 10)
    without = evaluate(MAKERS[name](), bench, setting, 10)
    # the same floats, not close ones: a speed change, not a metric change
    assert with_index["scores"].to_list() == without["scores"].to_list()
    for col in ("ndcg", "full_ndcg_prime", "full_recall_top5_at100"):
        assert with_index[col].to_list() == without[col].to_list(), col
    # only query texts that are not documents were tokenised / embedded after the load
    assert not set(spy.texts) & set(docs), name


def test_approach0_reads_its_prebuilt_index_and_scores_the_same(tmp_path, monkeypatch):
    bench = _bench(n_docs=120, n_queries=8)
    setting = "statement-statement"
    docs = document_texts(bench, setting)
    a0._CORPUS_INDEXES.clear()
    ensure_index(
        Approach0Retriever(workers=1), {"kind": "approach0"}, setting, docs, tmp_path / "a"
    )
    a0._CORPUS_INDEXES.clear()  # a new process: nothing kept in memory

    def no_writes(*_):
        raise AssertionError("the index was rebuilt")

    fresh = Approach0Retriever(workers=1)
    ensure_index(fresh, {"kind": "approach0"}, setting, docs, tmp_path / "a")
    with monkeypatch.context() as m:
        m.setattr(a0, "_write_index", no_writes)
        with_index = evaluate(fresh, bench, setting, 10)
    a0._CORPUS_INDEXES.clear()
    without = evaluate(Approach0Retriever(workers=1), bench, setting, 10)
    assert with_index["scores"].to_list() == without["scores"].to_list()
    assert with_index["full_ndcg_prime"].to_list() == without["full_ndcg_prime"].to_list()
    # the corpus index serves the candidates too, with or without the corpus track; an
    # own-index-per-query or pruned (depth) Approach Zero without the track has none
    assert has_index(Approach0Retriever(), full_corpus=False)
    assert has_index(Approach0Retriever(), full_corpus=True)
    assert not has_index(Approach0Retriever(candidates="own-index"), full_corpus=False)
    assert not has_index(Approach0Retriever(depth=100), full_corpus=False)
    assert has_index(Approach0Retriever(depth=100), full_corpus=True)


def test_without_the_corpus_track_approach0_reads_the_corpus_index_it_built(tmp_path, monkeypatch):
    """Approach Zero scores candidates in the index over every document even without the
    full-corpus track: that is the index the stage builds, and a run in a new process reads it
    instead of indexing again; a lexical retriever without the track indexes the candidates."""
    bench = _bench(n_docs=120, n_queries=8)
    setting = "statement-statement"
    docs = documents_to_index(Approach0Retriever(workers=1), bench, setting, full_corpus=False)
    assert docs == document_texts(bench, setting)
    for name in ("bm25", "dense"):  # their candidates' scores do not depend on the others
        union = documents_to_index(MAKERS[name](), bench, setting, full_corpus=False)
        assert len(union) < len(docs), name
    a0._CORPUS_INDEXES.clear()
    ensure_index(Approach0Retriever(workers=1), {"kind": "approach0"}, setting, docs, tmp_path)
    a0._CORPUS_INDEXES.clear()  # a new process

    def no_writes(*_):
        raise AssertionError("the index was built again")

    fresh = Approach0Retriever(workers=1)
    ensure_index(fresh, {"kind": "approach0"}, setting, docs, tmp_path)
    with monkeypatch.context() as m:
        m.setattr(a0, "_write_index", no_writes)
        read = evaluate(fresh, bench, setting, 10, full_corpus=False)
    a0._CORPUS_INDEXES.clear()
    built = evaluate(Approach0Retriever(workers=1), bench, setting, 10, full_corpus=False)
    assert read["scores"].to_list() == built["scores"].to_list()


def test_approach0_candidates_without_the_corpus_track_are_its_corpus_scores(monkeypatch):
    """Without the full-corpus track the candidates are asked of the corpus index by document
    (no exhaustive search, which writes a snippet per hit): the scores the track's one search
    gives them, to the engine's printed precision (3 decimals; measured on 13.5K documents: 2 of
    3,793 sampled scores differ by 0.001), and the same nDCG."""
    base = _bench(n_docs=200, n_queries=8)
    # a word only the first documents hold: asked for a later candidate the engine finds no
    # match at or after it ("No hit found"), a 0, not a failed query; and a query that matches
    # nothing, which fails in both tracks alike
    docs = base.documents.with_columns(
        pl.when(pl.int_range(pl.len()) < 3)
        .then(pl.col("problem") + " zephyrine")
        .otherwise(pl.col("problem"))
        .alias("problem")
    )
    extra = [
        {"id": "qz", "problem": "zephyrine", "solution": "", "candidates": [1, 2, 150, 199],
         "relevance_scores": [4.0, 3.0, 1.0, 0.5], "domains": ["A"]},
        {"id": "qn", "problem": "qwertyzzy", "solution": "", "candidates": [1, 2, 3],
         "relevance_scores": [1.0, 2.0, 3.0], "domains": ["A"]},
    ]  # fmt: skip
    queries = pl.concat([base.queries, pl.DataFrame(extra, schema=base.queries.schema)])
    bench = Benchmark(queries, docs, base.manifest)
    setting = "statement-statement"
    a0._CORPUS_INDEXES.clear()
    a0_search._DOCIDS.clear()
    with_track = evaluate(Approach0Retriever(workers=1), bench, setting, 10, full_corpus=True)

    def no_exhaustive(*_):
        raise AssertionError("an exhaustive search without the full-corpus track")

    with monkeypatch.context() as m:
        m.setattr(a0, "search", no_exhaustive)
        m.setattr(a0_search, "search", no_exhaustive)
        by_row = evaluate(Approach0Retriever(workers=1), bench, setting, 10, full_corpus=False)
    pooled = evaluate(Approach0Retriever(workers=2), bench, setting, 10, full_corpus=False)
    assert by_row["scores"].to_list() == pooled["scores"].to_list()
    a, b = with_track["scores"].to_list(), by_row["scores"].to_list()
    assert a[-1] is None and b[-1] is None  # the query that matches nothing
    assert all(np.allclose(x, y, rtol=0, atol=1.5e-3) for x, y in zip(a[:-1], b[:-1], strict=True))
    assert sum(x != y for x, y in zip(a, b, strict=True)) <= 1  # at most a last-decimal slip
    assert by_row["ndcg"].to_list() == pytest.approx(with_track["ndcg"].to_list(), abs=1e-9)
    assert by_row["full_ndcg_prime"].to_list() == [None] * by_row.height
    assert by_row["error"].to_list() == with_track["error"].to_list()
    assert by_row["failed"].to_list() == [False] * (by_row.height - 1) + [True]
    assert by_row["error"][-1] == "Approach Zero: No hit found"
    assert b[-2][2:] == [0.0, 0.0] and min(b[-2][:2]) > 0
    assert sum(sum(v > 0 for v in x) for x in b[:-1]) > 20  # the engine matched candidates
    # the own-index system (per-query statistics) is a different one, and stays available
    own_index = Approach0Retriever(workers=1, candidates="own-index")
    own = evaluate(own_index, bench, setting, 10, full_corpus=False)
    assert own["scores"].to_list() != b


def test_changed_broken_and_half_written_indexes_are_rebuilt(tmp_path):
    bench = _bench(n_docs=60, n_queries=5)
    docs = document_texts(bench, "statement-statement")
    path, entry = tmp_path / "ix", {"kind": "tfidf"}
    ensure_index(TfidfRetriever("t"), entry, "s", docs, path)
    # one document changed: a different key, rebuilt, and the reason given
    info = ensure_index(TfidfRetriever("t"), entry, "s", [*docs[:-1], "changed"], path)
    assert info.built and info.rebuilt_because == "documents or parameters changed"
    # a parameter changed: rebuilt too
    info = ensure_index(TfidfRetriever("t"), {"kind": "tfidf", "p": 1}, "s", docs, path)
    assert info.built and "changed" in info.rebuilt_because
    # a broken file: rebuilt, with what was wrong
    (path / "tfidf.npz").write_bytes(b"not a matrix")
    info = ensure_index(TfidfRetriever("t"), {"kind": "tfidf", "p": 1}, "s", docs, path)
    assert info.built and info.rebuilt_because.startswith("unreadable index")
    # a build killed halfway leaves the previous index in place and no scratch folder
    before = json.loads((path / "manifest.json").read_text())["key"]

    class Dies(TfidfRetriever):
        def _save_corpus(self, docs, path):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ensure_index(Dies("t"), {"kind": "tfidf", "p": 2}, "s", docs, path)
    assert json.loads((path / "manifest.json").read_text())["key"] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ix"]
    info = ensure_index(TfidfRetriever("t"), {"kind": "tfidf", "p": 1}, "s", docs, path)
    assert not info.built


def test_without_the_full_corpus_an_index_covers_the_candidates_only():
    docs = ["a", "b", "c", "d", "e"]
    assert index_documents(docs, [[3, 1], [1, 4]], full_corpus=False) == ["b", "d", "e"]
    assert index_documents(docs, [[3, 1]], full_corpus=True) == docs


def test_approach0_depth_asks_the_engine_for_its_top_documents_only(monkeypatch):
    """depth > 0 is the engine's own top-k (an opt-in system, not the exhaustive ranking cut):
    at most `depth` documents score, and the default ranks every document."""
    bench = _bench(n_docs=200, n_queries=4)
    a0._CORPUS_INDEXES.clear()
    shallow = evaluate(Approach0Retriever(workers=1, depth=7), bench, "statement-statement", 10)
    full = evaluate(Approach0Retriever(workers=1), bench, "statement-statement", 10)
    assert max(int(np.count_nonzero(s)) for s in shallow["scores"]) <= 7
    assert max(int(np.count_nonzero(s)) for s in full["scores"]) > 7


def test_embeddings_are_cached_chunk_by_chunk_so_a_killed_run_keeps_them():
    from saber_resources.cache import EmbeddingCache
    from saber_resources.embeddings import CachedEmbedder
    from saber_resources.warehouse import Warehouse

    from .test_bulk_scoring import HashEmbedder

    class DiesAfter(HashEmbedder):
        def __init__(self, calls):
            self.left, self.seen = calls, []

        def encode(self, texts):
            if self.left == 0:
                raise KeyboardInterrupt
            self.left -= 1
            self.seen += texts
            return super().encode(texts)

    wh = Warehouse(path=":memory:")
    texts = [f"document number {i}" for i in range(10)]
    first = CachedEmbedder(DiesAfter(2), EmbeddingCache(wh.connect))
    first.chunk = 4
    with pytest.raises(KeyboardInterrupt):
        first.encode(texts)
    again = CachedEmbedder(DiesAfter(5), EmbeddingCache(wh.connect))
    again.chunk = 4
    vecs = again.encode(texts)
    assert again.inner.seen == texts[8:]  # the two finished chunks came from the cache
    assert np.array_equal(vecs, HashEmbedder().encode(texts))


class _FakeEngine:
    """pya0's calls as ``score_rows`` uses them: documents at docids 1.. (url = row, one docid
    skipped after row 2), a search by docid that skips forward to the next matching document."""

    def __init__(self, matching: dict[int, float], answer_below: bool = False):
        self.urls = {1: 0, 2: 1, 3: 2, 5: 3, 6: 4}  # docid 4 is a hole
        self.matching, self.answer_below = matching, answer_below

    def index_open(self, path, option):
        return object()

    def index_close(self, ix):
        pass

    def index_lookup_doc(self, ix, docid):
        return {"url": str(self.urls[docid])} if docid in self.urls else None

    def search(self, ix, keywords, verbose, topk, docid):
        later = sorted(d for d, u in self.urls.items() if d >= docid and u in self.matching)
        if self.answer_below and docid - 1 in self.urls:
            later = [docid - 1]
        if not later:  # as pya0 answers an empty result
            return json.dumps({"ret_code": 2, "ret_str": "No hit found", "tot_pages": 0})
        url = self.urls[later[0]]
        hits = [{"field_url": str(url), "score": self.matching.get(url, 1.0)}]
        return json.dumps({"ret_code": 0, "hits": hits})


def test_scores_by_row_read_the_engines_skip_forward_holes_and_misanswers(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pya0", _FakeEngine({1: 7.5, 3: -2.0, 4: 1.25}))
    a0_search._DOCIDS.clear()
    got = a0_search.score_rows("ix-a", [{"type": "term", "str": "x"}], [0, 1, 2, 3, 4], 5)
    # row 0 does not match (the engine answers row 1): 0; row 3's negative score reads as 0,
    # as in the exhaustive search; row 4 sits after the docid hole
    assert got.tolist() == [0.0, 7.5, 0.0, 0.0, 1.25]
    assert a0_search._DOCIDS[("ix-a",)] == {0: 1, 1: 2, 2: 3, 3: 5, 4: 6}
    missing = a0_search.score_rows("ix-a", [{"type": "term", "str": "x"}], [5], 6)
    assert missing == "document row 5 is not in the Approach Zero index ix-a"
    # rows after the last match: "No hit found" there is a 0, not a failure
    monkeypatch.setitem(__import__("sys").modules, "pya0", _FakeEngine({1: 2.0}))
    after = a0_search.score_rows("ix-a", [{"type": "term", "str": "x"}], [4, 1, 3], 5)
    assert after.tolist() == [0.0, 2.0, 0.0]
    # a query no document matches fails, as the exhaustive search does
    monkeypatch.setitem(__import__("sys").modules, "pya0", _FakeEngine({}))
    none = a0_search.score_rows("ix-a", [{"type": "term", "str": "x"}], [0, 1], 5)
    assert none == "Approach Zero: No hit found"
    engine = _FakeEngine({0: 1.0}, answer_below=True)
    monkeypatch.setitem(__import__("sys").modules, "pya0", engine)
    a0_search._DOCIDS.clear()
    wrong = a0_search.score_rows("ix-b", [{"type": "term", "str": "x"}], [2], 5)
    assert wrong == "Approach Zero answered document '1' when asked for row 2 (docid 3)"


def test_an_index_rebuilt_in_place_is_mapped_afresh(tmp_path, monkeypatch):
    """A long-lived search worker keeps each index's docid map; an index rebuilt and moved into
    the same path (a changed corpus) is a new folder, so its map is read again."""
    engine = _FakeEngine({1: 7.5})
    monkeypatch.setitem(__import__("sys").modules, "pya0", engine)
    a0_search._DOCIDS.clear()
    ix = tmp_path / "ix"
    ix.mkdir()
    kw = [{"type": "term", "str": "x"}]
    assert a0_search.score_rows(str(ix), kw, [1], 5).tolist() == [7.5]
    ix.rename(tmp_path / "old")
    ix.mkdir()  # the rebuilt index: its documents now at other docids
    engine.urls = {1: 1, 2: 0, 3: 2, 4: 3, 5: 4}
    assert a0_search.score_rows(str(ix), kw, [1], 5).tolist() == [7.5]
    assert len(a0_search._DOCIDS) == 2


@pytest.mark.parametrize("name", ["bm25", "tfidf", "jaccard"])
def test_an_index_holds_its_documents_tokens_columnar_one_document_set_at_a_time(name, tmp_path):
    """At 283K documents, token lists kept as Python objects (every token a string) cost ~5 GB
    a setting and piled up across settings: an index's tokens stay one Arrow column, replaced
    when the next document set is built or read, and a retriever that built one setting scores
    the next exactly like a fresh one."""
    bench = _bench()
    r = MAKERS[name]()
    statements = document_texts(bench, "statement-statement")
    full = document_texts(bench, "full-full")
    ensure_index(r, {"kind": name}, "statement", statements, tmp_path / "s")
    ensure_index(r, {"kind": name}, "full", full, tmp_path / "f")
    assert not set(r._cache) & (set(statements) | set(full))  # documents never enter the cache
    assert set(r._stored.row_of) == set(full)
    assert isinstance(r._stored.table, TokenTable)
    assert [r.tok(d) for d in full[:20]] == [r._tokenize(d) for d in full[:20]]
    assert r.token_series(full[5:9]).to_list() == [r._tokenize(d) for d in full[5:9]]
    with_index = evaluate(r, bench, "full-full", 10)
    without = evaluate(MAKERS[name](), bench, "full-full", 10)
    assert with_index["scores"].to_list() == without["scores"].to_list()
    assert with_index["full_ndcg_prime"].to_list() == without["full_ndcg_prime"].to_list()


def test_a_corpus_tokenised_for_an_index_shares_one_string_per_token(tmp_path):
    texts = ["prime sum prime", "sum of a prime", "nothing here", "", "$x^2+1$ is prime"]
    table = TokenTable.of(math_tokens, texts)
    tokens = [table.tokens(r) for r in range(len(table))]
    assert tokens == [math_tokens(t) for t in texts]
    assert tokens[0][0] is tokens[0][2] is tokens[1][3]
    assert tokens[0][1] is tokens[1][0]
    assert [table.tokens(r) for r in range(len(texts))] == tokens
    assert table.series([4, 3, 0]).to_list() == [tokens[4], [], tokens[0]]
    table.save(tmp_path / "t")
    back = TokenTable.load(tmp_path / "t")
    assert [back.tokens(r) for r in range(len(back))] == tokens
    assert back.series([1]).to_list() == [tokens[1]]
    assert len(TokenTable.of(plain_tokens, [])) == 0
    chunked = TokenTable.of(math_tokens, texts, chunk=2)  # a vocabulary across chunks
    assert [chunked.tokens(r) for r in range(len(chunked))] == tokens
    assert list(chunked.vocab) == list(table.vocab)


def test_retrievers_of_one_tokenizer_share_its_token_table(tmp_path, monkeypatch):
    """Four indexes of the same documents under two tokenizers tokenise each document twice,
    not four times; each scores as it would alone; an index whose shared table is gone is
    rebuilt and says why."""
    bench = _bench(n_docs=60, n_queries=6)
    docs = document_texts(bench, "full-full")
    calls = {"math": 0, "plain": 0}
    from saber_assets.retrievers import lexical

    real = dict(lexical.TOKENIZERS)

    def counting(name):
        def tok(text):
            calls[name] += 1
            return real[name](text)

        return tok

    monkeypatch.setattr(lexical, "TOKENIZERS", {**real, "math": counting("math"),
                                                "plain": counting("plain")})  # fmt: skip
    shared = tmp_path / ".tokens"
    made = {
        "bm25": BM25Retriever("b"),
        "tfidf": TfidfRetriever("t"),
        "jaccard": JaccardRetriever("j"),
        "bm25-plain": BM25Retriever("p", tokenizer="plain", idf="corpus"),
    }
    for name, r in made.items():
        ensure_index(r, {"kind": name}, "full", docs, tmp_path / name / "full", shared=shared)
    assert calls == {"math": len(docs), "plain": len(docs)}
    assert len(list(shared.iterdir())) == 2
    for name, r in made.items():
        alone = evaluate(MAKERS[name](), bench, "full-full", 10)
        assert evaluate(r, bench, "full-full", 10)["scores"].to_list() == alone["scores"].to_list()
    for table in shared.iterdir():
        shutil.rmtree(table)
    indexes._LOADED.clear()  # a new process: nothing loaded yet
    again = ensure_index(
        TfidfRetriever("t"), {"kind": "tfidf"}, "full", docs, tmp_path / "tfidf" / "full",
        shared=shared,
    )  # fmt: skip
    assert again.built and "unreadable index" in again.rebuilt_because


def test_settings_that_show_the_same_documents_share_one_index(tmp_path):
    assert [document_side(s) for s in SETTINGS] == ["statement", "full", "full"]
    bench = _bench(n_docs=40, n_queries=5)
    assert document_texts(bench, "statement-full") == document_texts(bench, "full-full")
    with pytest.raises(ValueError, match="unknown setting"):
        document_side("full-statement")
    # folders of the per-setting layout are removed, the per-side ones kept
    for d in ("statement-statement", "full-full", "statement", "full"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "manifest.json").write_text("{}")
    assert drop_per_setting_indexes(tmp_path) == ["statement-statement", "full-full"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "statement"]


def test_approach0_temporary_indexes_leave_with_their_process_or_the_next_one(tmp_path):
    """A kept corpus index lives on tmpfs (memory) for its process's life, not longer: gone when
    the process exits; one that a killed process left is removed by the next process that
    indexes."""
    import os
    import subprocess
    import sys

    script = (
        "import os, sys\n"
        "from saber_assets.retrievers import approach0 as a0\n"
        "a0._tmp_root = lambda: sys.argv[1]\n"
        "r = a0.Approach0Retriever(workers=1)\n"
        "r.corpus_scores('solve $x^2 = 4$ for prime x', ['solve $x^2 = 4$', 'a prime number x'])\n"
        "assert [d for d in os.listdir(sys.argv[1]) if d.startswith(f'a0-{os.getpid()}-')]\n"
        "if sys.argv[2] == 'kill':\n"
        "    os._exit(9)\n"
    )
    root = tmp_path / "shm"
    root.mkdir()
    subprocess.run([sys.executable, "-c", script, str(root), "exit"], check=True)
    assert os.listdir(root) == []
    killed = subprocess.run([sys.executable, "-c", script, str(root), "kill"])
    assert killed.returncode == 9
    (left,) = os.listdir(root)
    mine = root / f"a0-{os.getpid()}-live"  # this process runs: kept
    mine.mkdir()
    other = root / "a0-notapid"  # not named for a process: left alone
    other.mkdir()
    assert a0.remove_orphans(str(root)) == [str(root / left)]
    assert sorted(os.listdir(root)) == sorted([mine.name, other.name])


def test_a_retrievers_next_domain_reuses_the_index_state_it_loaded(tmp_path, monkeypatch):
    """A build runs a retriever's domains one after another in one process: the second run's
    retriever takes the state the first loaded (read once), scores exactly as a fresh fit, and
    another retriever's load frees it."""
    bench = _bench(n_docs=40, n_queries=5)
    docs = document_texts(bench, "full-full")
    entry = {"kind": "bm25"}
    ensure_index(BM25Retriever("b"), entry, "full", docs, tmp_path / "b" / "full", use=False)
    indexes._LOADED.clear()
    loads = []
    real = BM25Retriever.load_index

    def counted(self, d, p):
        loads.append(p)
        return real(self, d, p)

    monkeypatch.setattr(BM25Retriever, "load_index", counted)
    first, second = BM25Retriever("b"), BM25Retriever("b")
    for r in (first, second):
        info = ensure_index(r, entry, "full", docs, tmp_path / "b" / "full")
        assert not info.built
    assert len(loads) == 1 and second._full is first._full
    want = evaluate(BM25Retriever("b"), bench, "full-full", 10)["scores"].to_list()
    assert evaluate(second, bench, "full-full", 10)["scores"].to_list() == want
    ensure_index(TfidfRetriever("t"), {"kind": "tfidf"}, "full", docs, tmp_path / "t" / "full")
    assert [Path(m[1]).parent.name for m in indexes._LOADED] == ["t"]


def test_token_tables_no_index_names_are_pruned_once_they_are_old(tmp_path):
    """A corpus changed: its old token tables go, but not one an index names, one being
    written beside a scratch index, or one written a moment ago by another build."""
    import os
    import time

    from saber_assets.retrievers.token_table import prune_token_tables

    indexes_root, tables = tmp_path / "indexes", tmp_path / "indexes" / ".tokens"
    for name in ("named", "scratch-named", "old", "fresh"):
        (tables / name).mkdir(parents=True)
    (indexes_root / "bm25" / "full").mkdir(parents=True)
    (indexes_root / "bm25" / "full" / "tokens.json").write_text(json.dumps({"shared": "named"}))
    (indexes_root / "bm25" / ".full.1.x").mkdir()
    (indexes_root / "bm25" / ".full.1.x" / "tokens.json").write_text(
        json.dumps({"shared": "scratch-named"})
    )
    (indexes_root / "tfidf" / "full").mkdir(parents=True)
    (indexes_root / "tfidf" / "full" / "tokens.json").write_text("{broken")
    hour_ago = time.time() - 7200
    for name in ("named", "scratch-named", "old"):
        os.utime(tables / name, (hour_ago, hour_ago))
    assert prune_token_tables(tables, indexes_root) == ["old"]
    assert sorted(p.name for p in tables.iterdir()) == ["fresh", "named", "scratch-named"]
    assert prune_token_tables(tmp_path / "none", indexes_root) == []
