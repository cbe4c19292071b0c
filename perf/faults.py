"""Faults rehearsal at a chosen size: the tiny config's own problems plus N MATH problems, judged
by an LLM (the tests' fake, answering by content), built clean and then through the fault proxy
at a rate, killed with SIGKILL at seeded moments and resumed; the table of faults by cause, the
retries the runs counted, the kill points, and the identity verdict.

uv run python perf/faults.py [--problems 300] [--rate 0.1] [--kills 5] [--seed 11]

The suite runs the same rehearsal small (tests/test_faults.py). The proxy stands in front of any
OpenAI-compatible server: `--upstream URL` (a server's root, e.g. a vLLM or `saber llm-server`)
rehearses against it instead of the fake.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from saber_resources.fault_proxy import FaultProxy  # noqa: E402
from saber_testing.fake_openai import FakeOpenAI, varied_answer  # noqa: E402
from saber_testing.rehearsal import (  # noqa: E402
    build_process,
    build_with_kills,
    judgments,
    no_run_left_started,
    outcome,
    rehearsal_config,
)
from saber_testing.tiny import write_tiny_inputs  # noqa: E402


def printed_faults(outputs: list[str]) -> tuple[Counter, float]:
    """The faults the finished runs said they met (`saber build`'s "faults met:" lines)."""
    met: Counter = Counter()
    lost = 0.0
    for out in outputs:
        for line in out.splitlines():
            if "faults met:" not in line:
                continue
            causes, rest = line.split("faults met:", 1)[1].split(" (", 1)
            for part in causes.split(","):
                name, n = part.strip().rsplit(" ", 1)
                met[name] += int(n)
            lost += float(rest.split(", ")[1].split("s lost")[0])
    return met, lost


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problems", type=int, default=300, help="MATH problems beside the tiny 30")
    p.add_argument("--rate", type=float, default=0.1)
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--upstream", help="an OpenAI-compatible server's root (default: the fake)")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="saber-faults-"))
    write_tiny_inputs(root)
    fake = None if args.upstream else FakeOpenAI(answer=varied_answer).__enter__()
    upstream = args.upstream or fake.url.rsplit("/v1", 1)[0]
    try:
        t0 = time.perf_counter()
        clean = build_process(
            rehearsal_config(root, upstream + "/v1", args.problems), root / "clean"
        )
        out, _ = clean.communicate()
        if clean.returncode:
            print(out[-3000:])
            return 1
        clean_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        with FaultProxy(upstream, rate=args.rate, seed=args.seed, stall_s=3.0) as proxy:
            cfg = rehearsal_config(root, proxy.url + "/v1", args.problems)
            # kill moments spread over a whole build's time: every stage can be hit
            window = (5.0, max(10.0, 0.9 * clean_s))
            killed = build_with_kills(cfg, root / "faulted", args.kills, args.seed, window)
        faulted_s = time.perf_counter() - t1
    finally:
        if fake is not None:
            fake.__exit__(None, None, None)
    if killed.returncode != 0:
        print(killed.outputs[-1][-3000:])
        return 1
    injected = Counter({k: v for k, v in proxy.counts().items() if k != "forwarded"})
    met, lost = printed_faults(killed.outputs)
    same = outcome(root / "faulted") == outcome(root / "clean")
    n, distinct = judgments(root / "faulted")
    try:
        no_run_left_started(root / "faulted" / "dagster_home")
        runs_clean = "none left STARTED, no llm slot held"
    except AssertionError as exc:
        runs_clean = f"NOT CLEAN: {exc}"
    print(f"faults rehearsal: {30 + args.problems} problems, rate {args.rate}, seed {args.seed}")
    print(f"clean build {clean_s:.0f} s; faulted build {faulted_s:.0f} s "
          f"({killed.kills} kills at {killed.moments} s into a run)")  # fmt: skip
    print(f"\n| fault | injected | {'':>8}")
    print("|---|---|")
    for fault, count in sorted(injected.items()):
        print(f"| {fault} | {count} |")
    print(f"\nretries the finished runs counted (by the client's cause): {dict(sorted(met.items()))}, "
          f"{lost:.1f} s lost (killed runs' own counts died with them)")  # fmt: skip
    print(
        f"judgments stored {n}, distinct {distinct}, clean build's {judgments(root / 'clean')[0]}"
    )
    print(f"Dagster runs: {runs_clean}")
    print(f"verdict: benchmark, ratings and leaderboard {'IDENTICAL' if same else 'DIFFER'}")
    (REPO / "perf" / "out").mkdir(exist_ok=True)
    (REPO / "perf" / "out" / "faults.json").write_text(
        json.dumps(
            {
                "problems": 30 + args.problems,
                "rate": args.rate,
                "kills": killed.moments,
                "injected": injected,
                "retries": met,
                "lost_s": lost,
                "identical": same,
                "clean_s": clean_s,
                "faulted_s": faulted_s,
            },
            indent=1,
        )  # fmt: skip
    )
    return 0 if same and n == distinct else 1


if __name__ == "__main__":
    sys.exit(main())
