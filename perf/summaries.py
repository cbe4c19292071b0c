"""The stored pairs' design against the rows' (viability summaries + the chosen queries' rows) on
a finished build: same thresholds and candidate lists, and what each costs.

uv run python perf/summaries.py --config configs/sample.yaml --home ~/.saber

Reads the build's signal inputs, shard files, problem annotations and its own outputs
(``relevance_thresholds``, ``query_candidates``); runs the thresholds and the selection both ways
in this process (the stored pairs held in memory, as the build does where they fit); exits 1
naming the first difference. Prints and writes (perf/out/summaries-<config>.md / .json)
the seconds of each, the signal bytes on disk per corpus pair (the shards) against the
summaries' bytes, and the stored pairs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "perf" / "out"

COLUMNS = ["domain", "query_id", "candidate_id", "group", "topic", "summary", "position"]


def compare(config: Path, home: Path, threads: int = 2, against_build: bool = True) -> dict:
    """Both designs on the build of ``config`` under ``home``; ``against_build``: and the build's
    own thresholds and candidate lists (off where ``config`` differs from the build's, e.g. a
    derivation asked of a build made with given thresholds)."""
    import polars as pl

    from saber_assets.candidates.rows import select_by_rows
    from saber_assets.candidates.select import select_candidates
    from saber_assets.config import load_config
    from saber_assets.ontology.domains import domain_names
    from saber_assets.signals.pairs import StoredPairs
    from saber_assets.signals.prepare import SignalInputs, signal_pool
    from saber_assets.signals.stored import read_floors, segment_versions
    from saber_assets.signals.thresholds import (
        Cut,
        ExactSignals,
        derive_thresholds,
        percentile_taus,
        percentile_thresholds,
    )

    cfg = load_config(config)
    out = home / cfg.name
    d = out / "signals"
    cand = cfg.candidates
    inputs = SignalInputs.load(d / "inputs.npz")
    pool = signal_pool(
        pl.read_parquet(out / "parquet" / "problem_annotations.parquet"), cand.require_annotations
    )
    if pool["id"].to_list() != inputs.ids:
        raise SystemExit(f"{d}: the signal inputs are not this build's signal pool")
    domains, order = pool["domains"].to_list(), domain_names(cfg.ontology)
    paths = sorted(d.glob("*.sig"))
    pairs = StoredPairs(paths, inputs.n, segment_versions(inputs, paths))
    floors = tuple(max(a, b) for a, b in zip(pairs.floors(), read_floors(d), strict=True))
    given = cand.topic_threshold is not None and cand.summary_threshold is not None

    t0 = time.perf_counter()
    held = pairs.held(2**40)
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    if given:
        t_thr, s_thr = Cut(cand.topic_threshold), Cut(cand.summary_threshold)
        choice = None
    elif cand.threshold_method == "percentile":
        by = percentile_thresholds(held.chunks, inputs.n, domains, order, cand.percentile,
                                   floors, ExactSignals.of(inputs))  # fmt: skip
        t_thr, s_thr = (Cut(t) for t in percentile_taus(by, cand.percentile_scope))
        choice = None
    else:
        blocks = held.row_blocks(2**40, held.degrees())
        k = cand.candidates_per_group
        choice = derive_thresholds(blocks, domains, order, cand.queries_per_domain, k, *floors)
        t_thr, s_thr = choice.topic_q, choice.summary_q
    t_thresholds = time.perf_counter() - t0
    t0 = time.perf_counter()
    stored_sel = select_candidates(
        ids=inputs.ids, domains=domains, domain_order=order, pairs=held.chunks, t_thr=t_thr,
        s_thr=s_thr, k=cand.candidates_per_group, quota=cand.quota_per_domain, seed=cfg.seed,
        exact=ExactSignals.of(inputs),
    )  # fmt: skip
    t_select = time.perf_counter() - t0

    rows = select_by_rows(inputs, domains, order, cand, cfg.seed, floors, threads)
    problems = []
    if (rows.topic, rows.summary) != (t_thr, s_thr) or rows.choice != choice:
        problems.append(f"thresholds: rows {rows.topic, rows.summary} vs stored {t_thr, s_thr}")
    if not rows.candidates.equals(stored_sel):
        problems.append("candidate lists differ between the two designs")
    if against_build:
        built = pl.read_parquet(out / "parquet" / "relevance_thresholds.parquet").row(0, named=True)
        made = (built["topic_threshold_q"], built["summary_threshold_q"])
        want = tuple(t.q if isinstance(t, Cut) else t for t in (t_thr, s_thr))
        if not given and made != want:
            problems.append(f"thresholds: the build's {made} vs {want}")
        build_sel = pl.read_parquet(out / "parquet" / "query_candidates").select(COLUMNS)
        key = ["domain", "query_id", "position"]
        if not build_sel.sort(key).equals(rows.candidates.select(COLUMNS).sort(key)):
            problems.append("candidate lists differ from the build's query_candidates")
    n = inputs.n
    shard_bytes = sum(p.stat().st_size for p in paths)
    return {
        "config": cfg.name,
        "problems": n,
        "thresholds": "given" if given else [t_thr, s_thr],
        "floors": list(floors),
        "queries": stored_sel["query_id"].n_unique(),
        "stored_pairs": held.total_pairs,
        "shard_bytes": shard_bytes,
        "shard_bytes_per_corpus_pair": shard_bytes / (n * (n - 1) / 2),
        "summary_bytes": rows.summary_bytes,
        "stored": {"read_s": t_read, "thresholds_s": t_thresholds, "selection_s": t_select},
        "rows": rows.seconds,
        "identical": not problems,
        "differences": problems,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--home", type=Path, required=True, help="the build's SABER_HOME")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    res = compare(a.config, a.home, a.threads)
    st, rw = res["stored"], res["rows"]
    lines = [
        f"{res['config']}: {res['problems']:,} problems, {res['queries']} queries, thresholds "
        f"{res['thresholds']}, floors {res['floors']}; identical: {res['identical']}",
        "",
        "| design | signal data | thresholds s | selection s |",
        "|---|---|---|---|",
        f"| stored pairs | {res['stored_pairs']:,} pairs, {res['shard_bytes'] / 2**20:.1f} MiB of shards "
        f"({res['shard_bytes_per_corpus_pair']:.3f} B per corpus pair) | "
        f"{st['read_s'] + st['thresholds_s']:.2f} (reading {st['read_s']:.2f}) | {st['selection_s']:.2f} |",
        f"| rows | {res['summary_bytes'] / 2**20:.1f} MiB of summaries | "
        f"{rw.get('summaries', rw.get('viability', 0)):.2f} (the full-row pass) | {rw['selection']:.2f} |",
    ]
    lines += [f"- {p}" for p in res["differences"]]
    print("\n".join(lines))
    OUT.mkdir(exist_ok=True)
    (OUT / f"summaries-{res['config']}.md").write_text("\n".join(lines) + "\n")
    (OUT / f"summaries-{res['config']}.json").write_text(json.dumps(res, indent=1))
    if not res["identical"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
