"""Tournament engine (pure): rounds for many queries, one judge batch per round, resumable.

Each query's pairing in round r depends only on its standings after round r−1 and on a generator
seeded by (seed, query, r); presentation order comes from the same generator. So a resumed run
recomputes exactly the same pairs, finds their stored judgments and replays them into the
standings: no judgment is ever requested twice (the reference implementation forgot to replay).
Judgments are persisted after every judge sub-batch, failures included (winner None, raw text).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from saber_resources.tasks import PairJudge

from ..ratings.bradley_terry import DEFAULT_ALPHA, fit_many
from .adaptive import pair_round_adaptive
from .swiss import pair_round


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


@dataclass
class Standing:
    n: int
    wins: np.ndarray = field(init=False)
    played: set = field(default_factory=set)
    comparisons: list = field(default_factory=list)  # (winner idx, loser idx)
    failures: int = 0
    first_wins: int = 0
    decided: int = 0

    def __post_init__(self) -> None:
        self.wins = np.zeros(self.n, dtype=np.int64)


def run_key(judge: PairJudge, seed: int, policy: str, rounds: int, extra: str = "") -> str:
    """Judgments of one configuration; another judge (prompt, token budget), seed or policy starts
    a separate tournament."""
    budget = getattr(judge, "max_tokens", None)
    version = judge.version if budget is None else f"{judge.version}@{budget}"
    text = f"{judge.backend}|{judge.model}|{version}|{seed}|{policy}|{rounds}|{extra}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _rng(seed: int, query_id: str, rnd: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(query_id.encode()), rnd])


def run_tournament(
    queries: Sequence[TournamentQuery],
    judge: PairJudge,
    store: JudgmentStore,
    rounds: int,
    seed: int,
    policy: Literal["swiss", "adaptive"] = "swiss",
    alpha: float = DEFAULT_ALPHA,
    adaptive_budget: int | None = None,
    chunk: int = 256,
    key: str | None = None,
    on_round: Callable[[int, int, int], None] | None = None,
) -> tuple[dict[str, Standing], dict]:
    """Run (or resume) the tournament; returns standings per query and run statistics."""
    key = key or run_key(judge, seed, policy, rounds)
    judge_id = f"{judge.backend}:{judge.model}"
    stored = {(j.query, j.round, j.a, j.b): j for j in store.load(key)}
    standings = {q.query_id: Standing(len(q.candidates)) for q in queries}
    index = {q.query_id: {c: k for k, c in enumerate(q.candidates)} for q in queries}
    stats = {
        "requested": 0,
        "replayed": 0,
        "failures": 0,
        "rounds": rounds,
        "run_key": key,
        "policy": policy,
        "seed": seed,
    }

    def apply(q: TournamentQuery, j: Judgment) -> None:
        st = standings[q.query_id]
        ia, ib = index[q.query_id][j.a], index[q.query_id][j.b]
        st.played.add(frozenset((ia, ib)))
        if j.winner is None:
            st.failures += 1
            return
        w = index[q.query_id][j.winner]
        loser = ib if w == ia else ia
        st.wins[w] += 1
        st.comparisons.append((w, loser))
        st.decided += 1
        st.first_wins += int(j.winner == j.shown_first)

    for rnd in range(1, rounds + 1):
        strengths = None
        if policy == "adaptive":
            fits = fit_many([(st.n, st.comparisons) for st in standings.values()], alpha)
            strengths = dict(zip(standings, fits, strict=True))
        pending: list[tuple[TournamentQuery, str, str, str, str]] = []  # q, a, b, first, second
        for q in queries:
            st = standings[q.query_id]
            rng = _rng(seed, q.query_id, rnd)
            if policy == "swiss":
                pairs = pair_round(st.wins, st.played, rng)
            else:
                pairs = pair_round_adaptive(strengths[q.query_id], st.played, rng, adaptive_budget)
            for x, y in pairs:
                first, second = (x, y) if rng.random() < 0.5 else (y, x)
                cx, cy = q.candidates[x], q.candidates[y]
                a, b = min(cx, cy), max(cx, cy)
                done = stored.get((q.query_id, rnd, a, b))
                if done is not None:
                    apply(q, done)
                    stats["replayed"] += 1
                else:
                    pending.append((q, a, b, q.candidates[first], q.candidates[second]))
        for start in range(0, len(pending), chunk):
            part = pending[start : start + chunk]
            text_of = [{c: t for c, t in zip(q.candidates, q.texts, strict=True)} for q, *_ in part]
            outcomes = judge.compare_batch(
                [(q.text, tx[f], tx[s]) for (q, _, _, f, s), tx in zip(part, text_of, strict=True)]
            )
            new = []
            for (q, a, b, first, second), out in zip(part, outcomes, strict=True):
                winner = (first if out.value == 1 else second) if out.ok else None
                raw_hash = (
                    hashlib.blake2b(out.raw.encode(), digest_size=8).hexdigest()
                    if out.raw is not None
                    else None
                )
                new.append(
                    Judgment(
                        q.query_id,
                        rnd,
                        a,
                        b,
                        first,
                        winner,
                        judge_id,
                        judge.version,
                        raw_hash,
                        out.error,
                        None if out.ok else out.raw,
                        getattr(judge, "max_tokens", None),
                        out.p_first if out.ok else None,
                    )
                )
            store.add(key, new)  # persisted before the standings move on
            for (q, *_), j in zip(part, new, strict=True):
                apply(q, j)
                stats["failures"] += j.winner is None
            stats["requested"] += len(part)
        if on_round:
            on_round(rnd, len(pending), stats["replayed"])
    return standings, stats
