"""Per-row viability summaries (saber_assets/signals/summaries.py) against the stored pairs'
design: the same bytes from either side of a pair, the same viability counts, thresholds,
viable rows and chosen rows' pairs."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest

from saber_assets.candidates.select import SelectionSpec, select_candidates, select_from_rows
from saber_assets.signals import summaries
from saber_assets.signals.kernels import KernelArrays, full_row_pairs, signal_block, to_csr
from saber_assets.signals.summaries import (
    grown_summaries,
    query_rows,
    row_group_counts,
    summary_counts,
    thresholds_from_summaries,
    triangle_pairs,
    viability_summaries,
    viable_at,
)
from saber_assets.signals.thresholds import (
    QMAX,
    Cut,
    ExactSignals,
    derive_thresholds,
    group_counts,
    in_memory_blocks,
    percentile_thresholds,
    viable_counts,
)

from .test_signals import _dense_ids, random_case


def _case(n: int, seed: int, spread: int = 6):
    """Kernel inputs of a random corpus and every pair (i < j) with its bytes, floors 0."""
    topics, lin, tokens = random_case(n=n, t=24, v=30, seed=seed)
    rng = np.random.default_rng(seed)
    # a few near-copies, so that some rows have many strong pairs in both signals
    for r in range(5, n, 9):
        src = int(rng.integers(0, 5))
        topics[r] = list(topics[src + 5]) + list(rng.integers(0, 24, rng.integers(0, spread)))
        tokens[r] = list(tokens[src + 5]) + list(rng.integers(0, 30, 2) * 7 + 3)
    arrays = KernelArrays(*to_csr(topics), lin, *to_csr(_dense_ids(tokens)))
    indptr, cols, tq, sq, _ = signal_block(*arrays, 0, n, 0, 0)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    return arrays, (rows, cols.astype(np.int64), tq, sq)


@pytest.mark.parametrize("n,start,end", [(150, 0, 150), (200, 70, 139)])
def test_a_full_row_holds_the_triangles_bytes_from_either_side(n, start, end):
    """Every pair of a row, whether the row is its smaller index or its larger, has the bytes the
    triangle pass stored for it: row ranges that start and end inside a 64-row tile, and rows
    given in any order."""
    arrays, (i, j, tq, sq) = _case(n, seed=n)
    both = (np.concatenate([i, j]), np.concatenate([j, i]), np.tile(tq, 2), np.tile(sq, 2))
    for rows in (np.arange(start, end), np.array([end - 1, start, (start + end) // 2])):
        got = full_row_pairs(arrays, rows, 0, 0)
        position = np.full(n, -1)
        position[rows] = np.arange(len(rows))
        sel = position[both[0]] >= 0
        order = np.lexsort((both[1][sel], position[both[0][sel]]))
        want = tuple(a[sel][order] for a in both)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
        assert len(got[0]) == len(rows) * (n - 1)  # every other problem, not itself
    for bad in ([start, start], [n]):
        with pytest.raises(ValueError, match="distinct rows"):
            full_row_pairs(arrays, np.array(bad), 0, 0)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_thresholds_from_summaries_are_the_stored_pairs_derivation(k):
    """Viability counts, per-domain points, final thresholds and the viable counts there equal
    the stored pairs' (``derive_thresholds``), above storage floors and without any; summaries
    made in threads equal those made in one."""
    n = 190
    arrays, pairs = _case(n, seed=7 + k)
    names = ["Algebra", "Geometry", "Number Theory"]
    row_domains = [[names[r % 3]] + (["Geometry"] if r % 5 == 0 else []) for r in range(n)]
    row_domains[3] = []  # a problem in no domain counts nowhere
    idx = [[names.index(d) for d in ds] for ds in row_domains]
    for floors in ((0, 0), (60, 40), (120, 90)):
        summary = viability_summaries(arrays, 0, n, k, floors)
        assert summary.shape == (n, QMAX, 2) and summary.dtype == np.uint8
        blocks = viability_summaries(arrays, 0, n, k, floors, threads=2, block_rows=64)
        assert np.array_equal(summary, blocks)  # three blocks of rows, two at once
        i, j, tq, sq = pairs
        keep = (tq >= floors[0]) | (sq >= floors[1])
        stored = tuple(a[keep] for a in pairs)
        blocks = in_memory_blocks(n, stored)
        t_min, s_min = max(floors[0] - 1, 0), max(floors[1] - 1, 0)
        want_counts = viable_counts(*blocks[0][1:], idx, 3, k, t_min, s_min)
        got_counts = summary_counts(summary, idx, 3, t_min, s_min)
        assert np.array_equal(got_counts, want_counts), floors
        assert got_counts.max() > 0
        for q_min in (1, 3, 8):
            try:
                want = derive_thresholds(blocks, row_domains, names, q_min, k, *floors)
            except ValueError as exc:
                with pytest.raises(ValueError, match="no domain has"):
                    thresholds_from_summaries(summary, row_domains, names, q_min, k, *floors)
                assert "no domain has" in str(exc)
                continue
            got = thresholds_from_summaries(summary, row_domains, names, q_min, k, *floors)
            assert got == want, (floors, q_min)


def test_viable_rows_and_chosen_rows_pairs_are_the_stored_pairs():
    """At given thresholds the summaries' viable rows are the rows with k pairs in each group of
    the stored pairs; a chosen row's pairs above the floors are the stored pairs it is in, from
    its side."""
    n, k = 170, 2
    arrays, (i, j, tq, sq) = _case(n, seed=5)
    summary = viability_summaries(arrays, 0, n, k, (0, 0))
    for t_thr, s_thr in ((60, 30), (100, 20), (140, 60)):
        counts = group_counts(n, i, j, tq, sq, t_thr, s_thr)
        want = counts.min(axis=1) >= k
        assert np.array_equal(viable_at(summary, t_thr, s_thr), want)
    assert viable_at(summary, 60, 30).any()
    floors = (90, 50)
    rows = [0, 5, 64, 169, 5]  # a tile's first row, the last row, a repeat
    q, c, qt, qs = query_rows(arrays, rows, *floors)
    keep = (tq >= floors[0]) | (sq >= floors[1])
    want = sorted(
        (int(a), int(b), int(x), int(y))
        for a, b, x, y in zip(
            np.concatenate([i, j])[np.tile(keep, 2)],
            np.concatenate([j, i])[np.tile(keep, 2)],
            np.tile(tq, 2)[np.tile(keep, 2)],
            np.tile(sq, 2)[np.tile(keep, 2)],
            strict=True,
        )
        if a in rows
    )
    got = list(zip(q.tolist(), c.tolist(), qt.tolist(), qs.tolist(), strict=True))
    assert got == want and len(got) > 10


@pytest.mark.parametrize("thresholds", [(100, 40), (140, 60), "exact"])
def test_candidates_from_summaries_and_query_rows_are_the_stored_pairs_selection(thresholds):
    """The same queries and candidate lists, drawn the same way, from the summaries' viable rows
    and the chosen rows' own pairs as from two passes over every stored pair; thresholds given
    as numbers (``Cut``) decide the pairs within a quantum on their exact values either way."""
    n, k, floors = 220, 2, (80, 30)
    arrays, pairs = _case(n, seed=31)
    keep = (pairs[2] >= floors[0]) | (pairs[3] >= floors[1])
    stored = tuple(a[keep] for a in pairs)
    exact = ExactSignals(*arrays)
    if thresholds == "exact":
        t_thr, s_thr = Cut(100.4 / 255), Cut(40.6 / 255)
        viable = row_group_counts(arrays, t_thr, s_thr, exact).min(axis=1) >= k
    else:
        t_thr, s_thr = thresholds
        viable = viable_at(viability_summaries(arrays, 0, n, k, floors), t_thr, s_thr)
    ids = [f"p{r:04d}" for r in range(n)]
    names = ["Algebra", "Geometry", "Number Theory"]
    domains = [[names[r % 3]] + (["Algebra"] if r % 4 == 0 else []) for r in range(n)]
    select = {"ids": ids, "domains": domains, "domain_order": names, "t_thr": t_thr,
              "s_thr": s_thr, "k": k, "quota": 4, "seed": 9, "exact": exact}  # fmt: skip
    want = select_candidates(pairs=lambda: [stored], **select)
    spec = SelectionSpec(**{key: v for key, v in select.items() if key != "exact"})
    got = select_from_rows(spec, viable, lambda rows: query_rows(arrays, rows, *floors), exact)
    assert want.height >= 3 * k * 6, want.height  # queries in several domains
    assert got.equals(want)


@pytest.mark.parametrize("t_thr,s_thr", [(90, 35), (Cut(0.4), Cut(0.15)), (Cut(100.2 / 255), 40)])
def test_row_group_counts_at_any_threshold_are_the_stored_pairs_counts(t_thr, s_thr):
    """Counted over the triangle, a block of rows at a time (blocks smaller than the corpus,
    on one thread and two): the stored pairs' ``group_counts``, with the pairs within a quantum
    of a number decided on their exact values."""
    n = 150
    arrays, pairs = _case(n, seed=13)
    want = group_counts(n, *pairs, t_thr, s_thr, ExactSignals(*arrays))
    for threads in (1, 2):
        exact = ExactSignals(*arrays)
        with patch.object(summaries, "TRIANGLE_ROWS", 64):
            got = row_group_counts(arrays, t_thr, s_thr, exact, threads=threads)
        assert np.array_equal(got, want) and got.min() >= 0 and got.max() > 0
    if isinstance(t_thr, Cut):
        assert exact.recomputed > 0


@pytest.mark.parametrize("floors", [(0, 0), (90, 40)])
def test_the_triangle_in_blocks_is_every_stored_pair_once(floors):
    """Blocks of rows that end inside a tile, on one thread and two: each pair at or above a
    floor exactly once, with the bytes the shards store."""
    n = 170
    arrays, pairs = _case(n, seed=5)
    keep = (pairs[2] >= floors[0]) | (pairs[3] >= floors[1])
    want = tuple(a[keep] for a in pairs)
    for threads in (1, 2):
        chunks = list(triangle_pairs(arrays, *floors, threads=threads, block_rows=50))
        assert len(chunks) == 4
        got = tuple(np.concatenate([c[x] for c in chunks]) for x in range(4))
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("p", [50, 90, 97.5])
def test_percentiles_over_the_triangle_are_the_stored_pairs(p):
    """``percentile_thresholds`` over the triangle computed twice (its two passes) and over the
    stored pairs at the same floors: the same exact values, overall and per domain."""
    n, floors = 160, (40, 10)
    arrays, pairs = _case(n, seed=17)
    keep = (pairs[2] >= floors[0]) | (pairs[3] >= floors[1])
    stored = tuple(a[keep] for a in pairs)
    names = ["Algebra", "Geometry"]
    domains = [[names[r % 2]] + (["Algebra"] if r % 5 == 0 else []) for r in range(n)]
    args = (n, domains, names, p, floors)
    want = percentile_thresholds(lambda: [stored], *args, ExactSignals(*arrays))
    passes = []

    def chunks():
        passes.append(1)
        return triangle_pairs(arrays, *floors, block_rows=64)

    got = percentile_thresholds(chunks, *args, ExactSignals(*arrays))
    assert got == want and len(passes) == 2 and set(got) == {None, *names}


def test_both_designs_give_the_builds_thresholds_and_candidates(shared_build, tmp_path):
    """``perf/summaries.py`` on the session's tiny build: its given thresholds and every
    domain's candidate lists from the rows equal the build's and the stored pairs'; with the
    thresholds derived instead, both designs derive the same ones and select the same lists."""
    import importlib.util

    import yaml

    from saber_assets.config import REPO_ROOT

    spec = importlib.util.spec_from_file_location(
        "summaries_bench", REPO_ROOT / "perf" / "summaries.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    built = shared_build("tiny")
    res = bench.compare(built.config, built.home, threads=2)
    assert res["identical"], res["differences"]
    assert res["thresholds"] == "given" and res["queries"] >= 5 and res["stored_pairs"] > 0
    doc = yaml.safe_load(built.config.read_text())
    doc["candidates"].update(topic_threshold=None, summary_threshold=None, queries_per_domain=1)
    derived = tmp_path / "tiny.yaml"
    derived.write_text(yaml.safe_dump(doc))
    res = bench.compare(derived, built.home, threads=2, against_build=False)
    assert res["identical"], res["differences"]
    assert res["thresholds"] != "given" and res["queries"] > 0 and res["summary_bytes"] > 0


@pytest.mark.parametrize("start,end", [(0, 120), (64, 150), (130, 160)])
def test_a_grown_corpus_recomputes_only_the_rows_a_new_problem_reaches(start, end):
    """From 130 problems to 160: the shard's summaries updated from its old ones equal a fresh
    computation at 160; old rows no new problem pairs with at or above a floor are kept, not
    recomputed; a shard past the old end (rows new to it) is computed whole."""
    n0, n, k, floors = 130, 160, 2, (120, 60)
    arrays, _ = _case(n, seed=41)
    t_ptr, t_idx, lin, s_ptr, s_idx = arrays
    prefix = KernelArrays(
        t_ptr[: n0 + 1], t_idx[: t_ptr[n0]], lin, s_ptr[: n0 + 1], s_idx[: s_ptr[n0]]
    )
    old = viability_summaries(prefix, start, min(end, n0), k, floors)
    got, recomputed = grown_summaries(arrays, start, end, old, n0, k, floors)
    assert np.array_equal(got, viability_summaries(arrays, start, end, k, floors))
    assert 0 < recomputed < min(end, n0) - start if start < n0 else recomputed == 0
    assert not np.array_equal(old, got[: len(old)]) if start < n0 else len(old) == 0


def test_a_build_that_keeps_summaries_selects_what_one_that_keeps_pairs_does(
    shared_build, tmp_path, monkeypatch, capsys
):
    """``signals.layout: summaries`` on a copy of the session's tiny build, its signal stages and
    domains built again: its shards keep no pair, and its thresholds (given), candidate lists and
    ratings are the pairs build's (what reads them is the same code on the same tables). Then
    with the thresholds derived: the build's thresholds and candidates are what the stored
    pairs' design gives on the same inputs (computed here, every pair at the floors)."""
    import polars as pl
    import yaml

    from saber_assets.cli import main
    from saber_assets.config import load_config
    from saber_assets.ontology.domains import domain_names
    from saber_assets.signals.prepare import SignalInputs, signal_pool
    from saber_assets.signals.stored import read_floors

    built = shared_build("tiny")
    cfg = built.copy_to(tmp_path, monkeypatch)
    doc = yaml.safe_load(cfg.read_text())
    doc["signals"]["layout"] = "summaries"
    cfg.write_text(yaml.safe_dump(doc))
    cached = tmp_path / "home" / "tiny" / "signals" / "selection"
    before = {p.name for p in cached.glob("*.parquet")}  # the pairs build's selection
    capsys.readouterr()
    stages = [f"--select={s}" for s in ("signal-inputs", "shards", "thresholds", "domains")]
    assert main(["build", "--config", str(cfg), "--steps", *stages]) == 0
    out = capsys.readouterr().out
    assert "pair_signal_shards [" in out and "topic_annotations" not in out
    home, ref = tmp_path / "home" / "tiny", built.home / "tiny"
    assert len(list((home / "signals").glob("*.summary.npz"))) == doc["signals"]["shards"]
    # computed once, by the first domain partition, for the others to read back
    after = {p.name for p in cached.glob("*.parquet")}
    assert len(after) == 1 and after != before, (before, after)

    def frame(root: Path, name: str, key: list[str]) -> pl.DataFrame:
        return pl.read_parquet(root / "parquet" / name).sort(key)

    key = ["domain", "query_id", "position"]
    assert frame(home, "query_candidates", key).equals(frame(ref, "query_candidates", key))
    assert frame(home, "relevance_thresholds.parquet", ["domain"]).equals(
        frame(ref, "relevance_thresholds.parquet", ["domain"])
    )
    key_r = ["query_id", "candidate_id"]
    assert frame(home, "relevance_ratings", key_r).equals(frame(ref, "relevance_ratings", key_r))

    doc["candidates"].update(topic_threshold=None, summary_threshold=None, queries_per_domain=1)
    cfg.write_text(yaml.safe_dump(doc))
    assert main(["build", "--config", str(cfg), *stages]) == 0
    pcfg = load_config(cfg)
    inputs = SignalInputs.load(home / "signals" / "inputs.npz")
    pool = signal_pool(pl.read_parquet(home / "parquet" / "problem_annotations.parquet"))
    domains, order = pool["domains"].to_list(), domain_names(pcfg.ontology)
    floors = read_floors(home / "signals")
    arrays = inputs.arrays
    indptr, cols, tq, sq, _ = signal_block(*arrays, 0, inputs.n, *floors)
    stored = (np.repeat(np.arange(inputs.n), np.diff(indptr)), cols.astype(np.int64), tq, sq)
    cand = pcfg.candidates
    want = derive_thresholds(in_memory_blocks(inputs.n, stored), domains, order,
                             cand.queries_per_domain, cand.candidates_per_group, *floors)  # fmt: skip
    got = pl.read_parquet(home / "parquet" / "relevance_thresholds.parquet").row(0, named=True)
    assert (got["topic_threshold_q"], got["summary_threshold_q"]) == (want.topic_q, want.summary_q)
    assert got["source"] == "derived"
    sel = select_candidates(
        ids=inputs.ids, domains=domains, domain_order=order, pairs=lambda: [stored],
        t_thr=want.topic_q, s_thr=want.summary_q, k=cand.candidates_per_group,
        quota=cand.quota_per_domain, seed=pcfg.seed,
    )  # fmt: skip
    cols_ = ["domain", "query_id", "candidate_id", "group", "topic", "summary", "position"]
    made = frame(home, "query_candidates", key).select(cols_)
    assert sel.height > 0 and made.equals(sel.select(cols_).sort(key))

    # percentiles (per domain, then the smallest): over the triangle computed again, the stored
    # pairs' exact values; the candidates read the viable rows the thresholds counted
    doc["candidates"].update(
        threshold_method="percentile", percentile=95, percentile_scope="domain"
    )
    cfg.write_text(yaml.safe_dump(doc))
    assert main(["build", "--config", str(cfg), *stages]) == 0
    by = percentile_thresholds(lambda: [stored], inputs.n, domains, order, 95, floors,
                               ExactSignals.of(inputs))  # fmt: skip
    taus = min(v[0] for d, v in by.items() if d), min(v[1] for d, v in by.items() if d)
    got = pl.read_parquet(home / "parquet" / "relevance_thresholds.parquet").row(0, named=True)
    assert (got["topic_tau"], got["summary_tau"]) == taus
    assert got["source"] == "percentile 95 (domain)"
    assert len(list((home / "signals" / "viable").glob("*.npy"))) == 1
    sel = select_candidates(
        ids=inputs.ids, domains=domains, domain_order=order, pairs=lambda: [stored],
        t_thr=Cut(taus[0]), s_thr=Cut(taus[1]), k=cand.candidates_per_group,
        quota=cand.quota_per_domain, seed=pcfg.seed, exact=ExactSignals.of(inputs),
    )  # fmt: skip
    made = frame(home, "query_candidates", key).select(cols_)
    assert sel.height > 0 and made.equals(sel.select(cols_).sort(key))


def test_kernel_buffers_that_fill_up_resume_where_they_stopped():
    """The kept pairs outgrow their buffers at every row tile (room for one pair): the kernel
    resumes at the tile that did not fit, and the pairs, their order and the histograms are
    those of buffers that never filled; a full row pass likewise."""
    arrays, _ = _case(170, seed=11)
    roomy = signal_block(*arrays, 3, 170, 100, 60, n_bins=8, capacity=10**6)
    tight = signal_block(*arrays, 3, 170, 100, 60, n_bins=8, capacity=1)
    assert len(roomy[1]) > 200  # several tiles' worth of pairs kept
    assert all(np.array_equal(a, b) for a, b in zip(roomy, tight, strict=True))
    rows = np.array([169, 0, 64, 65, 3, 100])
    want = full_row_pairs(arrays, rows, 100, 60, capacity=10**6)
    got = full_row_pairs(arrays, rows, 100, 60, capacity=1)
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


@pytest.mark.parametrize("n_rows,block,threads", [(3877, 256, 2), (100, 256, 2), (64, 256, 4),
                                                   (1000, 64, 1), (0, 256, 2), (130, 256, 3)])  # fmt: skip
def test_summary_blocks_are_whole_tiles_in_a_multiple_of_the_threads(n_rows, block, threads):
    blocks = summaries.even_blocks(n_rows, block, threads)
    if n_rows == 0:
        assert blocks == []
        return
    assert [b[0] for b in blocks] == [0] + [b[1] for b in blocks[:-1]]
    assert (blocks[-1][1] if blocks else 0) == n_rows
    assert all(b[0] % 64 == 0 for b in blocks)
    tiles = [-(-(b[1] - b[0]) // 64) for b in blocks]
    if threads > 1 and sum(tiles) >= threads:
        assert len(blocks) % threads == 0
    assert max(tiles, default=0) - min(tiles, default=0) <= 1  # even, to a tile
    assert max(tiles, default=0) <= max(block // 64, 1) or len(blocks) <= threads


def test_summaries_in_blocks_and_threads_equal_one_block():
    arrays, _ = _case(300, seed=5)
    one = viability_summaries(arrays, 10, 290, 3, (90, 40), block_rows=1024)
    for block_rows, threads in ((64, 1), (128, 2), (64, 3)):
        got = viability_summaries(arrays, 10, 290, 3, (90, 40), threads, block_rows)
        assert np.array_equal(got, one)
