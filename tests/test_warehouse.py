import os
import signal
import subprocess
import sys
import threading
import time

import polars as pl

from saber_resources.duckdb_files import DuckDBFile
from saber_resources.warehouse import Warehouse


def test_memory_warehouse_keeps_one_database(tmp_path):
    wh = Warehouse(path=":memory:")
    assert wh.replace_table("t", pl.DataFrame({"a": [1, 2, 3]})) == 3
    assert wh.query("SELECT sum(a) AS s FROM t")["s"].item() == 6
    wh.replace_table("empty", pl.DataFrame(schema={"x": pl.String}))
    assert wh.query("SELECT count(*) AS n FROM empty")["n"].item() == 0


def test_views_only_for_existing_parquet(tmp_path):
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "a.sql").write_text(
        "CREATE OR REPLACE VIEW a AS SELECT * FROM read_parquet('{parquet}/a.parquet');"
    )
    (sql / "b.sql").write_text(
        "CREATE OR REPLACE VIEW b AS SELECT * FROM read_parquet('{parquet}/b.parquet');"
    )
    pl.DataFrame({"x": [1]}).write_parquet(tmp_path / "a.parquet")
    wh = Warehouse(path=str(tmp_path / "w.duckdb"), parquet_dir=str(tmp_path), sql_dir=str(sql))
    assert wh.refresh_views() == ["a"]
    assert wh.query("SELECT x FROM a")["x"].to_list() == [1]


def test_a_locked_file_is_waited_for(tmp_path):
    """Another process holding the DuckDB write lock: the next connection waits, then proceeds."""
    path = tmp_path / "w.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(path)!r}); print('held', flush=True); time.sleep(1.5)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    t0 = time.monotonic()
    wh = Warehouse(path=str(path), lock_wait_s=30)
    assert wh.replace_table("t", pl.DataFrame({"a": [1]})) == 1
    assert time.monotonic() - t0 > 0.3  # it had to wait for the holder to exit
    holder.wait()


def test_parquet_assets_at_a_base_uri(tmp_path):
    """storage.base_uri: the IO manager writes and reads through fsspec/UPath (file:// here;
    s3:// and gs:// go the same way with their filesystem packages)."""
    from dagster import asset, materialize

    from saber_assets.definitions import make_definitions
    from saber_assets.io_managers import WarehouseParquetIOManager

    @asset(io_manager_key="parquet_io")
    def first() -> pl.DataFrame:
        return pl.DataFrame({"x": [1, 2]})

    @asset(io_manager_key="parquet_io")
    def second(first: pl.DataFrame) -> pl.DataFrame:
        return first.with_columns(y=pl.col("x") * 2)

    uri = f"file://{tmp_path}/bucket/saber"
    io = WarehouseParquetIOManager(base_dir=uri, warehouse=Warehouse(path=":memory:"))
    assert materialize([first, second], resources={"parquet_io": io}).success
    assert pl.read_parquet(tmp_path / "bucket" / "saber" / "second.parquet")["y"].to_list() == [
        2,
        4,
    ]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "name: u\ncorpus: {sources: [{name: math, bundled: math}]}\n"
        f"storage: {{base_uri: '{uri}'}}\n"
    )
    io_def = make_definitions(cfg, tmp_path / "home").resources["parquet_io"]
    assert io_def.base_dir == f"{uri}/u/parquet"


def test_every_partition_of_a_one_partition_parent_comes_as_a_dict(tmp_path):
    """A fan-in input (``dict[str, DataFrame]``) over a parent with a single partition (an
    ontology with one domain) gets {key: frame}, as with two; a one-partition input stays a
    frame. Dagster's own loader hands the lone partition over bare and the type check failed."""
    from dagster import StaticPartitionsDefinition, asset, materialize

    from saber_assets.io_managers import WarehouseParquetIOManager

    for keys in (["Algebra"], ["Algebra", "Geometry"]):

        @asset(io_manager_key="parquet_io", partitions_def=StaticPartitionsDefinition(keys))
        def per_domain(context) -> pl.DataFrame:
            return pl.DataFrame({"domain": [context.partition_key]})

        @asset(io_manager_key="parquet_io")
        def fan_in(per_domain: dict[str, pl.DataFrame]) -> pl.DataFrame:
            assert isinstance(per_domain, dict), type(per_domain)
            return pl.concat(per_domain[k] for k in sorted(per_domain))

        io = WarehouseParquetIOManager(
            base_dir=str(tmp_path / "-".join(keys)), warehouse=Warehouse(path=":memory:")
        )
        for k in keys:
            assert materialize([per_domain], partition_key=k, resources={"parquet_io": io}).success
        got = materialize(
            [per_domain.to_source_asset(), fan_in], resources={"parquet_io": io}, selection=[fan_in]
        )
        assert got.success and got.output_for_node("fan_in")["domain"].to_list() == sorted(keys)


def _open_elsewhere(path, sql: str) -> subprocess.CompletedProcess:
    """``sql`` on ``path`` through a plain DuckDB connection in another process."""
    code = f"import duckdb; print(duckdb.connect({str(path)!r}).execute({sql!r}).fetchall())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_a_file_is_held_while_in_use_and_released_whole_after(tmp_path):
    """The file is attached to the process's one DuckDB instance only while a connection is
    open (two threads at once share it, under another spelling of its path too): meanwhile
    another process is refused its lock; once the last leaves, that process opens it and reads
    every row and view written, as a person's DuckDB shell would."""
    path = tmp_path / "w.duckdb"
    (tmp_path / "link").symlink_to(tmp_path)
    a, b = DuckDBFile(str(path)), DuckDBFile(str(tmp_path / "link" / "w.duckdb"))
    inside, go_on = threading.Event(), threading.Event()

    def second_user():
        with b.connect() as conn:
            conn.execute("INSERT INTO t VALUES (2)")
            inside.set()
            go_on.wait(30)

    with a.connect() as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("CREATE VIEW v AS SELECT sum(a) AS s FROM t")
        worker = threading.Thread(target=second_user)
        worker.start()
        assert inside.wait(30)
    held = _open_elsewhere(path, "SELECT 1")  # the first user left, the second has not
    go_on.set()
    worker.join(30)
    assert held.returncode != 0 and "lock" in held.stderr.lower(), held.stderr
    after = _open_elsewhere(path, "SELECT s FROM v")
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "[(3,)]"
    with a.connect() as conn:  # attached again after its release
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_a_forked_child_opens_files_on_an_instance_of_its_own(tmp_path):
    """Forks while another thread of the parent attaches and detaches a file as fast as it can
    (its lock held most of the time): every child writes a file of its own through its own
    instance (a child that inherited a held lock would wait forever), and the
    parent's files go on unharmed."""
    busy, parent = DuckDBFile(str(tmp_path / "busy.duckdb")), DuckDBFile(str(tmp_path / "p.duckdb"))
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            with busy.connect() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS t AS SELECT 1 AS a")

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        with parent.connect() as conn:
            conn.execute("CREATE TABLE t AS SELECT 1 AS a")
            for k in range(8):
                pid = os.fork()
                if pid == 0:  # the child: any failure, or a minute without an answer (a held
                    code = 1  # lock is held forever; a loaded machine takes ms), is its status
                    try:
                        signal.alarm(60)
                        with DuckDBFile(str(tmp_path / f"child{k}.duckdb")).connect() as c:
                            c.execute(f"CREATE TABLE u AS SELECT {k} AS b")
                        code = 0
                    finally:
                        os._exit(code)
                _, status = os.waitpid(pid, 0)
                assert os.waitstatus_to_exitcode(status) == 0, f"child {k}: {status}"
            conn.execute("INSERT INTO t VALUES (3)")
    finally:
        stop.set()
        worker.join(30)
    child = _open_elsewhere(tmp_path / "child7.duckdb", "SELECT b FROM u")
    assert child.stdout.strip() == "[(7,)]", child.stderr
    mine = _open_elsewhere(tmp_path / "p.duckdb", "SELECT sum(a) FROM t")
    assert mine.stdout.strip() == "[(4,)]", mine.stderr
