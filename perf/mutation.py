"""Mutation testing of the pure core (cosmic-ray): do the tests notice a planted bug?

uv run python perf/mutation.py                    # every module below (hours on 2 cores)
uv run python perf/mutation.py bradley_terry swiss  # some of them
uv run python perf/mutation.py --workers 2 kernels  # two mutants at a time
uv run python perf/mutation.py --list

Each module is mutated against its own test files, in a throw-away copy of the checkout (cosmic-ray
rewrites the file on disk for every mutant; the working tree is never touched). A mutant's tests
run in a child forked from a server that has already imported the third-party stack (numpy,
polars, numba, dagster, ...) but nothing of the project: the child imports the mutated module
fresh, and a mutant costs its tests instead of ~10-20 s of imports. Bitwise, shift, power, modulo
and floor-division replacements of arithmetic operators are not generated (about half of
cosmic-ray's mutants, nearly all killed at once or equivalent, e.g. `p + 1` -> `p | 1`). Too slow for CI,
so it reports like a benchmark: killed / survived / timeout / incompetent per module, and every
survivor as file:line with its operator, into perf/out/mutation.md (and on stdout). The
target is >= 85% of the non-equivalent mutants killed per module; a survivor is either killed by
a new test or argued equivalent in perf/mutation_equivalent.md.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "perf" / "out"

# module name -> (source file, pytest arguments that test it)
MODULES: dict[str, tuple[str, str]] = {
    "kernels": (
        "saber_assets/signals/kernels.py",
        "tests/test_signals.py -k 'not dagster and not viability and not threshold and not row_pairs'",
    ),
    "pairs": ("saber_assets/signals/pairs.py", "tests/test_pairs.py"),
    "prepare": ("saber_assets/signals/prepare.py", "tests/test_signals.py -k 'not dagster'"),
    "shards": ("saber_assets/signals/shards.py", "tests/test_signals.py -k 'not dagster'"),
    "thresholds": (
        "saber_assets/signals/thresholds.py",
        "tests/test_signals.py tests/test_pairs.py -k 'threshold or viability or row_pairs or blocks or group_counts or wrong_length or gathered_block or reference_cycle or 256_rows'",
    ),
    "swiss": (
        "saber_assets/tournament/swiss.py",
        "tests/test_tournament.py -k 'round_one or swiss or sit_outs or pairing or adaptive or greedy'",
    ),
    "engine": (
        "saber_assets/tournament/engine.py",
        "tests/test_tournament.py -k 'resume or direction or failures or simulation or ledger "
        "or standing_record'",
    ),
    "bradley_terry": (
        "saber_assets/ratings/bradley_terry.py",
        "tests/test_tournament.py -k 'bt_ or rescale or ratings_of_random or rate_'",
    ),
    "rate": ("saber_assets/ratings/rate.py", "tests/test_tournament.py -k 'rate_ or direction'"),
    "select": (
        "saber_assets/candidates/select.py",
        "tests/test_tournament.py -k 'candidate or selection_key'",
    ),
    "metrics": (
        "saber_assets/runs/metrics.py",
        "tests/test_leaderboard.py tests/test_bulk_scoring.py "
        "-k 'ndcg or bootstrap or recall or per_domain or full_corpus_metrics'",
    ),
    "exchange": ("saber_assets/benchmark/data.py", "tests/test_leaderboard.py -k exchange"),
    "normalize": ("saber_assets/corpus/normalize.py", "tests/test_corpus.py"),
    "dedup": ("saber_assets/corpus/dedup.py", "tests/test_corpus.py"),
    "tree": ("saber_assets/ontology/tree.py", "tests/test_ontology.py"),
    "similarity": ("saber_assets/ontology/similarity.py", "tests/test_ontology.py"),
    "domains": ("saber_assets/ontology/domains.py", "tests/test_ontology.py"),
    "automation": ("saber_assets/sensors.py", "tests/test_automation.py"),
}


# Environment of a module's test runs. The Numba modules run with the JIT off: every mutant
# would otherwise recompile them (~15-20 s a mutant on 2 cores; ~1,000 mutants in `kernels`,
# ~500 in `thresholds`), while in Python their tests take seconds. A mutant is then judged by the
# code's Python semantics, in which NumPy refuses any index past an array's end (a slot too
# far fails, as tests/test_kernel_bounds.py makes it fail compiled in CI); the same tests prove
# in CI that the compiled code agrees with them. The code avoids the one difference that matters here: uint8
# arithmetic wraps in NumPy and widens in Numba, so it widens explicitly (`int(...)`).
MODULE_ENV: dict[str, dict[str, str]] = {
    "kernels": {"NUMBA_DISABLE_JIT": "1"},
    "thresholds": {"NUMBA_DISABLE_JIT": "1"},
    "pairs": {"NUMBA_DISABLE_JIT": "1"},
}

# operators not generated (regexes on cosmic-ray's operator names)
EXCLUDED_OPERATORS = [
    r"core/ReplaceBinaryOperator_\w+_(BitAnd|BitOr|BitXor|LShift|RShift|Pow|Mod|FloorDiv)$",
    r"core/ReplaceBinaryOperator_(BitAnd|BitOr|BitXor|LShift|RShift|Pow|Mod|FloorDiv)_\w+$",
]


def _run_pytest(work: str, args: list[str], record: Path | None = None) -> None:
    """In a forked child: run pytest in the copy and exit with its status; optionally record
    the third-party modules the run imported."""
    os.setsid()
    os.chdir(work)
    sys.path.insert(0, work)
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import pytest

    rc = int(pytest.main(args))
    if record is not None:
        own = ("saber_assets", "saber_resources", "tests", "conftest", "__main__")
        mods = [m for m in list(sys.modules) if not m.startswith(own)]
        record.write_text("\n".join(mods))
    os._exit(rc)


def serve(sock_path: str, work: str, warm_args: list[str]) -> None:
    """Fork server: per connection, run the pytest arguments it sends in a fresh child.

    First a warm-up child runs WARM_ARGS and lists the third-party modules it imported; the
    server imports them, so every later child starts with them loaded and imports only the
    project (the mutated module included) fresh. The answer to a connection is the child's exit
    status. A client that goes away (cosmic-ray's timeout killed it) takes its child with it,
    so an endless mutant cannot outlive its time."""
    os.environ["NUMBA_CACHE_DIR"] = str(Path(work) / ".cache" / "numba")
    os.environ["TQDM_DISABLE"] = "1"
    sys.dont_write_bytecode = True  # a mutant must never be read from a stale .pyc
    import importlib
    import warnings

    record = Path(work) / "warm-modules.txt"
    pid = os.fork()
    if pid == 0:
        _run_pytest(work, warm_args, record)
    os.waitpid(pid, 0)
    warnings.simplefilter("ignore")
    for mod in record.read_text().split() if record.exists() else []:
        try:
            importlib.import_module(mod)
        except Exception:  # noqa: BLE001 - a module that cannot be preloaded is imported later
            pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    while True:
        conn, _ = srv.accept()
        args = json.loads(conn.makefile().readline())
        pid = os.fork()
        if pid == 0:
            srv.close()
            conn.close()
            _run_pytest(work, args)
        status = None
        while status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(st)
                break
            readable, _, _ = select.select([conn], [], [], 0.05)
            if readable and not conn.recv(1):  # the client is gone: stop its child
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = -1
        try:
            conn.sendall(f"{status}\n".encode())
        except OSError:
            pass
        conn.close()


def ask(sock_path: str, args: list[str]) -> int:
    """cosmic-ray's test command: have the server run pytest ARGS; exit with its status."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock_path)
    conn.sendall((json.dumps(args) + "\n").encode())
    answer = conn.makefile().readline().strip()
    return int(answer) if answer and answer != "-1" else 1


def copy_checkout(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dest / f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_module(name: str, timeout: float, workers: int = 1) -> dict:
    source, tests = MODULES[name]
    # the copy's package shadows the editable install: tests run against the mutated file
    pytest_args = f"-x -q -n 0 -p no:cacheprovider -p no:logging {tests}"
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix=f"mut-{name}-") as tmp:
        # one checkout copy, fork server and (with several workers) cosmic-ray HTTP worker each
        copies = [Path(tmp) / f"w{k}" for k in range(workers)]
        try:
            for work in copies:
                copy_checkout(work)
                procs.append(
                    subprocess.Popen(
                        [sys.executable, __file__, "--serve", "fork.sock", str(work), "--"]
                        + shlex.split(pytest_args),
                        cwd=work,
                        env={**os.environ, **MODULE_ENV.get(name, {})},
                    )
                )
            for work, server in zip(copies, procs, strict=True):
                while not (work / "fork.sock").exists():
                    if server.poll() is not None:
                        raise RuntimeError("the mutation fork server did not start")
                    time.sleep(0.1)
                # the unmutated module must pass, or every mutant would count as killed
                if ask(str(work / "fork.sock"), shlex.split(pytest_args)) != 0:
                    raise RuntimeError(f"{name}: the tests fail without any mutation: {tests}")
            env_cmd = [sys.executable, "-m", "cosmic_ray.cli"]
            if workers == 1:
                distributor = '[cosmic-ray.distributor]\nname = "local"\n'
            else:
                ports = [_free_port() for _ in copies]
                for work, port in zip(copies, ports, strict=True):
                    procs.append(
                        subprocess.Popen(
                            [*env_cmd, "http-worker", "--port", str(port)],
                            cwd=work,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
                urls = ", ".join(f'"http://127.0.0.1:{p}"' for p in ports)
                distributor = (
                    '[cosmic-ray.distributor]\nname = "http"\n'
                    f"[cosmic-ray.distributor.http]\nworker-urls = [{urls}]\n"
                )
                time.sleep(3)  # the workers' HTTP servers come up
            # relative paths: every worker runs the command in its own copy
            cmd = f"{sys.executable} {__file__} --ask fork.sock -- {pytest_args}"
            excluded = ", ".join(json.dumps(e) for e in EXCLUDED_OPERATORS)
            main = copies[0]
            (main / "cr.toml").write_text(
                "[cosmic-ray]\n"
                f'module-path = "{source}"\n'
                f"timeout = {timeout}\n"
                "excluded-modules = []\n"
                f"test-command = {json.dumps(cmd)}\n"
                + distributor
                + f"[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excluded}]\n"
            )
            subprocess.run([*env_cmd, "init", "cr.toml", "s.sqlite"], cwd=main, check=True)
            filt = Path(sys.executable).parent / "cr-filter-operators"
            subprocess.run([str(filt), "s.sqlite", "cr.toml"], cwd=main, check=True)
            t0 = time.perf_counter()
            subprocess.run([*env_cmd, "exec", "cr.toml", "s.sqlite"], cwd=main, check=True)
            seconds = time.perf_counter() - t0
        finally:
            for proc in procs:
                proc.kill()
        dump = subprocess.run(
            [*env_cmd, "dump", "s.sqlite"], cwd=main, capture_output=True, text=True, check=True
        ).stdout
    counts = {"killed": 0, "survived": 0, "timeout": 0, "incompetent": 0}
    survivors = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None or result.get("worker_outcome") == "skipped":
            continue
        worker = str(result.get("worker_outcome")).lower()
        if worker in ("timeout", "abnormal") or result.get("output") == "timeout":
            # a hang (the HTTP worker gives up on it as "abnormal") is caught, like a timeout;
            # cosmic-ray counts these as killed, reported apart here
            counts["timeout"] += 1
            continue
        outcome = result.get("test_outcome")
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "survived":
            m = item["mutations"][0]
            changed = [
                x[1:].strip()
                for x in (result.get("diff") or "").splitlines()
                if x.startswith("+") and not x.startswith("+++")
            ]
            where = f"{m['module_path']}:{m['start_pos'][0]} {m['operator_name']}"
            survivors.append(f"{where}: `{changed[0]}`" if changed else where)
    caught = counts["killed"] + counts["timeout"]  # a mutant that hangs is caught too
    decided = caught + counts["survived"]
    return {
        "module": name,
        **counts,
        "kill_rate": round(caught / decided, 3) if decided else None,
        "seconds": round(seconds),
        "survivors": sorted(survivors),
    }


def write_report(results: dict) -> None:
    """perf/out/mutation.md from every module run so far (kept after each module: a long
    run stopped halfway still leaves its report)."""
    lines = [
        "| module | killed | survived | timeout | kill rate | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for r in results.values():
        lines.append(
            f"| {r['module']} | {r['killed']} | {r['survived']} | {r['timeout']} | "
            f"{r['kill_rate']} | {r['seconds']} |"
        )
    lines.append("\nSurvivors (file:line operator: the mutated line):\n")
    for r in results.values():
        lines += [f"- {s}" for s in r["survivors"]]
    (OUT / "mutation.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("modules", nargs="*", help=f"default: all of {', '.join(MODULES)}")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    ap.add_argument("--list", action="store_true")
    ap.add_argument(
        "--workers", type=int, default=1, help="mutants tested at once (one checkout copy each)"
    )
    for flag in ("--ask", "--serve"):  # internal: everything after "--" is pytest's
        if flag in sys.argv:
            i, rest = sys.argv.index(flag), sys.argv[sys.argv.index("--") + 1 :]
            if flag == "--ask":
                sys.exit(ask(sys.argv[i + 1], rest))
            serve(sys.argv[i + 1], sys.argv[i + 2], rest)
            return
    args = ap.parse_args()
    if args.list:
        for k, (src, tests) in MODULES.items():
            print(f"{k:<14} {src}  <-  {tests}")
        return
    OUT.mkdir(parents=True, exist_ok=True)
    results_file = OUT / "mutation.json"
    for name in args.modules or list(MODULES):
        r = run_module(name, args.timeout, args.workers)
        # read again: another run (another module) may have written meanwhile
        results = json.loads(results_file.read_text()) if results_file.exists() else {}
        results[name] = r
        results_file.write_text(json.dumps(results, indent=1))
        write_report(results)
        print(
            f"{name:<14} killed {r['killed']:>4}  survived {r['survived']:>4}  timeout "
            f"{r['timeout']:>3}  kill rate {r['kill_rate']}  ({r['seconds']} s)",
            flush=True,
        )
    print(f"report: {OUT / 'mutation.md'}")


if __name__ == "__main__":
    main()
