"""Opening a DuckDB file for one statement: a database instance of its own each time (the path
before #91) against ``DuckDBFile.connect``, which attaches the file to the process's one
in-memory instance while it is in use.

    uv run python perf/duckdb_opens.py             # 300 opens of a store file of 20,000 rows
    uv run python perf/duckdb_opens.py --n 1000 --rows 200000

Each variant opens the same file, runs one keyed lookup and closes, ``--n`` times; printed per
variant: CPU ms per open, its ratio to the baseline measured in the same run, and the rows the
lookups returned (the variants must read the same).

Measured on the 2-core box (#91): 300 opens of 20,000 rows, baseline 15.6 ms, attached 1.2 ms
(×0.08). A tiny build (330 problems, every stage) opens its stores and warehouse about 550
times: its CPU went from 45.1 s to 39.2 s.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
from pathlib import Path

import duckdb

from saber_resources.duckdb_files import DuckDBFile

SQL = "SELECT count(*) FROM cache WHERE k BETWEEN ? AND ?"


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def own_instance(path: str, n: int) -> tuple[float, int]:
    rows, t0 = 0, cpu_s()
    for i in range(n):
        conn = duckdb.connect(path)
        rows += conn.execute(SQL, [i, i + 9]).fetchone()[0]
        conn.close()
    return cpu_s() - t0, rows


def attached(path: str, n: int) -> tuple[float, int]:
    db, rows, t0 = DuckDBFile(path), 0, cpu_s()
    for i in range(n):
        with db.connect() as conn:
            rows += conn.execute(SQL, [i, i + 9]).fetchone()[0]
    return cpu_s() - t0, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--rows", type=int, default=20_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "stores.duckdb")
        with duckdb.connect(path) as conn:
            conn.execute(
                "CREATE TABLE cache AS SELECT range AS k, repeat('x', 64) AS v FROM range(?)",
                [args.rows],
            )
        base_s, base_rows = own_instance(path, args.n)
        print(f"baseline (an instance per open): {1000 * base_s / args.n:6.2f} ms/open, "
              f"{base_rows} rows")  # fmt: skip
        s, rows = attached(path, args.n)
        print(f"attached (DuckDBFile.connect):   {1000 * s / args.n:6.2f} ms/open, {rows} rows, "
              f"x{s / base_s:.2f}")  # fmt: skip
        assert rows == base_rows, "the variants read different rows"


if __name__ == "__main__":
    main()
