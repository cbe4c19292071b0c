"""Mutation testing of the pure core (cosmic-ray): do the tests notice a planted bug?

uv run python benchmarks/mutation.py                    # every module below (hours on 2 cores)
uv run python benchmarks/mutation.py bradley_terry swiss  # some of them
uv run python benchmarks/mutation.py --list

Each module is mutated against its own test files, in a throw-away copy of the checkout (cosmic-ray
rewrites the file on disk for every mutant; the working tree is never touched). Too slow for CI,
so it reports like a benchmark: killed / survived / timeout / incompetent per module, and every
survivor as file:line with its operator, into benchmarks/out/mutation.md (and on stdout). The
target is >= 85% of the non-equivalent mutants killed per module; a survivor is either killed by
a new test or argued equivalent in benchmarks/mutation_equivalent.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"

# module name -> (source file, pytest arguments that test it)
MODULES: dict[str, tuple[str, str]] = {
    "kernels": ("saber_assets/signals/kernels.py", "tests/test_signals.py -k 'not dagster'"),
    "prepare": ("saber_assets/signals/prepare.py", "tests/test_signals.py -k 'not dagster'"),
    "shards": ("saber_assets/signals/shards.py", "tests/test_signals.py -k 'not dagster'"),
    "thresholds": (
        "saber_assets/signals/thresholds.py",
        "tests/test_signals.py -k 'threshold or viability'",
    ),
    "swiss": (
        "saber_assets/tournament/swiss.py",
        "tests/test_tournament.py -k 'round_one or swiss or sit_outs or pairing or adaptive or greedy'",
    ),
    "engine": (
        "saber_assets/tournament/engine.py",
        "tests/test_tournament.py -k 'resume or direction or failures or simulation'",
    ),
    "bradley_terry": (
        "saber_assets/ratings/bradley_terry.py",
        "tests/test_tournament.py -k 'bt_ or rescale or ratings_of_random or rate_'",
    ),
    "rate": ("saber_assets/ratings/rate.py", "tests/test_tournament.py -k 'rate_ or direction'"),
    "select": ("saber_assets/candidates/select.py", "tests/test_tournament.py -k candidate"),
    "metrics": (
        "saber_assets/leaderboard/metrics.py",
        "tests/test_leaderboard.py tests/test_bulk_scoring.py",
    ),
    "exchange": ("saber_assets/leaderboard/exchange.py", "tests/test_leaderboard.py -k exchange"),
    "normalize": ("saber_assets/corpus/normalize.py", "tests/test_corpus.py"),
    "dedup": ("saber_assets/corpus/dedup.py", "tests/test_corpus.py"),
    "tree": ("saber_assets/ontology/tree.py", "tests/test_ontology.py"),
    "similarity": ("saber_assets/ontology/similarity.py", "tests/test_ontology.py"),
    "domains": ("saber_assets/ontology/domains.py", "tests/test_ontology.py"),
    "automation": ("saber_assets/ops/automation.py", "tests/test_automation.py"),
}


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


def run_module(name: str, timeout: float) -> dict:
    source, tests = MODULES[name]
    with tempfile.TemporaryDirectory(prefix=f"mut-{name}-") as tmp:
        work = Path(tmp)
        copy_checkout(work)
        # the copy's package shadows the editable install: tests run against the mutated file
        cmd = f"{sys.executable} -m pytest -x -q -p no:cacheprovider -p no:logging {tests}"
        (work / "cr.toml").write_text(
            "[cosmic-ray]\n"
            f'module-path = "{source}"\n'
            f"timeout = {timeout}\n"
            "excluded-modules = []\n"
            f'test-command = "{cmd}"\n'
            '[cosmic-ray.distributor]\nname = "local"\n'
        )
        env_cmd = [sys.executable, "-m", "cosmic_ray.cli"]
        subprocess.run([*env_cmd, "init", "cr.toml", "s.sqlite"], cwd=work, check=True)
        t0 = time.perf_counter()
        subprocess.run([*env_cmd, "exec", "cr.toml", "s.sqlite"], cwd=work, check=True)
        seconds = time.perf_counter() - t0
        dump = subprocess.run(
            [*env_cmd, "dump", "s.sqlite"], cwd=work, capture_output=True, text=True, check=True
        ).stdout
    counts = {"killed": 0, "survived": 0, "timeout": 0, "incompetent": 0}
    survivors = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None:
            continue
        if result.get("worker_outcome") == "timeout":
            counts["timeout"] += 1
            continue
        outcome = result.get("test_outcome")
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "survived":
            m = item["mutations"][0]
            survivors.append(f"{m['module_path']}:{m['start_pos'][0]} {m['operator_name']}")
    decided = counts["killed"] + counts["survived"]
    return {
        "module": name,
        **counts,
        "kill_rate": round(counts["killed"] / decided, 3) if decided else None,
        "seconds": round(seconds),
        "survivors": sorted(survivors),
    }


def write_report(results: dict) -> None:
    """benchmarks/out/mutation.md from every module run so far (kept after each module: a long
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
    lines.append("\nSurvivors (file:line operator):\n")
    for r in results.values():
        lines += [f"- {s}" for s in r["survivors"]]
    (OUT / "mutation.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("modules", nargs="*", help=f"default: all of {', '.join(MODULES)}")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for k, (src, tests) in MODULES.items():
            print(f"{k:<14} {src}  <-  {tests}")
        return
    OUT.mkdir(parents=True, exist_ok=True)
    results_file = OUT / "mutation.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    for name in args.modules or list(MODULES):
        r = run_module(name, args.timeout)
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
