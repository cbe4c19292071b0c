"""Scale rehearsal: the real assets, through Dagster, on a synthetic corpus of N problems.

    uv run python perf/scale.py --n 20000 [--n 70000 --n 283000] [--queries-per-domain 20]
    uv run python perf/scale.py --report      # table, exponents and plot from saved runs
    uv run python perf/scale.py --n 283000 --resume-from indexes   # a stopped run, on
    uv run python perf/scale.py --n 20000 --unbound --home .saber-scale-unbound \
        --out perf/out/unbound    # the store before pair_signal_bounds: the baseline
    uv run python perf/scale.py --n 20000 --layout summaries \
        --home .saber-scale-summaries --out perf/out/summaries   # no stored pair


For each N: a synthetic corpus (texts drawn from the bundled MATH corpus's word frequencies and
its formula spans, unique ids, ``--near-dup`` of them near-duplicates of another problem with one
word changed) is written as a Parquet source; the annotations come from the `synthetic` backend
(hash-drawn MathWorld topics with a skew, technique summaries: no model); the pair judge is the
CPU judge; the leaderboard has the lexical retrievers with the full-corpus track. Every stage
runs as its own ``saber build --select STAGE`` process, so its wall time and peak RSS are its
own (the RSS includes ~0.4 GB of interpreter + Dagster). Printed per stage: seconds, peak RSS,
Parquet rows and bytes written; across N: the fitted growth exponent of each stage's time
(slope of log t on log N). Results accumulate in perf/out/scale.json (one entry per N),
the table in scale.md, the plot in scale.png. Each stage's figures are saved as soon as it ends,
so a rehearsal stopped halfway (hours at 283K) keeps them, and ``--resume-from STAGE`` runs the
stages from STAGE on over the same outputs, keeping the saved figures of the stages before it.
A resumed stage may read back what the stopped run cached by content (the candidate selection,
the judgments): its time is then a rerun's, not a cold build's.

After the stages, each heavy stage's engine is timed alone on the rehearsal's own inputs
(``engines.py``: the Numba kernel over the shards' full rows, bm25s and scikit-learn indexing and
scoring the same texts) and printed beside the stage as a ratio, saved in the same entry
(``--no-engines`` skips it).

The tournament's cost depends on the queries, not on N: it is run at ``--queries-per-domain``
queries per domain (default 20) with the paper's 150 candidates each; the LLM cost of the
paper's 1000 queries is `saber cost`'s business.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "perf" / "out"
STAGES = [
    "sources",
    "annotations",
    "signal-inputs",
    "shards",
    "thresholds",
    "domains",
    "benchmark",
    "indexes",
    "runs",
    "leaderboard",
]
LEXICAL = [
    "bm25",
    "bm25-no-tok",
    "bm25-corpus-idf",
    "tfidf",
    "tfidf-no-tok",
    "jaccard",
    "jaccard-no-tok",
]
_FORMULA = re.compile(r"\$[^$]{1,80}\$")
_WORD = re.compile(r"[A-Za-z]{2,}")


def vocabulary() -> tuple[list[str], np.ndarray, list[str]]:
    """Words with their frequencies, and formula spans, of the bundled MATH corpus."""
    from collections import Counter

    words: Counter[str] = Counter()
    formulas: list[str] = []
    with gzip.open(REPO / "data" / "corpora" / "math.jsonl.gz", "rt") as f:
        for line in f:
            row = json.loads(line)
            text = f"{row['problem']} {row['solution']}"
            formulas += _FORMULA.findall(text)
            words.update(w.lower() for w in _WORD.findall(_FORMULA.sub(" ", text)))
    vocab = sorted(words)
    freq = np.array([words[w] for w in vocab], dtype=np.float64)
    return vocab, freq / freq.sum(), sorted(set(formulas))


def synthetic_corpus(n: int, seed: int = 0, near_dup: float = 0.03) -> dict[str, list[str]]:
    """``n`` problems (id, problem, solution); a ``near_dup`` share repeat an earlier problem
    with one solution word changed (the dedup stage should fold them)."""
    vocab, p, formulas = vocabulary()
    rng = np.random.default_rng(seed)
    vocab_arr = np.array(vocab, dtype=object)
    form_arr = np.array(formulas, dtype=object)

    def texts(count: int, lo: int, hi: int, f_lo: int, f_hi: int) -> list[str]:
        lengths = rng.integers(lo, hi, count)
        words = vocab_arr[rng.choice(len(vocab), size=int(lengths.sum()), p=p)]
        n_form = rng.integers(f_lo, f_hi, count)
        forms = form_arr[rng.integers(0, len(formulas), int(n_form.sum()))]
        out, w0, f0 = [], 0, 0
        for length, k in zip(lengths.tolist(), n_form.tolist(), strict=True):
            toks = list(words[w0 : w0 + length])
            for at, form in zip(
                rng.integers(0, length, k).tolist(), forms[f0 : f0 + k], strict=True
            ):
                toks.insert(at, form)
            out.append(" ".join(toks).capitalize() + ".")
            w0, f0 = w0 + length, f0 + k
        return out

    problems = texts(n, 15, 45, 1, 4)
    solutions = texts(n, 40, 160, 2, 7)
    dup = np.flatnonzero(rng.random(n) < near_dup)
    dup = dup[dup > 0]
    for i in dup.tolist():
        j = int(rng.integers(0, i))
        toks = solutions[j].split(" ")
        toks[int(rng.integers(len(toks)))] = str(vocab_arr[rng.integers(len(vocab))])
        problems[i], solutions[i] = problems[j], " ".join(toks)
    return {"id": [f"s{i}" for i in range(n)], "problem": problems, "solution": solutions}


def write_inputs(
    n: int,
    work: Path,
    queries_per_domain: int,
    candidates_per_group: int,
    near_dup: float,
    retrievers: list[str],
    bound_floors: bool = True,
    layout: str = "pairs",
) -> Path:
    """The corpus Parquet, a lexical registry and the pipeline config; returns the config."""
    import polars as pl
    import yaml

    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus-dup{near_dup}.parquet"
    if not corpus.exists():
        pl.DataFrame(synthetic_corpus(n, near_dup=near_dup)).write_parquet(corpus)
    registry = yaml.safe_load((REPO / "retrievers.yaml").read_text())
    registry["retrievers"] = [e for e in registry["retrievers"] if e["name"] in retrievers]
    (work / "retrievers.yaml").write_text(yaml.safe_dump(registry, sort_keys=False))
    # a shard file is read whole (checked by its checksum) by every later pass: at ~15% stored,
    # 6 bytes a pair, rows_per_shard = 1e9 / (0.15 · 6 · n) keeps each under ~1 GB (283K: 73
    # shards of ~3,900 rows; a fixed N/20000 made the first file ~3.4 GB there)
    shards = max(4, math.ceil(n / (1e9 / (0.15 * 6 * n))))
    cfg = {
        "name": f"scale-{n}",
        "seed": 20261129,
        "executor": "in_process",
        "corpus": {
            "sources": [
                {
                    "name": "synthetic",
                    "path": str(corpus),
                    "fields": {"id": "id", "problem": "problem", "solution": "solution"},
                }
            ]
        },
        "ontology": {"bundled": "mathworld"},
        "llm": {"backend": "synthetic"},
        "annotations": {"chunks": max(4, math.ceil(n / 40_000))},
        "signals": {
            "rows_per_shard": math.ceil(n / shards),
            "shards": shards,
            "bound_floors": bound_floors,
            "layout": layout,
        },
        "candidates": {
            "queries_per_domain": queries_per_domain,
            "candidates_per_group": candidates_per_group,
            "quota_per_domain": queries_per_domain,
        },
        "tournament": {"rounds": 20, "policy": "swiss"},
        "retrievers": {"registry": str(work / "retrievers.yaml")},
        "analyses": {"regime_pairs": 0},
    }
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def output_files(root: Path) -> dict[str, tuple[float, int]]:
    return {str(f): (f.stat().st_mtime, f.stat().st_size) for f in root.rglob("*") if f.is_file()}


def written(before: dict, after: dict) -> tuple[int, int]:
    """Parquet rows and bytes of every file (Parquet, signal shards, stores) a stage created or
    changed."""
    import pyarrow.parquet as pq

    rows = size = 0
    for f, (mtime, nbytes) in after.items():
        if before.get(f) != (mtime, nbytes):
            size += nbytes
            if f.endswith(".parquet"):
                rows += pq.ParquetFile(f).metadata.num_rows
    return rows, size


_STEP = re.compile(r"\((build_\w+) (?:ok|FAILED) in ([0-9.]+)s[,)]")


def step_seconds(log_text: str) -> dict[str, float]:
    """Seconds inside Dagster per job, from the build's own step lines (no process start-up)."""
    out: dict[str, float] = {}
    for job, sec in _STEP.findall(log_text):
        out[job] = out.get(job, 0.0) + float(sec)
    return out


def run_build(stages: list[str], config: Path, home: Path, log: Path) -> dict:
    """One ``saber build`` process over ``stages``: wall seconds, peak RSS, seconds per job."""
    env = {**os.environ, "SABER_HOME": str(home)}
    select = [a for st in stages for a in ("--select", st)]
    start = log.stat().st_size if log.exists() else 0
    t0 = time.perf_counter()
    with open(log, "a") as fh:
        fh.write(f"\n=== {' '.join(stages)}\n")
        fh.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "saber_assets.cli", "build", "--config", str(config), "--force",
             "--steps", *select],  # a line per partition: engines.py reads each one's seconds
            cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT,
        )  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    with open(log) as fh:
        fh.seek(start)
        text = fh.read()
    if os.waitstatus_to_exitcode(status) != 0:
        why = [line for line in text.splitlines() if line.startswith("FAILED step")]
        raise SystemExit(
            f"saber build --select {' '.join(stages)} failed (log {log})\n" + "\n".join(why)
        )
    jobs = step_seconds(text)
    return {"wall": wall, "peak_rss_gb": usage.ru_maxrss / 2**20, "jobs": jobs}  # KiB on Linux


def rehearse(
    n: int,
    queries_per_domain: int,
    candidates_per_group: int,
    near_dup: float,
    home: Path,
    one_process: bool,
    retrievers: list[str],
    resume_from: str | None = None,
    saved: dict | None = None,
    save=lambda entry: None,
    bound_floors: bool = True,
    layout: str = "pairs",
    engines: bool = True,
) -> dict:
    from saber_assets.stages import BY_ALIAS

    kept, todo = [], STAGES
    if resume_from is not None:
        before = STAGES[: STAGES.index(resume_from)]
        kept = [x for x in (saved or {}).get("stages", []) if x["stage"] in before]
        if [x["stage"] for x in kept] != before or not (home / f"scale-{n}").is_dir():
            raise SystemExit(
                f"--resume-from {resume_from}: N = {n} has no saved figures or outputs for "
                f"{', '.join(before)} under {home}; run it from the start"
            )
        todo = STAGES[len(before) :]
    work = home / f"scale-{n}-inputs"
    t0 = time.perf_counter()
    config = write_inputs(
        n, work, queries_per_domain, candidates_per_group, near_dup, retrievers, bound_floors,
        layout,
    )  # fmt: skip
    gen = time.perf_counter() - t0
    log = home / f"scale-{n}.log"
    entry = {
        "n": n,
        "queries_per_domain": queries_per_domain,
        "candidates_per_group": candidates_per_group,
        "retrievers": retrievers,
        "one_process": one_process,
        "stages": kept,
    }
    stages = entry["stages"]
    if resume_from is not None:
        print(f"N = {n}: resumed at {resume_from}, {len(kept)} stages' figures kept; log {log}")
    else:
        # a rehearsal starts cold: no outputs, no cached embeddings or judgments (--force)
        shutil.rmtree(home / f"scale-{n}", ignore_errors=True)
        log.unlink(missing_ok=True)
        print(f"N = {n}: corpus generated in {gen:.1f}s; log {log}", flush=True)
    if one_process:  # CI's smoke test: one interpreter start, the RSS of the whole build
        before = output_files(home)
        r = run_build(todo, config, home, log)
        rows, size = written(before, output_files(home))
        for stage in todo:
            sec = r["jobs"].get(BY_ALIAS[stage].job, 0.0)
            stages.append({"stage": stage, "seconds": round(sec, 1), "wall": None,
                           "peak_rss_gb": None, "rows": None, "bytes": None})  # fmt: skip
        print(f"  one process: {r['wall']:.1f} s wall, {r['peak_rss_gb']:.2f} GB, {rows:,} rows")
    for stage in [] if one_process else todo:
        before = output_files(home)
        r = run_build([stage], config, home, log)
        rows, size = written(before, output_files(home))
        stages.append(
            {
                "stage": stage,
                "seconds": round(r["jobs"].get(BY_ALIAS[stage].job, 0.0), 1),
                "wall": round(r["wall"], 1),
                "peak_rss_gb": round(r["peak_rss_gb"], 2),
                "rows": rows,
                "bytes": size,
            }
        )
        x = stages[-1]
        print(
            f"  {stage:<12} {x['seconds']:>8.1f} s in steps ({x['wall']:>7.1f} s wall)  "
            f"{x['peak_rss_gb']:>5.2f} GB  {rows:>11,} rows  {size / 2**20:>8.1f} MiB",
            flush=True,
        )
        save(entry)  # a run stopped later keeps this stage's figures
    total = sum(x["seconds"] for x in stages)
    print(f"  {'all':<12} {total:>8.1f} s in steps")
    save(entry)
    if engines and not one_process:
        entry["engines"] = _engines_module().measure(home, n, retrievers)
        save(entry)
        print(engine_table(entry))
    return entry


def _engines_module():
    """``perf/engines.py``, wherever this file was loaded from (a script or a test)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("engines", Path(__file__).with_name("engines.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def engine_table(entry: dict) -> str:
    """Per heavy stage and retriever: saber's seconds, the engine's alone, and their ratio."""
    eng = entry.get("engines")
    if not eng:
        return ""
    stage = {x["stage"]: x["seconds"] for x in entry["stages"]}
    lines = ["| stage | saber (s) | engine alone (s) | saber / engine |", "|---|---|---|---|"]

    def row(name: str, saber: float, engine: float) -> None:
        lines.append(f"| {name} | {saber:,.1f} | {engine:,.1f} | {saber / max(engine, 1e-9):.2f} |")

    row("shards (kernel over every full row)", stage["shards"], eng["shards"]["seconds"])
    per = eng["retrievers"]
    for kind in ("indexes", "runs"):
        row(
            f"{kind} (all retrievers)",
            sum(r[f"{kind}_saber"] for r in per.values()),
            sum(r[f"{kind}_engine"] for r in per.values()),
        )
        for name, r in per.items():
            row(f"— {kind}: {name}", r[f"{kind}_saber"], r[f"{kind}_engine"])
    return "\n".join(lines) + "\n"


def exponents(results: dict[str, dict]) -> dict[str, float]:
    """Per stage: the slope of log(seconds) on log(N) over the saved sizes (needs two)."""
    ns = sorted(int(k) for k in results)
    if len(ns) < 2:
        return {}
    out = {}
    for stage in STAGES:
        t = [
            next(r["seconds"] for r in results[str(n)]["stages"] if r["stage"] == stage) for n in ns
        ]
        out[stage] = float(np.polyfit(np.log(ns), np.log(np.maximum(t, 0.1)), 1)[0])
    return out


def _cell(r: dict) -> str:
    if r["wall"] is None:
        return f"{r['seconds']:.1f}"
    return (
        f"{r['seconds']:.1f} ({r['wall']:.0f}) / {r['peak_rss_gb']:.2f} / {r['rows']:,} / "
        f"{r['bytes'] / 2**20:.1f}"
    )


def report(results: dict[str, dict], out: Path) -> str:
    ns = sorted(int(k) for k in results)
    exp = exponents(results)
    head = "| stage | " + " | ".join(f"N = {n:,}" for n in ns) + " | exponent |"
    lines = [
        "Per cell: seconds in the stage's steps (wall seconds of its process, with ~20 s of "
        "interpreter, Dagster and planning start-up) / peak RSS GB / Parquet rows written / "
        "MiB written. Exponent: slope of log(step seconds) on log N.\n",
        head,
        "|---" * (len(ns) + 2) + "|",
    ]
    for stage in STAGES:
        cells = [
            _cell(next(r for r in results[str(n)]["stages"] if r["stage"] == stage)) for n in ns
        ]
        e = f"{exp[stage]:.2f}" if stage in exp else ""
        lines.append(f"| {stage} | " + " | ".join(cells) + f" | {e} |")
    totals = []
    for n in ns:
        st = results[str(n)]["stages"]
        rss = [r["peak_rss_gb"] for r in st if r["peak_rss_gb"] is not None]
        walls = [r["wall"] for r in st]
        totals.append(
            f"{sum(r['seconds'] for r in st):.0f}"
            + (f" ({sum(walls):.0f})" if None not in walls else "")
            + (f" / max {max(rss):.2f}" if rss else "")
        )
    lines.append("| all | " + " | ".join(totals) + " | |")
    text = "\n".join(lines) + "\n"
    for n in ns:
        if table := engine_table(results[str(n)]):
            text += (
                f"\nN = {n:,}: each heavy stage against its engine alone (engines.py)\n\n{table}"
            )
    (out / "scale.md").write_text(text)
    if len(ns) >= 2:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 5))
        for stage in STAGES:
            t = [
                next(r["seconds"] for r in results[str(n)]["stages"] if r["stage"] == stage)
                for n in ns
            ]
            ax.loglog(ns, np.maximum(t, 0.1), marker="o", label=f"{stage} (slope {exp[stage]:.2f})")
        ax.set_xlabel("problems N")
        ax.set_ylabel("seconds in the stage's steps (2 cores)")
        ax.legend(fontsize=7)
        fig.savefig(out / "scale.png", dpi=100, bbox_inches="tight")
    return text


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, action="append", default=[])
    ap.add_argument("--queries-per-domain", type=int, default=20)
    ap.add_argument(
        "--candidates-per-group", type=int, default=50, help="the paper's 50 (150 per query)"
    )
    ap.add_argument("--near-dup", type=float, default=0.03)
    ap.add_argument("--home", default=str(REPO / ".saber-scale"), help="SABER_HOME of the runs")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument(
        "--one-process", action="store_true", help="one build process (no per-stage RSS)"
    )
    ap.add_argument(
        "--retriever", action="append", help=f"repeatable; default the lexical {LEXICAL}"
    )
    ap.add_argument("--report", action="store_true", help="only rebuild the table and plot")
    ap.add_argument(
        "--unbound",
        action="store_true",
        help="store every pair above the configured floors (no first pass): the baseline of "
        "pair_signal_bounds; give it its own --home and --out",
    )
    ap.add_argument(
        "--layout",
        choices=["pairs", "summaries"],
        default="pairs",
        help="signals.layout: stored pairs, or each row's viability summary (give it its own "
        "--home and --out)",
    )
    ap.add_argument(
        "--resume-from",
        choices=STAGES,
        help="run the stages from this one on over the outputs a stopped run left",
    )
    ap.add_argument(
        "--no-engines",
        action="store_true",
        help="skip measuring each heavy stage's engine alone after the stages (engines.py)",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "scale.json"
    results = json.loads(saved.read_text()) if saved.exists() else {}

    def save(entry: dict) -> None:
        results[str(entry["n"])] = entry
        saved.write_text(json.dumps(results, indent=1))

    for n in [] if args.report else args.n:
        rehearse(
            n,
            args.queries_per_domain,
            args.candidates_per_group,
            args.near_dup,
            Path(args.home),
            args.one_process,
            args.retriever or LEXICAL,
            resume_from=args.resume_from,
            saved=results.get(str(n)),
            save=save,
            bound_floors=not args.unbound,
            layout=args.layout,
            engines=not args.no_engines,
        )
    complete = {k: r for k, r in results.items() if len(r["stages"]) == len(STAGES)}
    if complete:
        print(report(complete, out))


if __name__ == "__main__":
    main()
