"""Tournament engine (pure): rounds for many queries, one judge batch per round, resumable.

Each query's pairing in round r depends only on its standings after round r−1 and on a generator
seeded by (seed, query, r); presentation order comes from the same generator. So a resumed run
recomputes exactly the same pairs, finds their stored judgments and replays them into the
standings: no judgment is ever requested twice (the reference implementation forgot to replay).
Judgments are persisted after every judge sub-batch, failures included (winner None, raw text).
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import polars as pl

from saber_assets.ratings.bradley_terry import DEFAULT_PRIOR, Prior, fit_many
from saber_assets.ratings.rate import both_orders_outcome
from saber_assets.tournament.adaptive import pair_round_adaptive
from saber_assets.tournament.efficient import pair_round_efficient
from saber_assets.tournament.swiss import pair_round, pair_round_random
from saber_resources.llm_tasks import PairJudge
from saber_resources.progress import progress


@dataclass(frozen=True)
class Judgment:
    query: str
    round: int
    a: str  # the pair, canonical order (a < b)
    b: str
    shown_first: str
    winner: str | None  # None: the judge's answer never parsed
    judge: str
    prompt_version: str
    raw_hash: str | None
    error: str | None = None
    raw: str | None = None  # kept for failures only
    max_tokens: int | None = None  # the judge's token budget (LLM judges)
    p_first: float | None = None  # P(shown first is better) where the judge exposes it


class JudgmentStore(Protocol):
    def load(self, run_key: str) -> list[Judgment]: ...

    def add(self, run_key: str, judgments: list[Judgment]) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self.rows: dict[str, list[Judgment]] = {}

    def load(self, run_key: str) -> list[Judgment]:
        return list(self.rows.get(run_key, []))

    def add(self, run_key: str, judgments: list[Judgment]) -> None:
        self.rows.setdefault(run_key, []).extend(judgments)


@dataclass
class TournamentQuery:
    query_id: str
    text: str
    candidates: list[str]  # candidate ids
    texts: list[str]  # candidate texts, same order
    # what ``presentation: by_id`` orders a pair by (``document_numbers``), same order; without
    # them, a hash of each id
    numbers: list[int] | None = None


def id_number(doc_id: str) -> int:
    """A number for an id that carries nothing of it: no source comes first more often."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "big")


def document_numbers(corpus: pl.DataFrame) -> tuple[dict[str, int], str]:
    """The number ``presentation: by_id`` shows the smaller of first, per corpus problem, and
    the rule used. A corpus of one source whose native ids are all integers (the published
    documents, numbered by row) keeps them: the reference's order, by document index. Any other
    corpus numbers a problem by a hash of its id, since its ids begin with their source and the
    smaller would put one source first every time."""
    natives = corpus["native_id"]
    one_source = corpus["source"].n_unique() == 1
    if one_source and corpus.height and natives.str.contains(r"^\d{1,18}$").all():
        return dict(zip(corpus["id"], natives.cast(pl.Int64), strict=True)), "native_number"
    return {i: id_number(i) for i in corpus["id"]}, "id_hash"


@dataclass
class Standing:
    n: int
    wins: np.ndarray = field(init=False)  # a tie is half a win each
    played: set = field(default_factory=set)
    comparisons: list = field(default_factory=list)  # (winner idx, loser idx)
    ties: list = field(default_factory=list)  # (idx, idx): a pair judged both ways, disagreeing
    failures: int = 0
    first_wins: int = 0
    decided: int = 0
    soft: list = field(default_factory=list)  # (first idx, second idx, P(first better))

    def __post_init__(self) -> None:
        self.wins = np.zeros(self.n, dtype=np.float64)

    def record_tie(self, first: int, second: int) -> None:
        """A pair whose two orders disagreed (``tournament.both_orders``)."""
        self.played.add(frozenset((first, second)))
        self.wins[[first, second]] += 0.5
        self.ties.append((first, second))

    def record(self, first: int, second: int, winner: int | None, p_first: float | None) -> None:
        """One judgment of (first, second) shown in that order; winner None: a failure."""
        self.played.add(frozenset((first, second)))
        if winner is None:
            self.failures += 1
            return
        loser = second if winner == first else first
        self.wins[winner] += 1
        self.comparisons.append((winner, loser))
        self.decided += 1
        self.first_wins += int(winner == first)
        if p_first is not None:
            self.soft.append((first, second, p_first))


def round_pairs(
    policy: str,
    st: Standing,
    rng: np.random.Generator,
    strengths: np.ndarray | None = None,
    budget: int | None = None,
) -> list[tuple[int, int]]:
    """The pairs of one query's next round under ``policy`` (the engine and the simulation
    driver both pair through here)."""
    if policy == "swiss":
        return pair_round(st.wins, st.played, rng)
    if policy == "adaptive":
        return pair_round_adaptive(strengths, st.played, rng, budget)
    if policy == "random":
        return pair_round_random(st.n, st.played, rng)
    if policy == "efficient":
        soft = np.array(st.soft, dtype=np.float64).reshape(-1, 3)
        return pair_round_efficient(
            st.n,
            soft[:, 0].astype(np.int64),
            soft[:, 1].astype(np.int64),
            soft[:, 2],
            st.wins,
            st.played,
            rng,
        )
    raise ValueError(f"unknown tournament policy {policy!r} (swiss, adaptive, efficient)")


PRESENTATIONS = ("random", "by_id")


def run_key(judge: PairJudge, seed: int, policy: str, rounds: int, extra: str = "") -> str:
    """Judgments of one configuration; another judge (prompt, token budget), seed or policy starts
    a separate tournament."""
    budget = getattr(judge, "max_tokens", None)
    version = judge.version if budget is None else f"{judge.version}@{budget}"
    text = f"{judge.backend}|{judge.model}|{version}|{seed}|{policy}|{rounds}|{extra}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def swapped_key(key: str) -> str:
    """Where a tournament's judgments in the other order are stored (same table, own key)."""
    return f"{key}|swapped"


def order_checked(seed: int, query_id: str, rnd: int, a: str, b: str, share: float) -> bool:
    """Whether a pair is among the ``share`` judged again in the other order: a seeded hash of
    the pair, so a resumed or extended tournament checks the same pairs."""
    if share <= 0:
        return False
    digest = hashlib.blake2b(f"{seed}|{query_id}|{rnd}|{a}|{b}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


def order_consistency(judgments: pl.DataFrame) -> tuple[int, int, float, float]:
    """(agreeing, both decided, Wilson 95% low, high) over the pairs judged in both orders
    (``winner`` and ``swapped_winner`` both set)."""
    if "swapped_winner" not in judgments.columns:
        return 0, 0, 0.0, 1.0
    both = judgments.filter(pl.col("winner").is_not_null() & pl.col("swapped_winner").is_not_null())
    agree = int((both["winner"] == both["swapped_winner"]).sum())
    lo, hi = wilson_interval(agree, both.height)
    return agree, both.height, lo, hi


def round_rng(seed: int, query_id: str, rnd: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(query_id.encode()), rnd])


def run_tournament(
    queries: Sequence[TournamentQuery],
    judge: PairJudge,
    store: JudgmentStore,
    rounds: int,
    seed: int,
    policy: Literal["swiss", "adaptive", "efficient"] = "swiss",
    prior: Prior = DEFAULT_PRIOR,
    adaptive_budget: int | None = None,
    chunk: int = 256,
    key: str | None = None,
    on_round: Callable[[int, int, int], None] | None = None,
    presentation: str = "random",
    order_check_share: float = 0.0,
    both_orders: bool = False,
) -> tuple[dict[str, Standing], dict]:
    """Run (or resume) the tournament; returns standings per query and run statistics.
    ``presentation``: which candidate of a pair is shown first, ``random`` (from the round's
    generator) or ``by_id`` (the smaller of the candidates' ``numbers``). ``order_check_share`` of each round's
    pairs (chosen by ``order_checked``) are judged again in the other order, stored under
    ``swapped_key(key)``, and only reported; with ``both_orders`` every pair is, and the two
    answers decide together (agreeing: a win; disagreeing: a tie)."""
    if presentation not in PRESENTATIONS:
        raise ValueError(f"presentation must be one of {PRESENTATIONS}, not {presentation!r}")
    key = key or run_key(judge, seed, policy, rounds)
    t = Tournament(queries, judge, store, seed, key, rounds, policy, prior, adaptive_budget,
                   chunk, presentation, order_check_share, both_orders)  # fmt: skip
    with progress(f"tournament ({len(queries)} queries)", rounds, "round") as shown:
        for rnd in range(1, rounds + 1):
            asked = t.play_round(rnd)
            if on_round:
                on_round(rnd, asked, t.stats["replayed"])
            shown.advance()
    return t.standings, t.stats


class Tournament:
    """One tournament's state between rounds: each query's standing, the judgments stored
    under its key (replayed, never asked again) and its statistics."""

    def __init__(
        self, queries: Sequence[TournamentQuery], judge: PairJudge, store: JudgmentStore,
        seed: int, key: str, rounds: int, policy: str, prior: Prior, adaptive_budget: int | None, chunk: int,
        presentation: str, order_check_share: float, both_orders: bool,
    ) -> None:  # fmt: skip
        self.queries, self.judge, self.store, self.seed, self.key = queries, judge, store, seed, key
        self.policy, self.prior, self.adaptive_budget, self.chunk = (
            policy,
            prior,
            adaptive_budget,
            chunk,
        )
        self.presentation, self.share, self.both_orders = (
            presentation,
            order_check_share,
            both_orders,
        )
        self.judge_id = f"{judge.backend}:{judge.model}"
        self.stored = {(j.query, j.round, j.a, j.b): j for j in store.load(key)}
        self.standings = {q.query_id: Standing(len(q.candidates)) for q in queries}
        self.index = {q.query_id: {c: k for k, c in enumerate(q.candidates)} for q in queries}
        self.numbers = {
            q.query_id: q.numbers if q.numbers is not None else [id_number(c) for c in q.candidates]
            for q in queries
        }
        self.stats = {
            "requested": 0, "replayed": 0, "failures": 0, "rounds": rounds, "run_key": key,
            "policy": policy, "seed": seed,
            # (query, round, a, b) of every judgment this tournament stands on: the store may
            # hold others under the same key, from an earlier candidate set of the same queries
            "used": [], "used_swapped": [], "swapped_requested": 0,
        }  # fmt: skip
        self.check_key = swapped_key(key)
        self.stored_swapped = (
            {(j.query, j.round, j.a, j.b): j for j in store.load(self.check_key)}
            if order_check_share > 0 or both_orders
            else {}
        )

    def play_round(self, rnd: int) -> int:
        """One round: its pairs, the judgments not stored yet asked (the other order too where
        checked), every answer applied once all are in. Returns how many were asked."""
        pending, judged = self.pairs(rnd)
        for start in range(0, len(pending), self.chunk):
            part = pending[start : start + self.chunk]
            new = self.ask(part, self.key)
            judged += [(q, j) for (q, *_), j in zip(part, new, strict=True)]
            self.stats["failures"] += sum(j.winner is None for j in new)
            self.stats["requested"] += len(part)
        # the pairs of a round depend only on the standings before it: they move once all are in
        swapped = self.other_orders(rnd, judged)
        for q, j in judged:
            self.apply(q, j, swapped.get((j.query, rnd, j.a, j.b)))
        return len(pending)

    def pairs(self, rnd: int) -> tuple[list[tuple], list[tuple[TournamentQuery, Judgment]]]:
        """(the round's pairs to ask: q, a, b, first, second, round; the stored judgments of the
        rest, replayed)."""
        strengths = None
        if self.policy == "adaptive":
            fits = fit_many([(st.n, st.comparisons) for st in self.standings.values()], self.prior)
            strengths = dict(zip(self.standings, fits, strict=True))
        pending, judged = [], []
        for q in self.queries:
            st = self.standings[q.query_id]
            rng = round_rng(self.seed, q.query_id, rnd)
            pairs = round_pairs(self.policy, st, rng,
                                strengths[q.query_id] if strengths else None, self.adaptive_budget)  # fmt: skip
            for x, y in pairs:
                first, second = (x, y) if rng.random() < 0.5 else (y, x)
                cx, cy = q.candidates[x], q.candidates[y]
                if self.presentation == "by_id":
                    nx, ny = self.numbers[q.query_id][x], self.numbers[q.query_id][y]
                    first, second = (x, y) if nx < ny else (y, x)
                a, b = min(cx, cy), max(cx, cy)
                done = self.stored.get((q.query_id, rnd, a, b))
                if done is not None:
                    judged.append((q, done))
                    self.stats["replayed"] += 1
                else:
                    pending.append((q, a, b, q.candidates[first], q.candidates[second], rnd))
        return pending, judged

    def other_orders(self, rnd: int, judged: list) -> dict[tuple, Judgment]:
        """The other order of every pair (``both_orders``) or of the checked share: stored
        ones replayed, the rest asked."""
        swapped: dict[tuple, Judgment] = {}
        asks = []
        for q, j in judged:
            if not (self.both_orders or order_checked(self.seed, j.query, rnd, j.a, j.b, self.share)):  # fmt: skip
                continue
            k = (j.query, rnd, j.a, j.b)
            if k in self.stored_swapped:
                swapped[k] = self.stored_swapped[k]
            else:
                other = j.b if j.shown_first == j.a else j.a
                asks.append((q, j.a, j.b, other, j.shown_first, rnd))
        for start in range(0, len(asks), self.chunk):
            for j in self.ask(asks[start : start + self.chunk], self.check_key):
                swapped[(j.query, rnd, j.a, j.b)] = j
            self.stats["swapped_requested"] += len(asks[start : start + self.chunk])
        return swapped

    def apply(self, q: TournamentQuery, j: Judgment, other: Judgment | None) -> None:
        """A judgment (with its other order, where asked) into its query's standing."""
        self.stats["used"].append((j.query, j.round, j.a, j.b))
        idx = self.index[q.query_id]
        first = idx[j.shown_first]
        second = idx[j.b] if j.shown_first == j.a else idx[j.a]
        if other is not None:
            self.stats["used_swapped"].append((j.query, j.round, j.a, j.b))
        winner, tie = j.winner, False
        if self.both_orders and other is not None:
            winner, tie = both_orders_outcome(j.winner, other.winner)
        if tie:
            self.standings[q.query_id].record_tie(first, second)
        else:
            self.standings[q.query_id].record(
                first, second, None if winner is None else idx[winner], j.p_first
            )

    def ask(self, part: list, run: str) -> list[Judgment]:
        """Judge ``part`` ((q, a, b, first, second, round) rows) and store the answers under
        ``run`` before anything reads them."""
        text_of = [{c: t for c, t in zip(q.candidates, q.texts, strict=True)} for q, *_ in part]
        outcomes = self.judge.compare_batch(
            [(q.text, tx[f], tx[s]) for (q, _, _, f, s, _), tx in zip(part, text_of, strict=True)]
        )
        new = []
        for (q, a, b, first, second, rnd), out in zip(part, outcomes, strict=True):
            winner = (first if out.value == 1 else second) if out.ok else None
            raw_hash = (
                hashlib.blake2b(out.raw.encode(), digest_size=8).hexdigest()
                if out.raw is not None
                else None
            )
            new.append(
                Judgment(
                    q.query_id, rnd, a, b, first, winner, self.judge_id, self.judge.version,
                    raw_hash, out.error, None if out.ok else out.raw,
                    getattr(self.judge, "max_tokens", None), out.p_first if out.ok else None,
                )
            )  # fmt: skip
        self.store.add(run, new)  # persisted before the standings move on
        return new


@dataclass(frozen=True)
class PositionBias:
    """How often the candidate shown first won, among the decided judgments, with its 95%
    Wilson interval, against the band a judge without position bias stays in."""

    first_wins: int
    decided: int
    low: float
    high: float
    band: tuple[float, float] | None = None  # where a judge without the bias stays

    @property
    def share(self) -> float | None:
        return self.first_wins / self.decided if self.decided else None

    @property
    def biased(self) -> bool:
        """The whole interval outside the band: the judge favours a position, beyond doubt."""
        if self.band is None or not self.decided:
            return False
        return self.low > self.band[1] or self.high < self.band[0]

    def describe(self) -> str:
        if not self.decided:
            return "no decided judgment"
        band = f"; band [{self.band[0]}, {self.band[1]}]" if self.band else ""
        return (
            f"the first-shown candidate won {self.first_wins} of {self.decided} judgments "
            f"({self.share:.1%}, 95% CI [{self.low:.3f}, {self.high:.3f}]{band})"
        )


def position_bias(judgments: pl.DataFrame, band: tuple[float, float] | None = None) -> PositionBias:
    """The first-shown share of a tournament's judgments (``shown_first``, ``winner``; a
    failed judgment, winner null, decides nothing)."""
    decided = judgments.filter(pl.col("winner").is_not_null())
    first = int((decided["winner"] == decided["shown_first"]).sum())
    lo, hi = wilson_interval(first, decided.height)
    return PositionBias(first, decided.height, lo, hi, band)


def first_shown_by_source(judgments: pl.DataFrame) -> pl.DataFrame:
    """For each pair of sources (``source_a`` < ``source_b``), the judgments that pitted a
    candidate of one against a candidate of the other, and the share in which ``source_a``'s was
    shown first: near 0.5 when the order carries no source (``random``, or ``by_id`` on
    ``document_numbers``); 1.0 where one source were always shown first, which would turn a
    judge's lean to the first position into a lean to that source."""
    if not judgments.height:
        return pl.DataFrame(
            schema={
                "source_a": pl.String,
                "source_b": pl.String,
                "pairs": pl.UInt32,
                "a_shown_first": pl.Float64,
            }  # fmt: skip
        )
    j = judgments.select("a", "b", "shown_first").with_columns(
        pl.col(c).str.split_exact(":", 1).struct.field("field_0").alias(f"s_{c}")
        for c in ("a", "b", "shown_first")
    )
    cross = j.filter(pl.col("s_a") != pl.col("s_b")).with_columns(
        pl.min_horizontal("s_a", "s_b").alias("source_a"),
        pl.max_horizontal("s_a", "s_b").alias("source_b"),
    )
    return (
        cross.group_by("source_a", "source_b")
        .agg(
            pl.len().alias("pairs"),
            (pl.col("s_shown_first") == pl.col("source_a")).mean().alias("a_shown_first"),
        )
        .sort("source_a", "source_b")
    )


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))
