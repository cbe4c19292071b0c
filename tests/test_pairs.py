"""The stored pairs read a shard at a time: row groups, gathering, and thresholds by blocks."""

import gc
import weakref

import numpy as np
import pytest

from saber_assets.signals.compute import compute_segment
from saber_assets.signals.kernels import to_csr
from saber_assets.signals.pairs import BYTES_PER_DIRECTION, BYTES_PER_ROW, StoredPairs, row_groups
from saber_assets.signals.prepare import SignalInputs
from saber_assets.signals.shards import LOWER, UPPER, Shard, ShardError, read_shard, write_shard
from saber_assets.signals.thresholds import (
    derive_thresholds,
    in_memory_blocks,
    row_pairs,
    viable_counts,
    viable_per_domain,
)

N_BASE, N = 130, 160  # 30 rows appended after the first computation: lower segments


@pytest.fixture(scope="module")
def shard_files(tmp_path_factory):
    """Upper segments of uneven row blocks over the first 130 rows and two lower segments for
    the 30 appended ones, as a real build leaves them."""
    rng = np.random.default_rng(4)
    t = 25
    lin = rng.random((t, t)).astype(np.float32)
    lin = (lin + lin.T) / 2
    np.fill_diagonal(lin, 1.0)
    topics = [list(rng.integers(0, t, rng.integers(1, 5))) for _ in range(N)]
    tokens = [list(rng.integers(0, 30, rng.integers(1, 10))) for _ in range(N)]
    tp, ti = to_csr(topics)
    sp, si = to_csr(tokens)
    inputs = SignalInputs(
        [f"p{r}" for r in range(N)], tp, ti, lin, np.arange(t), sp, si, ["w"] * 30, "ic"
    )
    d = tmp_path_factory.mktemp("shards")
    segments = [
        (UPPER, 0, 7),
        (UPPER, 7, 64),
        (UPPER, 64, 130),
        (LOWER, 130, 131),
        (LOWER, 131, 160),
    ]
    paths = []
    for x, (kind, r0, r1) in enumerate(segments):
        n_cols = N_BASE if kind == UPPER else None
        shard = compute_segment(inputs, kind, r0, r1, 90, 60, 8, n_cols=n_cols)
        paths.append(d / f"s{x}.sig")
        write_shard(paths[-1], shard)
    versions = {n: inputs.prefix_version(n) for n in (N_BASE, 131, 160)}
    return StoredPairs(paths, N, versions)


def _arrays(pairs: StoredPairs):
    chunks = list(pairs.chunks())
    return tuple(np.concatenate(c) for c in zip(*chunks, strict=True))


def _per_row(blocks):
    """Row -> sorted (q_t, q_s) list; and every row's q_t checked non-increasing."""
    out = {}
    for b in blocks:
        for r in range(len(b.indptr) - 1):
            t = b.tq[b.indptr[r] : b.indptr[r + 1]]
            s = b.sq[b.indptr[r] : b.indptr[r + 1]]
            assert np.all(np.diff(t.astype(int)) <= 0), f"row {b.start + r} not sorted by q_t"
            out[b.start + r] = sorted(zip(t.tolist(), s.tolist(), strict=True))
    return out


def test_chunks_cover_every_stored_pair_once_and_degrees_count_both_directions(shard_files):
    i, j, tq, sq = _arrays(shard_files)
    assert len(i) == shard_files.total_pairs > 1000
    assert np.all(i < j) and j.max() < N
    assert len(set(zip(i.tolist(), j.tolist(), strict=True))) == len(i)
    assert (j >= N_BASE).any()  # the lower segments' pairs are there, oriented i < j
    deg = shard_files.degrees()
    assert np.array_equal(deg, np.bincount(i, minlength=N) + np.bincount(j, minlength=N))


@pytest.mark.parametrize("chunk_pairs", [1, 50, 999, 10**9])
def test_chunks_are_runs_of_whole_rows_within_the_size_and_cover_every_pair(
    shard_files, chunk_pairs
):
    whole = _arrays(shard_files)
    small = StoredPairs(shard_files.paths, N, shard_files.versions, chunk_pairs=chunk_pairs)
    chunks = list(small.chunks())
    for i, j, _, _ in chunks:  # within the size, or one row (i in an upper file, j in a lower)
        assert len(i) <= chunk_pairs or len(set(i.tolist())) == 1 or len(set(j.tolist())) == 1
    if chunk_pairs == 10**9:
        assert len(chunks) == len(shard_files.paths)
    else:
        assert len(chunks) > len(shard_files.paths)
    got = tuple(np.concatenate(c) for c in zip(*chunks, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(got, whole, strict=True))


@pytest.mark.parametrize("rows_per_group", [1, 3, 17, 1000])
def test_row_blocks_equal_the_in_memory_rows_at_any_budget(shard_files, rows_per_group):
    deg = shard_files.degrees()
    budget = int(np.sort(deg)[-1] * BYTES_PER_DIRECTION + BYTES_PER_ROW) * rows_per_group
    blocks = list(shard_files.row_blocks(budget, deg))
    assert [b.start for b in blocks] == [r0 for r0, _ in row_groups(deg, budget)]
    if rows_per_group == 1000:
        assert len(blocks) == 1
    else:
        assert len(blocks) > N // (rows_per_group + 1)
    whole = in_memory_blocks(N, _arrays(shard_files))
    assert _per_row(blocks) == _per_row(whole)


def test_held_pairs_read_each_file_once_and_answer_every_pass_as_the_files_do(
    shard_files, monkeypatch
):
    from saber_assets.signals import pairs as pairs_module
    from saber_assets.signals.pairs import BYTES_HELD, HeldPairs

    total = shard_files.total_pairs
    assert shard_files.held(total * BYTES_HELD - 1) is shard_files  # does not fit: the files
    reads = []
    real = pairs_module.read_shard
    monkeypatch.setattr(
        pairs_module, "read_shard", lambda p, **kw: reads.append(p) or real(p, **kw)
    )
    held = shard_files.held(total * BYTES_HELD)
    assert isinstance(held, HeldPairs) and sorted(reads) == sorted(shard_files.paths)
    deg = held.degrees()
    got = tuple(np.concatenate(c) for c in zip(*held.chunks(), strict=True))
    before = len(reads)
    assert _per_row(held.row_blocks(1, deg)) == _per_row(in_memory_blocks(N, got))
    assert len(reads) == before  # no pass after the first reads a file
    monkeypatch.setattr(pairs_module, "read_shard", real)
    assert all(np.array_equal(a, b) for a, b in zip(got, _arrays(shard_files), strict=True))
    assert np.array_equal(deg, shard_files.degrees())
    assert held.floors() == shard_files.floors() and held.digests() == shard_files.digests()


def test_a_group_reads_only_the_files_that_can_hold_its_pairs(shard_files):
    def spans(below):
        return [(s.kind, s.row_start) for s in shard_files.shards(below=below)]

    # upper segments starting at or past the group's end hold none of its rows, as rows or
    # as columns; lower (appended) segments pair their rows with every earlier row
    assert spans(7) == [(UPPER, 0), (LOWER, 130), (LOWER, 131)]
    assert spans(8) == [(UPPER, 0), (UPPER, 7), (LOWER, 130), (LOWER, 131)]
    assert spans(None) == spans(N) and len(spans(N)) == 5


def test_row_groups_are_contiguous_within_budget_and_a_heavy_row_stands_alone():
    deg = np.array([5, 0, 3, 100, 2, 2, 0, 7])
    cost = deg * BYTES_PER_DIRECTION + BYTES_PER_ROW
    for budget in (1, 30, 40, 41, 42, 60, 250, 10_000):
        groups = row_groups(deg, budget)
        assert groups[0][0] == 0 and groups[-1][1] == len(deg)
        assert all(a[1] == b[0] for a, b in zip(groups, groups[1:], strict=False))
        for r0, r1 in groups:
            assert r1 > r0
            assert cost[r0:r1].sum() <= budget or r1 == r0 + 1
            # as long as allowed: one more row would have passed the budget
            if r1 < len(deg):
                assert cost[r0 : r1 + 1].sum() > budget
    assert row_groups(deg, 40)[:3] == [(0, 1), (1, 3), (3, 4)]  # 216 bytes, alone
    assert row_groups(deg, 10_000) == [(0, 8)]
    assert row_groups(np.zeros(0, np.int64), 100) == []


def test_thresholds_by_blocks_equal_the_in_memory_derivation(shard_files):
    pairs = _arrays(shard_files)
    doms = [["A"] if r % 2 else ["A", "B"] for r in range(N)]
    doms[5] = []
    args = (doms, ["A", "B"], 10, 2, 90, 60)
    whole = derive_thresholds(in_memory_blocks(N, pairs), *args)
    deg = shard_files.degrees()
    for budget in (50, 400, 10**9):
        cut = derive_thresholds(shard_files.row_blocks(budget, deg), *args)
        assert cut == whole, budget
        point = (whole.topic_q, whole.summary_q)
        assert viable_per_domain(shard_files.chunks(), doms, ["A", "B"], 2, *point) == (
            whole.viable_at_final
        )
    assert whole.viable_at_final["A"] >= 10


def test_a_shard_that_changes_between_passes_is_refused_not_overrun(shard_files):
    deg = shard_files.degrees()
    last = read_shard(shard_files.paths[-1])
    last_written = int(last.cols[-1])  # the last direction written in a pass: its column's row
    # a row with more pairs than its slots (stopped before writing past them: the group's last
    # row, whose next slot is past the buffer, and the row written last of all, which no later
    # count check would catch), and a row with a slot left empty
    for row, delta in ((40, -1), (N - 1, -1), (N - 1, -2), (last_written, -1), (0, -1), (40, 1)):
        wrong = deg.copy()
        wrong[row] += delta
        with pytest.raises(ShardError, match=r"changed while they were read"):
            list(shard_files.row_blocks(10**9, wrong))
    # the last row of a group whose last pair arrives as the column of a later (lower) row:
    # its extra pair must not land one past the group's buffer either
    for short in (1, 2):  # two short: the second extra pair must not be written either
        wrong = deg.copy()
        wrong[99] -= short
        first_group = int((wrong[:100] * BYTES_PER_DIRECTION + BYTES_PER_ROW).sum())
        assert row_groups(wrong, first_group)[0] == (0, 100)
        with pytest.raises(ShardError, match=r"changed while they were read"):
            list(shard_files.row_blocks(first_group, wrong))


def test_a_shard_of_another_corpus_version_is_refused(shard_files):
    for version in ("x" * 16, "0" * 16):  # above and below the real one
        other = StoredPairs(shard_files.paths, N, {**shard_files.versions, N_BASE: version})
        with pytest.raises(ShardError, match=f"expected '{version}'"):
            other.degrees()
        with pytest.raises(ShardError, match=f"expected '{version}'"):
            list(other.chunks())
    missing = StoredPairs(shard_files.paths, N, {160: shard_files.versions[160]})
    with pytest.raises(ShardError, match="expected None"):
        list(missing.chunks())


def test_gathered_blocks_hold_what_the_budget_allows(shard_files):
    """The budget's cost model is the real one: a block's arrays (q_t, q_s, offsets and the
    cursors beside them) never exceed it unless the block is a single row."""
    deg = shard_files.degrees()
    for budget in (300, 2_000, 20_000):
        for b in shard_files.row_blocks(budget, deg):
            rows = len(b.indptr) - 1
            held = b.tq.nbytes + b.sq.nbytes + b.indptr.nbytes - 8 + 8 * rows
            assert held <= budget or rows == 1, (budget, b.start, held)


def test_no_rows_and_a_domain_list_of_the_wrong_length():
    """An empty corpus has no viable query (not a crash); domains for fewer or more rows than
    the pairs cover are refused (compiled, the kernel would read past the domain offsets)."""
    empty = (
        np.zeros(0, np.int32),
        np.zeros(0, np.int32),
        np.zeros(0, np.uint8),
        np.zeros(0, np.uint8),
    )
    [block] = in_memory_blocks(0, empty)
    assert block.indptr.tolist() == [0] and len(block.tq) == 0
    assert viable_counts(block.indptr, block.tq, block.sq, [], 1, 1, 0, 0).sum() == 0
    with pytest.raises(ValueError, match="no domain has 1 queries"):
        derive_thresholds([block], [], ["A"], 1, 1, 0, 0)
    pairs = (
        np.array([0], np.int32),
        np.array([1], np.int32),
        np.array([9], np.uint8),
        np.array([9], np.uint8),
    )
    [block] = in_memory_blocks(3, pairs)
    for rows in ([[0], [0]], [[0]] * 4):
        with pytest.raises(ValueError, match=rf"{len(rows)} rows of domains for 3 rows of pairs"):
            viable_counts(block.indptr, block.tq, block.sq, rows, 1, 1, 0, 0)
    with pytest.raises(ValueError, match="2 rows of domains for 3 rows"):
        derive_thresholds([block], [["A"], ["A"]], ["A"], 1, 1, 0, 0)


def test_more_than_256_rows_in_a_file_and_in_the_corpus(tmp_path):
    """Row counters compared with the file's and the corpus's row counts past CPython's cached
    small ints (a comparison by identity would never stop)."""
    n = 300
    rows = np.arange(n - 1)
    shard = Shard(UPPER, n, 0, n - 1, 0, 0, 255, "v", np.arange(n, dtype=np.int64),
                  (rows + 1).astype(np.int32), np.full(n - 1, 9, np.uint8),
                  np.full(n - 1, 7, np.uint8), np.zeros((n - 1, 2, 2), np.uint32))  # fmt: skip
    write_shard(tmp_path / "big.sig", shard)
    pairs = StoredPairs([tmp_path / "big.sig"], n, chunk_pairs=1)
    chunks = list(pairs.chunks())
    assert len(chunks) == n - 1 and [int(c[0][0]) for c in chunks] == list(range(n - 1))
    deg = pairs.degrees()
    assert deg.tolist() == [1] + [2] * (n - 2) + [1]
    blocks = list(pairs.row_blocks(BYTES_PER_DIRECTION * 2 + BYTES_PER_ROW, deg))
    assert len(blocks) == n and sum(len(b.tq) for b in blocks) == 2 * (n - 1)


def test_row_pairs_and_blocks_agree_on_planted_rows():
    """A hand-made set of pairs: rows with no pair, one pair, ties in q_t."""
    i = np.array([0, 0, 0, 2, 3, 3], np.int32)
    j = np.array([1, 2, 4, 4, 4, 5], np.int32)
    tq = np.array([9, 9, 3, 7, 7, 1], np.uint8)
    sq = np.array([1, 2, 3, 4, 5, 6], np.uint8)
    indptr, t, s = row_pairs(6, i, j, tq, sq)
    assert indptr.tolist() == [0, 3, 4, 6, 8, 11, 12]
    assert t[:3].tolist() == [9, 9, 3] and sorted(s[8:11].tolist()) == [3, 4, 5]


def _alive_at_each_sort(shard_files, monkeypatch, consume) -> list[int]:
    """How many earlier blocks are still alive each time a block is sorted (its buffers exist
    by then), while ``consume`` takes the blocks."""
    from saber_assets.signals import pairs as pairs_mod

    yielded: list[weakref.ref] = []
    alive: list[int] = []
    sort = pairs_mod.sort_rows_by_topic

    def spying_sort(indptr, t, s):
        alive.append(sum(r() is not None for r in yielded))
        sort(indptr, t, s)

    monkeypatch.setattr(pairs_mod, "sort_rows_by_topic", spying_sort)

    def recorded(blocks):
        for b in blocks:
            yielded.append(weakref.ref(b.tq))
            yield b
            del b

    consume(recorded(shard_files.row_blocks(8_000, shard_files.degrees())))  # 7 blocks
    assert len(alive) >= 5
    return alive


def test_one_gathered_block_in_memory_at_a_time(shard_files, monkeypatch):
    """A block is budget-sized (4 GiB by default at 283K): the next block's buffers must not be
    allocated while the previous block is still referenced, by the gathering generator or by
    the threshold derivation that consumes it."""
    doms = [["A"] if r % 2 else ["A", "B"] for r in range(N)]
    alive = _alive_at_each_sort(
        shard_files,
        monkeypatch,
        lambda blocks: derive_thresholds(blocks, doms, ["A", "B"], 10, 2, 90, 60),
    )
    assert max(alive) == 0, alive


@pytest.mark.parametrize("collect_above", [0, 1 << 40])
def test_a_large_block_left_in_a_reference_cycle_is_collected_before_the_next(
    shard_files, monkeypatch, collect_above
):
    """A block its consumer dropped but a reference cycle still holds is freed by a garbage
    collection before the next large block is gathered (small ones are not worth one)."""
    from saber_assets.signals import pairs as pairs_mod

    monkeypatch.setattr(pairs_mod, "COLLECT_ABOVE", collect_above)

    def in_cycles(blocks):
        for b in blocks:
            cycle = [b]
            cycle.append(cycle)
            del b, cycle

    gc.disable()  # only the generator's own collection may free the cycles
    try:
        alive = _alive_at_each_sort(shard_files, monkeypatch, in_cycles)
    finally:
        gc.enable()
    if collect_above == 0:
        assert max(alive) == 0, alive
    else:
        assert alive[1:] == list(range(1, len(alive))), alive  # nothing freed without it


def test_viability_counts_accept_a_block_of_more_than_256_rows():
    """The domain-list check compares lengths by value: above 256, CPython's ints are separate
    objects, so an identity test would refuse a list of the right length."""
    rng = np.random.default_rng(8)
    n = 300
    i = rng.integers(0, n - 1, 4_000).astype(np.int32)
    j = np.minimum(i + rng.integers(1, 40, 4_000), n - 1).astype(np.int32)
    keep = i < j
    tq = rng.integers(0, 256, keep.sum()).astype(np.uint8)
    sq = rng.integers(0, 256, keep.sum()).astype(np.uint8)
    [block] = in_memory_blocks(n, (i[keep], j[keep], tq, sq))
    rows = [[r % 2] for r in range(n)]
    counts = viable_counts(block.indptr, block.tq, block.sq, rows, 2, 1, 0, 0)
    assert counts.shape == (2, 255, 255) and counts.sum() > 0
