"""Signal kernels against a plain-Python reference, shard files, thresholds, growth, Dagster shards."""

import json

import numpy as np
import pytest

from saber_assets.signals.compute import compute_segment, memory_available
from saber_assets.signals.kernels import (
    bma_jaccard_dense,
    pair_values,
    pairwise_block_naive,
    quantize,
    signal_block,
    to_csr,
)
from saber_assets.signals.pairs import StoredPairs
from saber_assets.signals.prepare import (
    SignalInputError,
    SignalInputs,
    ic_hash,
    prepare_inputs,
    summary_tokens,
)
from saber_assets.signals.shards import (
    LOWER,
    UPPER,
    ShardError,
    read_header,
    read_shard,
    write_shard,
)
from saber_assets.signals.stored import read_floors
from saber_assets.signals.thresholds import (
    QMAX,
    derive_thresholds,
    group_counts,
    in_memory_blocks,
    row_pairs,
    strictest,
    viable_counts,
    viable_per_domain,
)


def load_pairs(paths, versions=None, n=None):
    chunks = list(StoredPairs(list(paths), n or 0, versions).chunks())
    return tuple(np.concatenate(c) for c in zip(*chunks, strict=True))


def ref_bma(a, b, lin):
    a, b = set(a), set(b)
    if not a or not b:
        return 0.0
    fwd = sum(max(lin[x][y] for y in b) for x in a)
    rev = sum(max(lin[x][y] for x in a) for y in b)
    return (fwd + rev) / (len(a) + len(b))


def ref_jaccard(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a and b else 0.0


def random_case(n=150, t=30, v=40, seed=0):
    rng = np.random.default_rng(seed)
    lin = rng.random((t, t)).astype(np.float32)
    lin = (lin + lin.T) / 2
    np.fill_diagonal(lin, 1.0)
    topics = [list(rng.integers(0, t, rng.integers(0, 6))) for _ in range(n)]
    tokens = [
        list(rng.integers(0, v, rng.integers(0, 15)) * 7 + 3) for _ in range(n)
    ]  # any non-negative ints
    # planted edge cases: duplicates, a single topic, identical sets, empty sets
    topics[0], tokens[0] = [3, 3, 3], [5, 5]
    topics[1], tokens[1] = [3], [5]
    topics[2], tokens[2] = [1, 2, 4], [10, 17, 24]
    topics[3], tokens[3] = [4, 2, 1, 2], [24, 10, 17]
    topics[4], tokens[4] = [], []
    return topics, lin, tokens


def test_dense_matches_plain_python():
    topics, lin, tokens = random_case()
    top, summ = bma_jaccard_dense(topics, lin, tokens)
    n = len(topics)
    assert (
        top.dtype == np.float32
        and top.shape == (n, n)
        and np.all(np.diag(top) == 0)
        and np.all(np.diag(summ) == 0)
    )
    for i in range(n):
        for j in range(n):
            if i != j:
                assert abs(top[i, j] - ref_bma(topics[i], topics[j], lin)) < 1e-5
                assert abs(summ[i, j] - ref_jaccard(tokens[i], tokens[j])) < 1e-6
    assert top[0, 1] == pytest.approx(1.0) and summ[0, 1] == 1.0  # duplicates are sets
    assert top[2, 3] == pytest.approx(1.0) and summ[2, 3] == 1.0  # identical sets
    assert top[4].max() == 0 and summ[4].max() == 0  # empty sets: 0


def _dense_ids(tokens):
    vocab = {}
    return [[vocab.setdefault(t, len(vocab)) for t in s] for s in tokens]


def test_block_kernel_agrees_with_dense_up_to_quantisation():
    topics, lin, tokens = random_case(n=200, seed=3)
    top, summ = bma_jaccard_dense(topics, lin, tokens)
    tp, ti = to_csr(topics)
    sp, si = to_csr(_dense_ids(tokens))
    ft, fs = 120, 90
    indptr, cols, tq, sq, hist = signal_block(tp, ti, lin, sp, si, 40, 170, ft, fs, n_bins=8)
    rows = np.repeat(np.arange(40, 170), np.diff(indptr))
    assert np.all(cols > rows)
    assert np.abs(tq.astype(int) - quantize(top[rows, cols]).astype(int)).max() <= 1
    assert np.array_equal(sq, quantize(summ[rows, cols]))
    # exactly the pairs at or above either floor are kept
    ii, jj = np.triu_indices(200, 1)
    sel = (ii >= 40) & (ii < 170)
    want = (quantize(top[ii, jj]) >= ft) | (quantize(summ[ii, jj]) >= fs)
    got = set(zip(rows.tolist(), cols.tolist(), strict=True))
    exp = set(zip(ii[sel & want].tolist(), jj[sel & want].tolist(), strict=True))
    # quantisation of the float sum may differ by one quantum right at the topic floor
    border = {(i, j) for i, j in got ^ exp if abs(int(quantize(top[i, j])) - ft) <= 1}
    assert got ^ exp == border
    # every pair of the block lands in its row's histogram
    assert hist.sum() == sel.sum() and hist.shape == (130, 8, 8)


def test_dense_refuses_topic_ids_outside_the_lin_table():
    lin = np.eye(5, dtype=np.float32)
    for bad in ([-1, 2], [2, 5], [2, 9]):
        with pytest.raises(ValueError, match=r"topic ids must lie in \[0, 5\)"):
            bma_jaccard_dense([[1], bad], lin, [[1], [2]])
    # ids that never use topic 0 (or the last) are fine
    top, _ = bma_jaccard_dense([[1, 2], [2, 3]], lin, [[1], [2]])
    assert top[0, 1] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="2 topic sets but 1 token sets"):
        bma_jaccard_dense([[1], [2]], lin, [[1]])
    with pytest.raises(ValueError, match="1 topic sets but 2 token sets"):
        bma_jaccard_dense([[1]], lin, [[1], [2]])


def test_jaccard_table_is_the_quantised_ratio_at_every_cell_used():
    """The block kernel reads q(J) from a table by (intersection, union): every cell a pair of
    sets of up to MAX_TOKENS tokens can reach, against the ratio computed directly."""
    from saber_assets.signals.kernels import MAX_TOKENS, jaccard_lut

    lut = jaccard_lut()
    inter, union = np.meshgrid(
        np.arange(MAX_TOKENS + 1), np.arange(2 * MAX_TOKENS + 1), indexing="ij"
    )
    used = (inter <= union) & (union - inter <= 2 * (MAX_TOKENS - inter))
    want = quantize(np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0))
    assert lut.shape == inter.shape and np.array_equal(lut[used], want[used])
    assert lut[1, 1] == lut[MAX_TOKENS, MAX_TOKENS] == 255 and lut[0, 0] == lut[0, 7] == 0
    assert lut[1, 2] == 128  # 0.5 rounds half up


def test_dense_sets_of_more_than_256_members():
    """The plain pairwise code walks sorted sets by index: sets larger than CPython's cached small
    ints (256) must end the walk at their length like small ones."""
    rng = np.random.default_rng(2)
    lin = rng.random((400, 400)).astype(np.float32)
    lin = (lin + lin.T) / 2
    np.fill_diagonal(lin, 1.0)
    topics = [list(range(0, 300)), list(range(100, 400)), list(range(350, 400))]
    # the later set of a pair ends first (its walk must stop at its own length)
    tokens = [list(range(0, 900, 3)), list(range(0, 600, 2)), list(range(1000, 1300))]
    top, summ = bma_jaccard_dense(topics, lin, tokens)
    for i in range(3):
        for j in range(3):
            if i != j:
                assert abs(top[i, j] - ref_bma(topics[i], topics[j], lin)) < 1e-5
                assert abs(summ[i, j] - ref_jaccard(tokens[i], tokens[j])) < 1e-6
    assert summ[0, 1] == pytest.approx(100 / 500) and summ[0, 2] == 0.0
    # and more than 256 problems (their count is compared too)
    top, _ = bma_jaccard_dense([[0]] * 300, lin, [[1]] * 300)
    assert top.shape == (300, 300) and top[0, 299] == 1.0


def test_a_pair_exactly_at_a_storage_floor_is_stored_and_one_quantum_below_is_not():
    lin = np.array([[1, 128 / 255, 0], [128 / 255, 1, 0], [0, 0, 1]], dtype=np.float32)
    tp, ti = to_csr([[0], [1], [2]])
    sp, si = to_csr([[1, 2], [2, 3], [9]])  # Jaccard 1/3: q = 85
    for ft, fs, want in (
        (128, 255, [(0, 1, 128, 85)]),
        (129, 255, []),
        (255, 85, [(0, 1, 128, 85)]),
    ):
        indptr, cols, tq, sq, _ = signal_block(tp, ti, lin, sp, si, 0, 3, ft, fs)
        rows = np.repeat(np.arange(3), np.diff(indptr))
        got = list(zip(rows.tolist(), cols.tolist(), tq.tolist(), sq.tolist(), strict=True))
        assert got == want, (ft, fs)
    assert signal_block(tp, ti, lin, sp, si, 0, 3, 255, 86)[1].size == 0


def test_naive_baseline_sums_the_dense_signals():
    """The benchmark's baseline computes what the kernels compute (else its ratio means nothing)."""
    topics, lin, tokens = random_case(n=60, seed=9)
    top, summ = bma_jaccard_dense(topics, lin, tokens)
    tp, ti = to_csr(topics)
    sp, si = to_csr(tokens)
    got = pairwise_block_naive(tp, ti, lin, sp, si, 10, 35)
    want = float(np.triu(top, 1)[10:35].sum() + np.triu(summ, 1)[10:35].sum())
    assert got == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("first", [None, [1], [12], [2] * 10, "last"])
def test_block_kernel_with_many_topics_and_several_per_problem(first):
    """300 topics (more than a tile's 64 lanes) and up to 9 topics a problem: the tile's topic
    union outgrows 64 and the gathered tables must hold it — sized from the largest set whether
    the first rows' sets are the smallest (1; ten of 2) or the largest (12), or the last row's
    is the smallest; from row 0 and from a later first row."""
    rng = np.random.default_rng(13)
    t, n = 300, 150
    lin = rng.random((t, t)).astype(np.float32)
    lin = (lin + lin.T) / 2
    np.fill_diagonal(lin, 1.0)
    topics = [list(rng.choice(t, rng.integers(1, 10), replace=False)) for _ in range(n)]
    if first == "last":
        topics[-1] = [7]
    else:
        for r, size in enumerate(first or []):
            topics[r] = list(rng.choice(t, size, replace=False))
    # a vocabulary of 400: most pairs share nothing, so a token left set from an earlier row
    # tile shows as a false intersection
    tokens = [list(rng.integers(0, 400, rng.integers(1, 12))) for _ in range(n)]
    top, summ = bma_jaccard_dense(topics, lin, tokens)
    tp, ti = to_csr(topics)
    sp, si = to_csr(tokens)
    indptr, cols, tq, sq, hist = signal_block(tp, ti, lin, sp, si, 0, n, 0, 0, n_bins=5)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    assert len(cols) == n * (n - 1) // 2  # floors 0: every pair kept
    assert np.abs(tq.astype(int) - quantize(top[rows, cols]).astype(int)).max() <= 1
    # rounding is to nearest: exact wherever the float sum is not within 1% of a half quantum
    scaled = top[rows, cols].astype(np.float64) * 255
    clear = np.abs(scaled - np.floor(scaled) - 0.5) > 0.01
    assert clear.sum() > 0.9 * len(cols)
    assert np.array_equal(tq[clear], quantize(top[rows, cols])[clear])
    assert np.array_equal(sq, quantize(summ[rows, cols]))
    # each pair in its row's (topic bin, summary bin): bin = q * n_bins // 256
    want = np.zeros_like(hist)
    np.add.at(want, (rows, tq.astype(int) * 5 // 256, sq.astype(int) * 5 // 256), 1)
    assert np.array_equal(hist, want) and hist[:, 4, :].sum() > 0 and hist[:, :, 0].sum() > 0
    # a block that does not start at row 0 (its buffers sized from its own rows) is the same part
    later = signal_block(tp, ti, lin, sp, si, 70, n, 0, 0, n_bins=5)
    assert np.array_equal(later[1], cols[indptr[70] :]) and np.array_equal(
        later[2], tq[indptr[70] :]
    )


def test_block_kernel_with_no_tokens_at_all_and_problems_without_topics():
    """No problem has a summary token (every summary empty): the summary signal is 0 for every
    pair. A problem without topics has topic signal exactly 0 with everyone, also in the pairs
    stored for their summary."""
    lin = np.full((4, 4), 0.5, dtype=np.float32)
    np.fill_diagonal(lin, 1.0)
    tp, ti = to_csr([[0], [], [0, 1], [], [2]])
    sp, si = to_csr([[]] * 5)
    assert sp.tolist() == [0] * 6 and si.shape == (0,) and si.dtype == np.int32
    for sets, want in (([[], [7]], [7]), ([[], [5], [2, 2]], [5, 2]), ([[3], []], [3])):
        assert to_csr(sets)[1].tolist() == want  # empty sets first or last
    # one token in the whole corpus, of a high id: the token masks reach it
    sp2, si2 = to_csr([[], [], [9], [], []])
    _, _, _, sq2, _ = signal_block(tp, ti, lin, sp2, si2, 0, 5, 0, 0)
    assert not sq2.any()
    indptr, cols, tq, sq, hist = signal_block(tp, ti, lin, sp, si, 0, 5, 0, 0)
    assert len(cols) == 10 and not sq.any() and hist.sum() == 10
    assert hist.shape == (5, 16, 16)  # the default bins, as the config's default
    rows = np.repeat(np.arange(5), np.diff(indptr))
    empty = np.isin(rows, [1, 3]) | np.isin(cols, [1, 3])
    assert not tq[empty].any() and tq[~empty].all()
    # only the first problem has topics (the buffers are sized from it alone)
    tp1, ti1 = to_csr([[0, 1, 2], [], []])
    sp1, si1 = to_csr([[5], [5], []])
    _, cols1, tq1, sq1, _ = signal_block(tp1, ti1, lin, sp1, si1, 0, 3, 0, 0)
    assert len(cols1) == 3 and not tq1.any() and sq1.tolist() == [255, 0, 0]
    sp, si = to_csr([[5], [5], [6], [6], [7]])  # stored by summary only (topic floor 255)
    indptr, cols, tq, sq, _ = signal_block(tp, ti, lin, sp, si, 0, 5, 255, 255)
    rows = np.repeat(np.arange(5), np.diff(indptr))
    assert list(zip(rows.tolist(), cols.tolist(), tq.tolist(), sq.tolist(), strict=True)) == [
        (0, 1, 0, 255),
        (2, 3, 0, 255),
    ]


def test_token_sets_of_255_are_the_cap_and_256_is_refused():
    """The bit-sliced counter has 8 planes: 255 tokens is the largest set; identical and
    disjoint sets of that size reach both ends of the (intersection, union) table."""
    lin = np.eye(3, dtype=np.float32)
    big = list(range(255))
    tokens = [big, big, list(range(255, 510)), [0]]
    tp, ti = to_csr([[0], [0], [1], [2]])
    sp, si = to_csr(tokens)
    indptr, cols, tq, sq, _ = signal_block(tp, ti, lin, sp, si, 0, 4, 0, 0)
    rows = np.repeat(np.arange(4), np.diff(indptr)).tolist()
    got = dict(zip(zip(rows, cols.tolist(), strict=True), sq.tolist(), strict=True))
    assert got[(0, 1)] == 255 and got[(0, 2)] == 0 and got[(1, 2)] == 0
    assert got[(0, 3)] == quantize(1 / 255)
    sp, si = to_csr([*tokens[:3], list(range(600, 856))])
    with pytest.raises(ValueError, match="more than 255 distinct tokens"):
        signal_block(tp, ti, lin, sp, si, 0, 4, 0, 0)


def test_block_kernel_keeping_nothing_still_counts_every_pair():
    """Floors of 255 keep only perfect matches, and rows 5-69 have none (rows 0-3 hold them)."""
    topics, lin, tokens = random_case(n=90, seed=4)
    tp, ti = to_csr(topics)
    sp, si = to_csr(_dense_ids(tokens))
    indptr, cols, tq, sq, hist = signal_block(tp, ti, lin, sp, si, 5, 70, 255, 255, n_bins=8)
    assert len(cols) == len(tq) == len(sq) == 0 and indptr.tolist() == [0] * 66
    assert hist.shape == (65, 8, 8)
    assert hist.sum(axis=(1, 2)).tolist() == [89 - i for i in range(5, 70)]


def test_upper_plus_lower_segments_equal_full_recomputation():
    """Appending problems: only the new rows against all rows are computed; the union equals a full run."""
    topics, lin, tokens = random_case(n=180, seed=5)
    ids = [f"p{i}" for i in range(180)]

    def inputs(n):
        tp, ti = to_csr(topics[:n])
        sp, si = to_csr(_dense_ids(tokens)[:n])
        return SignalInputs(
            ids[:n],
            tp,
            ti,
            lin,
            np.arange(lin.shape[0]),
            sp,
            si,
            [str(k) for k in range(10_000)],
            "ic",
        )

    old, new = inputs(130), inputs(180)
    base = [compute_segment(old, UPPER, a, b, 100, 80, 8) for a, b in [(0, 64), (64, 130)]]
    grown = compute_segment(new, LOWER, 130, 180, 100, 80, 8)
    full = [compute_segment(new, UPPER, a, b, 100, 80, 8) for a, b in [(0, 90), (90, 180)]]

    def pairs(shards):
        out = {}
        for s in shards:
            i, j = s.pairs()
            out.update(
                zip(
                    zip(i.tolist(), j.tolist(), strict=True),
                    zip(s.topic.tolist(), s.summary.tolist(), strict=True),
                    strict=True,
                )
            )
        return out

    assert pairs(base + [grown]) == pairs(full)
    assert sum(int(s.hist.sum()) for s in base + [grown]) == 180 * 179 // 2
    assert (
        base[0].corpus_version
        == old.prefix_version(130)
        == new.prefix_version(130)
        != new.prefix_version(180)
    )


def test_shard_round_trip_and_refusals(tmp_path):
    topics, lin, tokens = random_case(n=90, seed=1)
    tp, ti = to_csr(topics)
    sp, si = to_csr(_dense_ids(tokens))
    inputs = SignalInputs(
        [f"p{i}" for i in range(90)], tp, ti, lin, np.arange(30), sp, si, ["t"] * 1000, "ic"
    )
    shard = compute_segment(inputs, UPPER, 10, 50, 100, 60, 8)
    path = tmp_path / "s.sig"
    size = write_shard(path, shard)
    back = read_shard(path, expect_corpus_version=inputs.prefix_version(90))
    assert size == path.stat().st_size and back.n_pairs == shard.n_pairs
    for f in ("indptr", "cols", "topic", "summary", "hist"):
        assert np.array_equal(getattr(back, f), getattr(shard, f))
    i, j, t, s = load_pairs([path], {90: inputs.prefix_version(90)})
    assert len(i) == shard.n_pairs and np.all(i < j)
    assert memory_available() > 2**28
    with pytest.raises(ShardError, match="expected 'other'"):
        read_shard(path, expect_corpus_version="other")
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    (tmp_path / "corrupt.sig").write_bytes(bytes(data))
    with pytest.raises(ShardError, match="checksum mismatch"):
        read_shard(tmp_path / "corrupt.sig")
    (tmp_path / "trunc.sig").write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ShardError, match="truncated"):
        read_shard(tmp_path / "trunc.sig")
    (tmp_path / "tiny.sig").write_bytes(b"SABER")
    with pytest.raises(ShardError, match="truncated shard"):
        read_shard(tmp_path / "tiny.sig")
    (tmp_path / "foreign.sig").write_bytes(b"PK\x03\x04" + bytes(200))
    with pytest.raises(ShardError, match="not a saber signal shard"):
        read_shard(tmp_path / "foreign.sig")


def _tiny_shard(indptr, version="v1", kind=UPPER, bins=4):
    from saber_assets.signals.shards import Shard

    pairs = int(indptr[-1]) if len(indptr) else 0
    rows = len(indptr) - 1
    return Shard(
        kind,
        10,
        2,
        2 + rows,
        3,
        4,
        255,
        version,
        np.asarray(indptr, np.int64),
        np.arange(5, 5 + max(pairs, 0), dtype=np.int32) % 10,
        np.full(max(pairs, 0), 7, np.uint8),
        np.full(max(pairs, 0), 9, np.uint8),
        np.ones((rows, bins, bins), np.uint32),
    )


def test_shard_header_and_payload_refusals_both_ways(tmp_path):
    """Every refusal is tested with a fault on each side of the good value (a `!=` weakened to
    `<` or `>` must fail), and the format's stated sizes are the file's real sizes."""
    from saber_assets.signals.shards import BYTES_PER_PAIR, HEADER, read_header

    good = _tiny_shard([0, 2, 2, 5])  # an empty row in the middle is fine
    size = write_shard(tmp_path / "new" / "deeper" / "g.sig", good)  # parents are created
    back = read_shard(tmp_path / "new" / "deeper" / "g.sig", expect_corpus_version="v1")
    assert back.indptr.tolist() == [0, 2, 2, 5] and back.n_pairs == 5
    rows, bins = 3, 4
    assert size == HEADER.size + 8 * (rows + 1) + BYTES_PER_PAIR * 5 + 4 * rows * bins * bins
    no_hist = read_shard(tmp_path / "new" / "deeper" / "g.sig", with_hist=False)
    assert no_hist.hist.shape == (0, bins, bins) and no_hist.n_pairs == 5
    # a lower shard's pairs come out as (smaller, larger) too
    write_shard(tmp_path / "l.sig", _tiny_shard([0, 1], kind=LOWER))
    assert [x.tolist() for x in read_shard(tmp_path / "l.sig").pairs()] == [[5], [2]]
    # corpus versions: short and exactly 16 characters are fine, 17 are not
    for version in ("a", "x" * 16):
        write_shard(tmp_path / "v.sig", _tiny_shard([0, 1], version))
        assert read_header(tmp_path / "v.sig")["corpus_version"] == version
    with pytest.raises(ValueError, match="at most 16"):
        write_shard(tmp_path / "v.sig", _tiny_shard([0, 1], "x" * 17))
    write_shard(tmp_path / "m.sig", _tiny_shard([0, 1], "m"))
    for other in ("a", "z"):  # expected versions sorting before and after the file's
        with pytest.raises(ShardError, match="expected"):
            read_shard(tmp_path / "m.sig", expect_corpus_version=other)
    raw = (tmp_path / "m.sig").read_bytes()
    for magic in (b"AAAAAAAA", b"ZZZZZZZZ"):
        (tmp_path / "x.sig").write_bytes(magic + raw[8:])
        with pytest.raises(ShardError, match="not a saber signal shard"):
            read_shard(tmp_path / "x.sig")
    for version in (0, 2):
        (tmp_path / "x.sig").write_bytes(raw[:8] + version.to_bytes(2, "little") + raw[10:])
        with pytest.raises(ShardError, match=f"format version {version}"):
            read_shard(tmp_path / "x.sig")
    (tmp_path / "x.sig").write_bytes(raw + b"\0")
    with pytest.raises(ShardError, match="padded"):
        read_shard(tmp_path / "x.sig")
    data = bytearray(raw)
    data[HEADER.size + 3] ^= 0x5A  # a corrupted payload byte
    # and stored checksums below and above any digest
    for forged in (
        bytes(data),
        raw[: HEADER.size - 16] + b"\0" * 16 + raw[HEADER.size :],
        raw[: HEADER.size - 16] + b"\xff" * 16 + raw[HEADER.size :],
    ):
        (tmp_path / "x.sig").write_bytes(forged)
        with pytest.raises(ShardError, match="checksum mismatch"):
            read_shard(tmp_path / "x.sig")
    # a writer's inconsistent row index, on each side of the right values
    for indptr, n_pairs in (
        ([1, 2, 3], 3),
        ([-1, 2, 3], 3),
        ([0, 2, 2, 4], 5),
        ([0, 2, 2, 6], 5),
        ([0, 3, 2], 2),
    ):
        bad = _tiny_shard([0, n_pairs])
        bad.indptr = np.array(indptr, np.int64)
        bad.hist = np.ones((len(indptr) - 1, 4, 4), np.uint32)
        bad.row_end = bad.row_start + len(indptr) - 1
        write_shard(tmp_path / "i.sig", bad)
        with pytest.raises(ShardError, match="inconsistent row index"):
            read_shard(tmp_path / "i.sig")


def _planted(rows_spec):
    """Stored pairs for query rows 0..len-1 (partners are extra rows): per row, (count, q_t, q_s)
    groups."""
    i, j, tq, sq = [], [], [], []
    nxt = len(rows_spec)
    for r, groups in enumerate(rows_spec):
        for count, t, s_ in groups:
            for _ in range(count):
                i.append(r), j.append(nxt), tq.append(t), sq.append(s_)
                nxt += 1
    arrays = (np.array(i), np.array(j), np.array(tq, np.uint8), np.array(sq, np.uint8))
    return nxt, arrays


def _two_domains():
    """Two query rows per domain: A's strictest point is (219, 54), B's (230, 60)."""
    a_rows = [[(2, 220, 10), (2, 220, 55), (2, 100, 55)]] * 2  # topic-only, both, summary-only
    b_rows = [[(2, 231, 10), (2, 231, 61), (2, 100, 61)]] * 2
    n, pairs = _planted(a_rows + b_rows)
    return n, pairs, [["A"]] * 2 + [["B"]] * 2 + [[] for _ in range(n - 4)]


def test_exact_thresholds_known_answer_reach_the_papers_values():
    """Built so that domain A's strictest point is (219, 54) quanta = (0.8588, 0.2118) — the
    paper's 0.858 / 0.211 at the default floors — and B's is stricter in topic, looser in summary."""
    n, pairs, doms = _two_domains()
    ft, fs = int(quantize(0.5)), int(quantize(0.2))  # the default storage floors
    choice = derive_thresholds(
        in_memory_blocks(n, pairs),
        doms,
        ["A", "B"],
        q_min=2,
        k=2,
        floor_topic_q=ft,
        floor_summary_q=fs,
    )
    assert choice.per_domain == {"A": (219, 54, 2), "B": (230, 60, 2)}
    assert (choice.topic_q, choice.summary_q) == (219, 54)
    assert round(choice.topic, 3) == 0.859 and round(choice.summary, 3) == 0.212
    assert choice.viable_at_final == {"A": 2, "B": 2}
    assert viable_per_domain([pairs], doms, ["A", "B"], 2, 219, 54) == {
        "A": 2,
        "B": 2,
    }
    # one more notch of either threshold loses A's queries
    assert viable_per_domain([pairs], doms, ["A"], 2, 220, 54) == {"A": 0}
    assert viable_per_domain([pairs], doms, ["A"], 2, 219, 55) == {"A": 0}
    with pytest.raises(ValueError, match="no domain has 3 queries"):
        derive_thresholds(
            in_memory_blocks(n, pairs),
            doms,
            ["A", "B"],
            q_min=3,
            k=2,
            floor_topic_q=ft,
            floor_summary_q=fs,
        )


def test_exact_viability_counts_equal_direct_counting():
    rng = np.random.default_rng(5)
    n, m = 60, 5000
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    tq = rng.integers(0, 256, m).astype(np.uint8)
    sq = np.minimum(255, rng.gamma(2.0, 30.0, m)).astype(np.uint8)
    ft, fs = 60, 20
    keep = (tq >= ft) | (sq >= fs)  # only pairs above a floor are stored
    i, j, tq, sq = i[keep], j[keep], tq[keep], sq[keep]
    doms = [["X"] if r % 3 else ["X", "Y"] for r in range(n)]
    indptr, t_sorted, s_sorted = row_pairs(n, i, j, tq, sq)
    k = 4
    counts = viable_counts(
        indptr,
        t_sorted,
        s_sorted,
        [[0] if r % 3 else [0, 1] for r in range(n)],
        2,
        k,
        ft - 1,
        fs - 1,
    )
    points = [(ft - 1, fs - 1), (254, 254), (ft - 1, 254), (254, fs - 1)]
    points += [
        (int(a), int(b))
        for a, b in zip(rng.integers(ft - 1, 255, 100), rng.integers(fs - 1, 255, 100), strict=True)
    ]
    for t, s_ in points:
        direct = viable_per_domain([(i, j, tq, sq)], doms, ["X", "Y"], k, t, s_)
        assert (counts[0, t, s_], counts[1, t, s_]) == (direct["X"], direct["Y"]), (t, s_)
    assert counts[0].max() > 0  # the data has viable queries somewhere


def _all_viability(n, i, j, tq, sq, k):
    """viable[r, τ_t, τ_s] for every threshold pair, by counting: per τ_t, histograms of q_s
    over each row's hi set (q_t > τ_t) and lo set, cumulated over τ_s."""
    rows = np.concatenate([i, j])
    t = np.concatenate([tq, tq]).astype(np.int64)
    s_ = np.concatenate([sq, sq]).astype(np.int64)
    out = np.zeros((n, QMAX, QMAX), dtype=bool)
    for tt in range(QMAX):
        hi = np.zeros((n, QMAX + 1), np.int64)
        lo = np.zeros((n, QMAX + 1), np.int64)
        np.add.at(hi, (rows[t > tt], s_[t > tt]), 1)
        np.add.at(lo, (rows[t <= tt], s_[t <= tt]), 1)
        hi_le = np.cumsum(hi, axis=1)[:, :QMAX]  # #hi with q_s <= τ_s: topic-only
        both = hi.sum(axis=1, keepdims=True) - hi_le
        summary_only = lo.sum(axis=1, keepdims=True) - np.cumsum(lo, axis=1)[:, :QMAX]
        out[:, tt, :] = (hi_le >= k) & (both >= k) & (summary_only >= k)
    return out


@pytest.mark.parametrize("data", ["ends", "sparse"])
def test_viable_counts_equal_counting_at_every_threshold(data):
    """Every (τ_t, τ_s) from 0 to 254, k = 1 and k = 3, on two kinds of rows: ~150 pairs with
    values piled at 0, 1, 254 and 255 (the ends of the counting sorts and of the difference
    array), and ~8 pairs of spread, rarely tied values (order statistics that move one pair at a
    time, groups of exactly k). Row 0 belongs to no domain and is skipped: later rows still count."""
    rng = np.random.default_rng(23)
    n, m = (24, 1800) if data == "ends" else (40, 160)
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    if data == "ends":
        ends = np.array([0, 1, 254, 255])
        pick = rng.random((2, m)) < 0.5
        tq = np.where(pick[0], rng.choice(ends, m), rng.integers(0, 256, m)).astype(np.uint8)
        sq = np.where(pick[1], rng.choice(ends, m), rng.integers(0, 256, m)).astype(np.uint8)
    else:
        tq, sq = rng.integers(0, 256, (2, m)).astype(np.uint8)
    indptr, t_sorted, s_sorted = row_pairs(n, i, j, tq, sq)
    doms = [[]] + [[0] if r % 2 else [0, 1] for r in range(1, n)]
    for k in (1, 3):
        want = _all_viability(n, i, j, tq, sq, k)
        want[0] = False
        counts = viable_counts(indptr, t_sorted, s_sorted, doms, 2, k, 0, 0)
        assert counts.shape == (2, QMAX, QMAX)
        assert np.array_equal(counts[0], want.sum(axis=0))
        assert np.array_equal(counts[1], want[0::2].sum(axis=0))
        assert counts[0].max() > 0
        if data == "ends":
            assert counts[0, 254].max() > 0 and counts[0, :, 254].max() > 0  # edges reached
    # above the floors only: entries below (τ_t < t_min or τ_s < s_min) are 0, the rest exact
    want = _all_viability(n, i, j, tq, sq, 1).sum(axis=0)
    counts = viable_counts(indptr, t_sorted, s_sorted, [[0]] * n, 1, 1, 100, 40)[0]
    assert not counts[:100].any() and not counts[:, :40].any()
    assert np.array_equal(counts[100:, 40:], want[100:, 40:])


def test_summary_only_bound_is_the_kth_largest_of_the_topic_weak_pairs():
    """k = 1, one row: at τ_t = 100 topic-only needs τ_s >= 5, both τ_s < 200, summary-only
    τ_s < 150 (the larger of the topic-weak pairs' 150 and 120): viable for τ_s in [5, 149]."""
    n, (i, j, tq, sq) = _planted([[(1, 200, 5), (1, 200, 200), (1, 50, 150), (1, 40, 120)]])
    indptr, t_sorted, s_sorted = row_pairs(n, i, j, tq, sq)
    counts = viable_counts(indptr, t_sorted, s_sorted, [[0]] + [[]] * (n - 1), 1, 1, 0, 0)[0]
    want = _all_viability(n, i, j, tq, sq, 1)[0]
    assert np.array_equal(counts, want)
    assert counts[100, 149] == 1 and counts[100, 150] == 0 and counts[100, 4] == 0


def test_strictest_takes_the_largest_sum_then_the_larger_topic_threshold():
    viable = np.zeros((QMAX, QMAX), np.int64)
    viable[10, 50] = viable[50, 10] = viable[30, 30] = 5  # three points with sum 60
    viable[40, 19] = 9  # sum 59
    viable[200, 200] = 4  # strictest of all, but below q_min
    assert strictest(viable, 5) == (50, 10)
    assert strictest(viable, 4) == (200, 200)
    assert strictest(viable, 6) == (40, 19)
    assert strictest(viable, 10) is None
    assert type(strictest(viable, 5)[0]) is int


def test_thresholds_never_go_below_one_quantum_under_the_storage_floors():
    """Counts are exact down to floor − 1: A's point (219, 54) is reachable with floors 220 / 55
    and not with 221 / 56, where A is infeasible and B's (230, 60) is the answer."""
    n, pairs, doms = _two_domains()

    def choose(ft, fs):
        return derive_thresholds(
            in_memory_blocks(n, pairs),
            doms,
            ["A", "B"],
            q_min=2,
            k=2,
            floor_topic_q=ft,
            floor_summary_q=fs,
        ).per_domain

    assert choose(220, 55) == {"A": (219, 54, 2), "B": (230, 60, 2)}
    assert choose(221, 55)["A"] is None and choose(220, 56)["A"] is None
    assert choose(221, 56) == {"A": None, "B": (230, 60, 2)}
    assert choose(231, 61) == {"A": None, "B": (230, 60, 2)}
    with pytest.raises(ValueError, match="no domain has 2 queries"):
        choose(232, 61)

    def at_floors_zero(row):  # two query rows of domain A, each with the planted groups
        n, pairs = _planted([row] * 2)
        blocks = in_memory_blocks(n, pairs)
        rows = [["A"]] * 2 + [[]] * (n - 2)
        return n, pairs, derive_thresholds(blocks, rows, ["A"], 2, 2, 0, 0).per_domain

    # a summary threshold of 0 (q_s = 1 is relevant, q_s = 0 is not) is reachable at floor 0
    assert at_floors_zero([(2, 220, 0), (2, 220, 1), (2, 100, 1)])[2] == {"A": (219, 0, 2)}
    # and a topic threshold of 0: topic-only and both need q_t = 1, summary-only q_t = 0
    n, pairs, per_domain = at_floors_zero([(2, 1, 0), (2, 1, 200), (2, 0, 200)])
    assert per_domain == {"A": (0, 199, 2)}
    sizes = group_counts(n, *pairs, 0, 199)
    assert sizes.shape == (n, 3)  # one entry per row, partner rows included
    assert sizes[:2].tolist() == [[2, 2, 2], [2, 2, 2]]


def test_row_pairs_is_a_stable_sort_by_row_then_topic_descending():
    """The counting sorts equal numpy's stable lexsort of both directions, ties included, for
    int32 and int64 indices (the loader's and a caller's)."""
    rng = np.random.default_rng(11)
    n, m = 300, 20_000
    i = rng.integers(0, n - 1, m)
    j = i + rng.integers(1, n - i)
    tq = rng.integers(120, 136, m).astype(np.uint8)  # few levels: many ties within a row
    sq = rng.integers(0, 256, m).astype(np.uint8)
    rows = np.concatenate([i, j])
    t, s = np.concatenate([tq, tq]), np.concatenate([sq, sq])
    order = np.lexsort((-t.astype(np.int64), rows))
    want_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    for dtype in (np.int32, np.int64):
        indptr, t_sorted, s_sorted = row_pairs(n, i.astype(dtype), j.astype(dtype), tq, sq)
        assert np.array_equal(indptr, want_ptr)
        assert np.array_equal(t_sorted, t[order]) and np.array_equal(s_sorted, s[order])
    empty = row_pairs(4, np.zeros(0, np.int32), np.zeros(0, np.int32), tq[:0], sq[:0])
    assert np.array_equal(empty[0], np.zeros(5)) and len(empty[1]) == 0


def test_row_pairs_sorts_short_rows_and_rows_after_them():
    """Rows of 0, 1, 2 and 3 pairs, each given in ascending q_t: every row with two or more is
    reversed, whatever precedes it."""
    # row 0: none; row 1: one (with row 4); row 2: two; row 3: three; row 4: the partner of 1
    i = np.array([1, 2, 2, 3, 3, 3])
    j = np.array([4, 5, 6, 5, 6, 7])
    tq = np.array([7, 10, 20, 1, 2, 3], np.uint8)
    sq = np.array([70, 100, 200, 11, 22, 33], np.uint8)
    indptr, t_sorted, s_sorted = row_pairs(8, i, j, tq, sq)
    assert indptr.tolist() == [0, 0, 1, 3, 6, 7, 9, 11, 12]
    assert t_sorted.tolist() == [7, 20, 10, 3, 2, 1, 7, 10, 1, 20, 2, 3]
    assert s_sorted.tolist() == [70, 200, 100, 33, 22, 11, 70, 100, 11, 200, 22, 33]


def test_prepare_inputs_errors_and_tokens():
    assert summary_tokens("Use the Pigeonhole principle; find x^2 and a_1 values.") == [
        "use",
        "pigeonhole",
        "principle",
        "x^2",
        "a_1",
        "values",
    ]
    assert summary_tokens(None) == []
    parent, depth = np.array([-1, 0, 0]), np.array([0, 1, 1])
    ic = np.array([0.0, 1.0, np.inf])
    with pytest.raises(SignalInputError, match="problem 'b': topic 7 is not a node"):
        prepare_inputs(["a", "b"], [[1], [7]], ["x", "y"], ic, parent, depth)
    with pytest.raises(SignalInputError, match="problem 'a': topic 2 has no information content"):
        prepare_inputs(["a"], [[2]], ["x"], ic, parent, depth)
    ok = prepare_inputs(["a", "b"], [[1], []], ["Use induction", None], ic, parent, depth)
    assert ok.lin.shape == (1, 1) and ok.vocab == ["use", "induction"]


def test_prepare_inputs_maps_topics_and_builds_lin_over_the_used_ones(tmp_path):
    # root 0 (IC 0) > 1 (IC 1) > {3, 4}; root > 2
    ic = np.array([0.0, 1.0, 2.0, 2.5, 3.0])
    parent, depth = np.array([-1, 0, 0, 1, 1]), np.array([0, 1, 1, 2, 2])
    topics = [[3], [4, 3], [2], [], [0]]
    inputs = prepare_inputs(list("abcde"), topics, ["x"] * 5, ic, parent, depth)
    # used topics, most frequent first, ties by node id
    assert inputs.used_nodes.tolist() == [3, 0, 2, 4]
    for i, want in enumerate(topics):
        got = inputs.t_idx[inputs.t_ptr[i] : inputs.t_ptr[i + 1]]
        assert sorted(inputs.used_nodes[got].tolist()) == sorted(want)
    lin = {
        (a, b): float(inputs.lin[x, y])
        for x, a in enumerate(inputs.used_nodes)
        for y, b in enumerate(inputs.used_nodes)
    }
    assert lin[3, 4] == pytest.approx(2 * 1.0 / (2.5 + 3.0)) == lin[4, 3]  # LCA 1
    assert lin[3, 2] == 0.0 and lin[3, 3] == pytest.approx(1.0)  # LCA the root (IC 0)
    # topic 0 (the root) is a node; -1 and n_nodes are not
    for bad in (-1, 5):
        with pytest.raises(SignalInputError, match=f"topic {bad} is not a node"):
            prepare_inputs(["a"], [[bad]], ["x"], ic, parent, depth)
    with pytest.raises(ValueError):
        prepare_inputs(["a", "b"], [[1]], ["x", "y"], ic, parent, depth)
    none = prepare_inputs([], [], [], ic, parent, depth)
    assert none.used_nodes.tolist() == [] and none.t_ptr.tolist() == [0] and none.n == 0
    # saved and loaded: every field, and so the prefix version, survives
    inputs.save(tmp_path / "in.npz")
    back = SignalInputs.load(tmp_path / "in.npz")
    assert back.ids == inputs.ids and back.vocab == inputs.vocab and back.ic_hash == inputs.ic_hash
    for f in ("t_ptr", "t_idx", "lin", "used_nodes", "s_ptr", "s_idx"):
        assert np.array_equal(getattr(back, f), getattr(inputs, f))
    assert back.prefix_version(5) == inputs.prefix_version(5)
    # the whole corpus's version is saved with the inputs (each shard asks for it) and is the
    # one computed afresh; another IC hash is another version
    assert back.versions == {(inputs.ic_hash, inputs.n): inputs.prefix_version(inputs.n)}
    fresh = SignalInputs.load(tmp_path / "in.npz")
    fresh.versions.clear()
    assert fresh.prefix_version(inputs.n) == back.prefix_version(inputs.n)
    fresh.ic_hash = "another"
    assert fresh.prefix_version(inputs.n) != back.prefix_version(inputs.n)
    # IC recomputed with float noise keeps the hash (9 digits); a real change does not
    assert ic_hash(ic + 3e-10) == ic_hash(ic) != ic_hash(ic + 3e-9)


def test_two_shards_through_dagster_and_growth(tmp_path, monkeypatch):
    """Partitioned materialisation of two shards, then an append that reuses them untouched."""
    import polars as pl
    from dagster import asset, materialize

    from saber_assets.io_managers import WarehouseParquetIOManager
    from saber_assets.lib.partitions import shard_partitions
    from saber_assets.ontology.tree import TopicTree
    from saber_assets.pipeline import PipelineResource
    from saber_assets.signals import assets as sa
    from saber_resources.warehouse import Warehouse

    monkeypatch.setenv("SABER_HOME", str(tmp_path))
    rng = np.random.default_rng(0)
    # a 7-node tree: root -> {1 -> {3, 4}, 2 -> {5, 6}}
    parent = np.array([-1, 0, 0, 1, 1, 2, 2], dtype=np.int32)
    tree = TopicTree(
        parent,
        np.array([0, 1, 1, 2, 2, 2, 2], np.int16),
        np.arange(7, dtype=np.int32),
        list("RABCDEF"),
        [""] * 7,
        list("RABCDEF"),
        [None] * 7,
    )
    words = "induction parity pigeonhole invariant symmetry coloring bijection telescoping".split()

    def annotations(n):
        return pl.DataFrame(
            {
                "id": [f"p{i}" for i in range(n)],
                "topics": [
                    sorted(set(rng.integers(3, 7, rng.integers(1, 3)).tolist())) for _ in range(n)
                ],
                "summary": ["Use " + " ".join(rng.choice(words, 3)) for _ in range(n)],
                "domains": [["Algebra"]] * n,
            },
            schema_overrides={"topics": pl.List(pl.Int32)},
        )

    ann = annotations(200)
    ic_frame = pl.DataFrame(
        {"node": np.arange(7, dtype=np.int32), "ic": [0.0, 0.7, 0.7, 1.4, 1.4, 1.4, 1.4]}
    )

    def run(frame, signals=""):
        @asset(name="problem_annotations", io_manager_key="parquet_io")
        def pa() -> pl.DataFrame:
            return frame

        @asset(name="topic_information_content", io_manager_key="parquet_io")
        def ic() -> pl.DataFrame:
            return ic_frame

        @asset(name="ontology_tree", io_manager_key="parquet_io")
        def ot() -> pl.DataFrame:
            return tree.to_frame()

        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            "name: g\ncorpus: {sources: [{name: math, bundled: math}]}\nsignals: {shards: 2, rows_per_shard: 64, floor_topic: 0.3, floor_summary: 0.2, hist_bins: 8"
            + signals
            + "}\ncandidates: {queries_per_domain: 5, candidates_per_group: 3}\n"
        )
        wh = Warehouse(path=str(tmp_path / "w.duckdb"))
        res = {
            "pipeline": PipelineResource(config_file=str(cfg)),
            "warehouse": wh,
            "parquet_io": WarehouseParquetIOManager(base_dir=str(tmp_path / "pq"), warehouse=wh),
        }
        parts = shard_partitions(2)
        shards = sa.pair_signal_shards.build({"signal shard": parts})
        inputs, bounds, index, thresholds = (
            d.build()
            for d in (
                sa.pair_signal_inputs,
                sa.pair_signal_bounds,
                sa.pair_signal_index,
                sa.relevance_thresholds,
            )
        )
        everything = [pa, ic, ot, inputs, bounds, shards, index, thresholds]
        assert materialize(
            everything, selection=[pa, ic, ot, inputs, bounds], resources=res
        ).success
        metas = []
        for key in parts.get_partition_keys():
            r = materialize(everything, selection=[shards], partition_key=key, resources=res)
            assert r.success
            metas.append(r.asset_materializations_for_node("pair_signal_shards")[0].metadata)
        r = materialize(everything, selection=[index, thresholds], resources=res)
        assert r.success
        return metas, r.asset_materializations_for_node("pair_signal_index")[0].metadata

    metas, index = run(ann)
    assert [m["segments_computed"].value for m in metas] == [1, 1]
    assert index["pairs"].value == 200 * 199 // 2
    d = tmp_path / "g" / "signals"
    first = {p.name: p.stat().st_mtime_ns for p in d.glob("*.sig")}
    grown = pl.concat(
        [ann, annotations(30).with_columns(pl.format("q{}", pl.int_range(30)).alias("id"))]
    )
    metas, index = run(grown)
    # shard-000 untouched; shard-001 (the last) computes only the 30 appended rows as a lower segment
    assert [m["segments_computed"].value for m in metas] == [0, 1] and [
        m["segments_reused"].value for m in metas
    ] == [1, 1]
    assert {p: d.joinpath(p).stat().st_mtime_ns for p in first} == first
    assert index["pairs"].value == 230 * 229 // 2
    assert json.loads((d / "manifest.json").read_text())["ic_counts"] == "most_specific"
    appended = {p.name for p in d.glob("*.sig")} - set(first)
    assert appended == {"shard-001.lower-000000200-000000230.sig"}
    # the stored pairs equal a full recomputation on the grown corpus
    inputs = SignalInputs.load(d / "inputs.npz")
    paths = sorted(d.glob("*.sig"))
    i, j, tq, sq = load_pairs(paths, {n: inputs.prefix_version(n) for n in (200, 230)})
    # every segment holds the pairs from the grown corpus's floors up (a reused one from its
    # own, lower or equal, floors)
    ft, fs = read_floors(d)
    assert all(read_header(p)["floor_topic"] <= ft for p in paths)
    assert all(read_header(p)["floor_summary"] <= fs for p in paths)
    keep = (tq >= ft) | (sq >= fs)
    i, j, tq, sq = i[keep], j[keep], tq[keep], sq[keep]
    full = compute_segment(inputs, UPPER, 0, 230, ft, fs, 8)
    fi, fj = full.pairs()
    assert sorted(zip(i.tolist(), j.tolist(), tq.tolist(), sq.tolist(), strict=True)) == sorted(
        zip(fi.tolist(), fj.tolist(), full.topic.tolist(), full.summary.tolist(), strict=True)
    )
    # the percentile method through the asset: the exact 95th percentile of all 230·229/2 pairs
    (tmp_path / "c.yaml").write_text(
        "name: g\ncorpus: {sources: [{name: math, bundled: math}]}\nsignals: {shards: 2, "
        "rows_per_shard: 64, floor_topic: 0.3, floor_summary: 0.2, hist_bins: 8}\ncandidates: "
        "{queries_per_domain: 5, candidates_per_group: 3, threshold_method: percentile, "
        "percentile: 95}\n"
    )
    wh = Warehouse(path=str(tmp_path / "w.duckdb"))
    res = {
        "pipeline": PipelineResource(config_file=str(tmp_path / "c.yaml")),
        "warehouse": wh,
        "parquet_io": WarehouseParquetIOManager(base_dir=str(tmp_path / "pq"), warehouse=wh),
    }

    @asset(name="problem_annotations", io_manager_key="parquet_io")
    def pa() -> pl.DataFrame:
        return grown

    assert materialize([pa, sa.relevance_thresholds.build()], resources=res).success
    got = pl.read_parquet(tmp_path / "pq" / "relevance_thresholds.parquet").row(0, named=True)
    iu = np.triu_indices(230, 1)
    rows, cols = iu[0].astype(np.int64), iu[1].astype(np.int64)
    topic, summary = pair_values(
        inputs.t_ptr, inputs.t_idx, inputs.lin, inputs.s_ptr, inputs.s_idx, rows, cols
    )
    assert got["topic_tau"] == np.quantile(topic, 0.95, method="inverted_cdf")
    assert got["summary_tau"] == np.quantile(summary, 0.95, method="inverted_cdf")
    assert got["source"] == "percentile 95 (global)"
    # the viability derivation searches from this config's floors (floors.json), never below
    # them where reused segments were stored from lower floors: with floors no 5 queries reach,
    # it refuses, as a fresh build storing from those floors would
    from saber_assets.signals.bounds import StorageFloors
    from saber_assets.signals.stored import write_floors

    cfg = (tmp_path / "c.yaml").read_text()
    (tmp_path / "c.yaml").write_text(
        cfg.replace(", threshold_method: percentile, percentile: 95", "")
    )
    write_floors(d, StorageFloors(250, 250, "viability"))
    with pytest.raises(Exception, match="no domain has 5 queries"):
        materialize([pa, sa.relevance_thresholds.build()], resources=res)
    # another IC counting is no append: the frozen IC goes, every shard is computed again
    metas, index = run(grown, ", ic_counts: all_accepted")
    assert [m["segments_computed"].value for m in metas] == [1, 1]
    assert [m["segments_reused"].value for m in metas] == [0, 0]
    assert json.loads((d / "manifest.json").read_text())["ic_counts"] == "all_accepted"
    # the summaries layout: computed at 200 problems, then grown to 230 (the new rows and the
    # old rows a new problem reaches), equal to summaries computed afresh at 230
    from saber_assets.signals.summaries import viability_summaries

    metas, index = run(ann, ", layout: summaries")
    assert [m["summaries"].value for m in metas] == ["computed", "computed"]
    metas, index = run(grown, ", layout: summaries")
    assert [m["summaries"].value for m in metas] == ["grown from 200 problems"] * 2
    assert index["layout"].value == "summaries"  # (7 topics: every old row is reached here)
    inputs = SignalInputs.load(d / "inputs.npz")
    with np.load(d / "shard-001.summary.npz") as z:
        kept = z["summary"]
    assert np.array_equal(kept, viability_summaries(inputs.arrays, 64, 230, 3, read_floors(d)))


def test_threads_split_gives_identical_results():
    from saber_assets.signals.kernels import split_rows

    topics, lin, tokens = random_case(n=400, seed=11)
    tp, ti = to_csr(topics)
    sp, si = to_csr(_dense_ids(tokens))
    one = signal_block(tp, ti, lin, sp, si, 10, 390, 100, 60, 8)
    two = signal_block(tp, ti, lin, sp, si, 10, 390, 100, 60, 8, threads=3)
    assert all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))
    ranges = split_rows(10, 390, 400, 3)
    assert len(ranges) == 3 and ranges[0][0] == 10 and ranges[-1][1] == 390
    assert all((b - 10) % 64 == 0 for _, b in ranges[:-1])  # tile-aligned cuts


def test_prefix_version_sees_an_early_problems_topics_and_summary(tmp_path):
    """A shard computed before an early problem's annotation changed must be refused."""
    ic = np.array([0.0, 1.0, 2.0, 2.5, 3.0])
    parent, depth = np.array([-1, 0, 0, 1, 1]), np.array([0, 1, 1, 2, 2])
    ids = [f"p{i}" for i in range(6)]
    topics = [[3], [4], [2], [3, 4], [1], [2]]
    summaries = ["use induction", "apply vieta", None, "count pairs", "use induction", None]
    base = prepare_inputs(ids, topics, summaries, ic, parent, depth)
    other_topic = prepare_inputs(ids, [[4], *topics[1:]], summaries, ic, parent, depth)
    other_summary = prepare_inputs(ids, topics, ["use symmetry", *summaries[1:]], ic, parent, depth)
    later = prepare_inputs(ids, [*topics[:5], [1]], summaries, ic, parent, depth)
    for changed in (other_topic, other_summary):
        assert changed.prefix_version(1) != base.prefix_version(1)
        assert changed.prefix_version(6) != base.prefix_version(6)
    # a change after the prefix leaves the prefix's version alone
    assert later.prefix_version(5) == base.prefix_version(5) != later.prefix_version(6)
    shard = compute_segment(base, UPPER, 0, 6, 100, 60, 8)
    write_shard(tmp_path / "a.sig", shard)
    with pytest.raises(ShardError, match="expected"):
        load_pairs([tmp_path / "a.sig"], {6: other_topic.prefix_version(6)})
    assert len(load_pairs([tmp_path / "a.sig"], {6: base.prefix_version(6)})[0]) == shard.n_pairs
    # another format version is refused, whatever the corpus
    data = bytearray((tmp_path / "a.sig").read_bytes())
    data[8:10] = (99).to_bytes(2, "little")
    (tmp_path / "v99.sig").write_bytes(bytes(data))
    with pytest.raises(ShardError, match="version"):
        read_shard(tmp_path / "v99.sig")


def test_group_counts_count_both_directions_by_group():
    """Per row: topic-only, summary-only, both, each pair counted for both of its rows; a pair
    relevant in neither signal counts nowhere (thresholds are strict: q > τ)."""
    i = np.array([0, 0, 1, 2, 0], dtype=np.int32)
    j = np.array([1, 2, 2, 3, 3], dtype=np.int32)
    tq = np.array([201, 200, 50, 201, 200], dtype=np.uint8)
    sq = np.array([81, 90, 90, 80, 80], dtype=np.uint8)
    # τ = (200, 80): (0,1) both; (0,2), (1,2) summary-only; (2,3) topic-only; (0,3) neither
    want = np.array([[0, 1, 1], [0, 1, 1], [1, 2, 0], [1, 0, 0]])
    assert np.array_equal(group_counts(4, i, j, tq, sq, 200, 80), want)
    rng = np.random.default_rng(2)
    n, m = 50, 3000
    i = rng.integers(0, n - 1, m)
    j = i + rng.integers(1, n - i)
    tq, sq = rng.integers(0, 256, (2, m)).astype(np.uint8)
    got = group_counts(n, i, j, tq, sq, 128, 100)
    direct = np.zeros((n, 3), dtype=np.int64)
    for a, b, t, s_ in zip(i, j, tq, sq, strict=True):
        g = {(True, False): 0, (False, True): 1, (True, True): 2}.get((t > 128, s_ > 100))
        if g is not None:
            direct[a, g] += 1
            direct[b, g] += 1
    assert np.array_equal(got, direct)


def test_the_pools_leave_out_problems_without_a_topic_or_a_core_idea():
    """`candidates.require_annotations`: the signals' rows (and with them both pools) hold only
    problems with a topic and a core idea, in corpus order; off, every annotated problem."""
    import polars as pl

    from saber_assets.signals.prepare import signal_pool

    ann = pl.DataFrame(
        {
            "id": ["a", "no-idea", "blank-idea", "no-topic", "b"],
            "topics": [[3], [4], [5], [], [6, 7]],
            "summary": ["Use induction.", None, "  ", "Count pairs.", "Bound the sum."],
            "domains": [["Algebra"]] * 5,
        }
    )
    assert signal_pool(ann)["id"].to_list() == ["a", "b"]
    assert signal_pool(ann, require_annotations=False)["id"].to_list() == ann["id"].to_list()
