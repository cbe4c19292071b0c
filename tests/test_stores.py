"""The stores on both backends: same answers, idempotent writes, many writers at once."""

import threading
import time

import numpy as np
import pytest

from saber_assets.tournament.engine import Judgment
from saber_assets.tournament.store import SQLJudgmentStore
from saber_resources.cache import EmbeddingCache, LLMCache
from saber_resources.stores import DuckDBStore, PostgresStore
from saber_resources.warehouse import Warehouse


@pytest.fixture(params=["duckdb", "postgres"])
def store(request, tmp_path):
    if request.param == "duckdb":
        return DuckDBStore(Warehouse(path=str(tmp_path / "stores.duckdb")).connect)
    dsn = request.getfixturevalue("postgres_dsn")
    db = PostgresStore(dsn)
    name = f"t_{abs(hash(request.node.name)) % 10**8}"
    db.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    db.execute(f"CREATE SCHEMA {name}")
    return PostgresStore(f"{dsn}?options=-csearch_path%3D{name}")


def _judgment(q, r, a, b, winner="x", p=None):
    return Judgment(q, r, a, b, a, winner, "judge", "v1", "h", None, None, 4096, p)


def test_caches_and_judgments_round_trip_and_ignore_duplicates(store):
    llm = LLMCache(store)
    rows = [
        ("h1", {"messages": [["user", "hi"]]}, "1", {"1": -0.1}, True, None, "stop"),
        ("h2", {"messages": [["user", "yo"]]}, "zzz", None, False, "no box", "length"),
    ]
    llm.put_many("b", "m", "v", rows)
    llm.put_many("b", "m", "v", [("h1", {}, "changed?", None, True, None, "stop")])  # no-op
    got = llm.get_many("b", "m", "v", ["h1", "h2", "h3"])
    assert (
        set(got) == {"h1", "h2"} and got["h1"].text == "1" and got["h1"].top_logprobs == {"1": -0.1}
    )
    assert got["h2"].finish_reason == "length" and not got["h2"].parsed_ok
    assert llm.failures()["answer"].to_list() == ["zzz"]
    assert (
        LLMCache(store).get_many("b", "m", "other", ["h1"]) == {}
    )  # a second open migrates nothing
    emb = EmbeddingCache(store)
    vecs = np.arange(6, dtype=np.float32).reshape(2, 3)
    emb.put_many("model", "r", ["a", "b"], vecs)
    emb.put_many("model", "r", ["a"], vecs[1:] * 9)
    back = emb.get_many("model", "r", ["a", "b", "c"])
    assert np.array_equal(back["a"], vecs[0]) and np.array_equal(back["b"], vecs[1])
    js = SQLJudgmentStore(store)
    js.add("run", [_judgment("q", 1, "a", "b", p=0.75), _judgment("q", 1, "c", "d", None)])
    js.add("run", [_judgment("q", 1, "a", "b", "OTHER")])
    loaded = sorted(js.load("run"), key=lambda j: j.a)
    assert [j.winner for j in loaded] == ["x", None] and loaded[0].p_first == 0.75
    assert loaded[0].max_tokens == 4096
    frame = js.frame("run")
    assert frame.height == 2 and frame["p_first"].to_list()[0] == 0.75


def test_many_writers_lose_nothing_and_double_nothing(store):
    """8 threads write overlapping judgments at once: every key once, none lost."""
    js = SQLJudgmentStore(store)
    keys = [(f"q{k % 10}", k // 10 + 1, f"a{k}", f"b{k}") for k in range(400)]

    errors = []

    def writer(offset):
        try:
            for start in range(0, len(keys), 25):
                part = keys[(start + offset * 50) % 400 :][:25]
                js.add("many", [_judgment(*k) for k in part])
        except Exception as exc:  # a writer that dies must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    loaded = js.load("many")
    assert len(loaded) == len({(j.query, j.round, j.a, j.b) for j in loaded}) == 400


def test_postgres_dsn_is_not_in_the_repr(postgres_dsn):
    assert "127.0.0.1" not in repr(PostgresStore(postgres_dsn))


def test_duckdb_races_are_retried_and_real_errors_are_not():
    """Two threads inserting one key at once (DuckDB refuses the second at commit) is retried;
    any other error surfaces at once. (A connection that met a new instance before its scan
    functions existed, seen in CI with eight writers, cannot happen since the files attach to
    one instance made before any connection: ``duckdb_files``.)"""
    import duckdb

    from saber_resources.stores import _retry_races

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise duckdb.TransactionException("Conflict on tuple deletion!")
        return "ok"

    assert _retry_races(flaky) == "ok" and len(calls) == 3

    def broken():
        calls.append(1)
        raise duckdb.CatalogException("Table with name judgments does not exist!")

    calls.clear()
    with pytest.raises(duckdb.CatalogException, match="judgments"):
        _retry_races(broken)
    assert len(calls) == 1


def test_postgres_tables_created_by_many_sessions_at_once(postgres_dsn):
    """Annotation chunks that start together on a fresh database all create the store tables:
    without the DDL lock one of two concurrent CREATE TABLE IF NOT EXISTS fails on pg_type's
    unique index (a CI build lost a chunk to it)."""
    from saber_resources.stores import TABLES, ensure_table

    admin = PostgresStore(postgres_dsn)
    errors: list[Exception] = []
    for trial in range(6):
        schema = f"ddl_race_{trial}"
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.execute(f"CREATE SCHEMA {schema}")
        dsn = f"{postgres_dsn}?options=-csearch_path%3D{schema}"
        sessions = [PostgresStore(dsn) for _ in range(6)]
        for s in sessions:
            s.fetch("SELECT 1")  # connected before the barrier: the DDL is what races
        barrier = threading.Barrier(len(sessions))

        def create(db, barrier=barrier):
            barrier.wait()
            try:
                for name in TABLES:
                    ensure_table(db, name)
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=create, args=(s,)) for s in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        tables = admin.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", [schema]
        )
        assert sorted(t for (t,) in tables) == sorted(TABLES)
    assert errors == []


def test_postgres_inserts_rows_in_primary_key_order():
    """Overlapping inserts from two sessions take their index locks in one order (no deadlock):
    the rows go to the server sorted by the table's primary key."""
    import contextlib

    import polars as pl

    from saber_resources.stores import PostgresStore, primary_key

    sent = []

    class Cursor:
        def executemany(self, sql, rows):
            sent.extend(rows)

    class Conn:
        def transaction(self):
            return contextlib.nullcontext()

        def cursor(self):
            return contextlib.nullcontext(Cursor())

    store = PostgresStore("postgresql://unused")
    store._conn = lambda: Conn()
    assert primary_key("embedding_cache") == ["model", "revision", "text_hash"]
    df = pl.DataFrame(
        {"model": ["m"] * 3, "revision": ["r"] * 3, "text_hash": ["c", "a", "b"], "dim": [1, 2, 3]}
    )
    store.insert_ignore("embedding_cache", df)
    assert [r[2] for r in sent] == ["a", "b", "c"]


def test_human_labels_on_both_backends_are_stored_once(store):
    """People's labels: a re-pull adds nothing, on DuckDB and PostgreSQL alike."""
    from datetime import datetime

    import polars as pl

    from saber_assets.study.human_study import LABEL_SCHEMA, store_labels, stored_labels

    rows = [
        {"task_id": f"s:{k}", "annotator": f"ls:{a}", "annotator_email": None, "query": "q",
         "shown_first": "c1", "shown_second": "c2", "label": "first" if k % 2 else "tie",
         "labelled_at": datetime(2026, 12, 1, 10, k), "lead_time_s": 3.5, "study": "s",
         "ls_task": k, "ls_annotation": 10 * k + a}
        for k in range(5)
        for a in (1, 2)
    ]  # fmt: skip
    labels = pl.DataFrame(rows, schema=LABEL_SCHEMA)
    assert store_labels(store, labels) == (10, 0)
    assert store_labels(store, labels.head(4)) == (0, 4)
    back = stored_labels(store, "s")
    assert back.height == 10 and back.schema == pl.Schema(LABEL_SCHEMA)
    assert back.sort("task_id", "annotator").equals(labels.sort("task_id", "annotator"))


def test_discovered_models_on_both_backends(store, tmp_path, monkeypatch):
    """The discovery table's inserts, status moves and JSON entries read back the same on
    DuckDB and PostgreSQL."""
    from saber_assets.config import DiscoveryEndpoint
    from saber_assets.retrievers.discovery import discovered, effective_registry, tick
    from saber_testing.fake_openai import FakeOpenAI
    from tests.test_discovery import embed_or_refuse

    reg = tmp_path / "r.yaml"
    reg.write_text("retrievers:\n  - {name: bm25, kind: bm25}\n")
    with FakeOpenAI(answer=embed_or_refuse, models=["emb-a", "chat-b"]) as srv:
        ep = DiscoveryEndpoint(name="gpu", base_url=srv.url, template={"long_text": "truncate"})
        first = tick(store, [ep], {"bm25"})
        assert first.proposed == ["gpu--emb-a"] and first.chat == ["chat-b"]
        [entry] = [e for e in effective_registry(reg, store) if e.discovered]
        assert entry.params["long_text"] == "truncate" and entry.discovered.status == "proposed"
        srv.models = ["chat-b"]
        assert tick(store, [ep], {"bm25"}).gone == ["gpu--emb-a"]
        srv.models = ["emb-a", "chat-b"]
        assert tick(store, [ep], {"bm25"}).returned == ["gpu--emb-a"]
    rows = discovered(store)
    assert rows.select("name", "status", "dimension").rows() == [
        ("gpu--chat-b", "chat", None), ("gpu--emb-a", "proposed", 16)
    ]  # fmt: skip
    assert (rows["last_seen"] >= rows["first_seen"]).all()


def test_a_connection_killed_mid_insert_is_retried_and_loses_nothing(postgres_dsn):
    """`pg_terminate_backend` on the store's sessions while judgments are being inserted (a
    batch in flight, and between batches), four times: each interrupted transaction is
    rolled back by the server and retried on a new connection; afterwards every row is there
    exactly once (the primary keys checked)."""
    import polars as pl

    from saber_resources.stores import ensure_table

    schema = "killed_mid_insert"
    admin = PostgresStore(postgres_dsn)
    admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    admin.execute(f"CREATE SCHEMA {schema}")
    db = PostgresStore(f"{postgres_dsn}?options=-csearch_path%3D{schema}")
    ensure_table(db, "judgments")
    store = SQLJudgmentStore(db)
    mine = (
        "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
        "AND backend_type = 'client backend' AND datname = current_database()"
    )
    stop = threading.Event()
    killed: list[int] = []

    def killer() -> None:
        # four kills at most: fewer than the store's five attempts per statement, so that even
        # four in a row on one slow statement (a loaded machine) leave it a fifth
        killer_db = PostgresStore(postgres_dsn)
        while not stop.is_set() and len(killed) < 4:
            time.sleep(0.05)
            for (pid,) in killer_db.fetch(mine):
                if pid not in (admin_pid, killer_pid(killer_db)) and len(killed) < 4:
                    killer_db.fetch("SELECT pg_terminate_backend(?)", [pid])
                    killed.append(pid)

    def killer_pid(kdb) -> int:
        return kdb.fetch("SELECT pg_backend_pid()")[0][0]

    admin_pid = admin.fetch("SELECT pg_backend_pid()")[0][0]
    thread = threading.Thread(target=killer)
    thread.start()
    try:
        batches = 40
        for b in range(batches):
            store.add(
                "run",
                [_judgment(f"q{b}", r, f"a{k}", f"b{k}") for r in range(5) for k in range(100)],
            )
    finally:
        stop.set()
        thread.join()
    n, distinct = db.fetch(
        "SELECT count(*), count(DISTINCT (run_key, query, round, a, b)) FROM judgments"
    )[0]
    assert len(killed) >= 3 and db.reconnects >= 3, (len(killed), db.reconnects)
    assert n == distinct == batches * 5 * 100
    frame = store.frame("run")
    assert frame.height == n and frame["query"].n_unique() == batches
    assert isinstance(frame, pl.DataFrame)
