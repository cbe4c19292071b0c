"""Candidate selection (DESIGN.md, candidates): viable queries, K per group, domain quotas; seeded.

A pair is topic-relevant if topic > τ_topic and summary-relevant if summary > τ_summary (in
quanta). Groups of a query: topic-only, summary-only, both. A query is viable iff each group has
>= K members; K are sampled from each. Queries are drawn per domain (fixed domain order, each
query used once; the scarcest domain first) up to the quota, with generators seeded by
(seed, domain) and (seed, query).
The whole selection is one deterministic function, so each domain partition can recompute it
and keep its own part: backfilling one domain gives the same queries as a full run.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from saber_assets.signals.pairs import Chunk
from saber_assets.signals.thresholds import Cut, ExactSignals, Relevance, Threshold, group_counts

GROUPS = ("topic_only", "summary_only", "both")

# a fresh pass over every stored pair, a chunk (whole rows of one shard file) at a time; read twice
PairChunks = Callable[[], Iterable[Chunk]]


def group_table(
    i: np.ndarray,
    j: np.ndarray,
    tq: np.ndarray,
    sq: np.ndarray,
    rel: Relevance,
    both_directions: bool = True,
) -> pl.DataFrame:
    """Every relevant (query row, candidate row) with its group and signals: of the unordered
    pairs (i, j) in both directions, or (``both_directions=False``) of query i and candidate j
    only. Pairs relevant in neither signal are dropped before the frame is built: at scale most
    pairs lie between the storage floors and the thresholds."""
    t_rel, s_rel = rel.masks(i, j, tq, sq)
    keep = t_rel | s_rel
    i, j, tq, sq, t_rel, s_rel = i[keep], j[keep], tq[keep], sq[keep], t_rel[keep], s_rel[keep]
    sides = (lambda a, b: np.concatenate([a, b])) if both_directions else (lambda a, b: a)
    df = pl.DataFrame(
        {
            "query_row": sides(i, j).astype(np.int64),
            "candidate_row": sides(j, i).astype(np.int64),
            "topic_q": sides(tq, tq).astype(np.int32),
            "summary_q": sides(sq, sq).astype(np.int32),
            "t_rel": sides(t_rel, t_rel),
            "s_rel": sides(s_rel, s_rel),
        }
    )
    t_rel, s_rel = pl.col("t_rel"), pl.col("s_rel")
    group = (
        pl.when(t_rel & s_rel)
        .then(pl.lit("both"))
        .when(t_rel)
        .then(pl.lit("topic_only"))
        .when(s_rel)
        .then(pl.lit("summary_only"))
    )
    return df.with_columns(group.alias("group")).drop_nulls("group").drop("t_rel", "s_rel")


# a stratum: (its exact domain set, the queries it draws)
Strata = Sequence[tuple[Sequence[str], int]]
# the strata draw from their own generator stream, apart from the per-domain draws
STRATA_STREAM = 1_000_003


def selection_key(
    pair_digests: Sequence[str],
    ids: Sequence[str],
    domains: Sequence[Sequence[str]],
    domain_order: Sequence[str],
    t_thr: Threshold,
    s_thr: Threshold,
    k: int,
    quota: int,
    seed: int,
    strata: Strata = (),
    given: Sequence[int] = (),
) -> str:
    """A digest of everything ``select_candidates`` reads: equal keys, equal selections."""
    h = hashlib.blake2b(digest_size=16)
    parts = [list(pair_digests), list(ids), [sorted(d) for d in domains], list(domain_order)]
    thr = [["exact", t.key()] if isinstance(t, Cut) else t for t in (t_thr, s_thr)]
    extra = [[[sorted(names), n] for names, n in strata]] if strata else []
    extra += [["given", sorted(given)]] if given else []
    h.update(json.dumps([*parts, *thr, k, quota, seed, *extra]).encode())
    return h.hexdigest()


def select_candidates(
    ids: Sequence[str],
    domains: Sequence[Sequence[str]],
    domain_order: Sequence[str],
    pairs: PairChunks,
    t_thr: Threshold,
    s_thr: Threshold,
    k: int,
    quota: int,
    seed: int,
    exact: ExactSignals | None = None,
    strata: Strata = (),
    given: Sequence[int] = (),
) -> pl.DataFrame:
    """Two passes over the stored pairs, neither holding more than one chunk and the chosen
    queries' relevant pairs: group counts per row, then the chosen queries' groups. A threshold
    given as a number (``Cut``) decides the pairs within a quantum of it on their ``exact``
    values."""
    counts = np.zeros((len(ids), 3), dtype=np.int64)
    for chunk in pairs():
        counts += group_counts(len(ids), *chunk, t_thr, s_thr, exact)
    viable = counts.min(axis=1) >= k
    chosen = choose_queries(viable, domains, domain_order, quota, seed, strata, given)
    rel = Relevance(t_thr, s_thr, exact)
    is_chosen = np.zeros(len(ids), dtype=np.bool_)
    is_chosen[[r for _, r in chosen]] = True
    touched = []
    for i, j, tq, sq in pairs() if chosen else ():
        touch = is_chosen[i] | is_chosen[j]
        touched.append(group_table(i[touch], j[touch], tq[touch], sq[touch], rel))
    empty = (np.zeros(0, np.int64),) * 4
    groups = pl.concat(touched) if touched else group_table(*empty, Relevance(0, 0))
    return candidate_lists(ids, chosen, groups, k, seed)


@dataclass(frozen=True)
class SelectionSpec:
    """What a selection is drawn by: ``select_candidates``' arguments but the pairs."""

    ids: Sequence[str]
    domains: Sequence[Sequence[str]]
    domain_order: Sequence[str]
    t_thr: Threshold
    s_thr: Threshold
    k: int
    quota: int
    seed: int
    strata: Strata = ()
    given: Sequence[int] = ()


def select_from_rows(
    spec: SelectionSpec,
    viable: np.ndarray,
    query_pairs: Callable[[list[int]], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    exact: ExactSignals | None = None,
) -> pl.DataFrame:
    """``select_candidates`` from which rows are ``viable`` (``summaries.viable_at``) and the
    chosen queries' own pairs, ``query_pairs(rows)`` -> (query row, candidate row, q_t, q_s)
    (``summaries.query_rows``): the same selection without a pass over every pair."""
    chosen = choose_queries(
        viable, spec.domains, spec.domain_order, spec.quota, spec.seed, spec.strata, spec.given
    )
    q, c, tq, sq = query_pairs(sorted(r for _, r in chosen))
    rel = Relevance(spec.t_thr, spec.s_thr, exact)
    groups = group_table(q, c, tq, sq, rel, both_directions=False)
    return candidate_lists(spec.ids, chosen, groups, spec.k, spec.seed)


def choose_queries(
    viable: np.ndarray,
    domains: Sequence[Sequence[str]],
    domain_order: Sequence[str],
    quota: int,
    seed: int,
    strata: Strata = (),
    given: Sequence[int] = (),
) -> list[tuple[str, int]]:
    """(domain, row) of the queries: per domain, up to ``quota`` of its viable rows not taken by
    a domain drawn before it, drawn with a generator seeded by (seed, domain index). With
    ``strata``, ``choose_by_strata`` instead; with ``given`` rows (a published benchmark's
    queries found in the corpus), those of them that are viable, nothing drawn, each in the
    first of its domains (``home_domain``).

    Domains draw scarcest first (fewest viable rows; ties in ``domain_order``): a query in two
    domains then goes to the one that needs it. In the order of the ontology, a large domain
    drawn first took the multi-domain queries a small one had no others for (the sample's
    Calculus and Analysis: 14 queries of 20 with 21 viable)."""
    if given:
        homes = {r: home_domain(domains[r], domain_order) for r in set(given) if viable[r]}
        return [(home, r) for r, home in sorted(homes.items()) if home]
    viable_rows = np.flatnonzero(viable).tolist()
    if strata:
        return choose_by_strata(viable_rows, domains, domain_order, strata, seed)
    available = {d: sum(d in domains[r] for r in viable_rows) for d in domain_order}
    taken: set[int] = set()
    chosen: list[tuple[str, int]] = []
    for d in sorted(domain_order, key=lambda d: available[d]):  # stable: ties keep the order
        d_idx = list(domain_order).index(d)
        pool = [r for r in viable_rows if r not in taken and d in domains[r]]
        for row in draw(pool, quota, np.random.default_rng([seed, d_idx])):
            chosen.append((d, row))
            taken.add(row)
    return chosen


def draw(pool: list[int], count: int, rng: np.random.Generator) -> list[int]:
    """Up to ``count`` of ``pool``, without replacement, in the pool's order."""
    if not pool:
        return []
    picked = rng.choice(len(pool), size=min(count, len(pool)), replace=False)
    return [pool[p] for p in sorted(picked.tolist())]


def choose_by_strata(
    viable_rows: Sequence[int],
    domains: Sequence[Sequence[str]],
    domain_order: Sequence[str],
    strata: Strata,
    seed: int,
) -> list[tuple[str, int]]:
    """(domain, row) of the queries, per stratum in order: up to its count of the viable rows
    whose domain set is exactly the stratum's, drawn with a generator seeded by (seed, STRATA,
    stratum index). A query's domain is the first of its set in ``domain_order``."""
    chosen: list[tuple[str, int]] = []
    for n, (names, count) in enumerate(strata):
        want = frozenset(names)
        if unknown := sorted(want - set(domain_order)):
            raise ValueError(f"candidates.strata[{n}] names {unknown}, not domains of the "
                             f"ontology ({', '.join(domain_order)})")  # fmt: skip
        pool = [r for r in viable_rows if frozenset(domains[r]) == want]
        home = home_domain(names, domain_order)
        rng = np.random.default_rng([seed, STRATA_STREAM, n])
        chosen += [(home, row) for row in draw(pool, count, rng)]
    return chosen


def given_rows(ids: Sequence[str], matches: pl.DataFrame) -> tuple[int, ...]:
    """The rows of ``ids`` that published queries matched (``published_matches``: role,
    corpus_id), each once, in row order; a match outside the pool (an unannotated problem left
    out of it) is not a row."""
    row_of = {i: r for r, i in enumerate(ids)}
    wanted = matches.filter(pl.col("role") == "query")["corpus_id"].to_list()
    return tuple(sorted({row_of[i] for i in wanted if i in row_of}))


def home_domain(names: Sequence[str], domain_order: Sequence[str]) -> str:
    """The domain partition a stratum's or a given query's queries run in: the first of its
    domains in the ontology's order; "" for none (a given query in no domain is not taken)."""
    return next((d for d in domain_order if d in names), "")


def strata_quotas(strata: Strata, domain_order: Sequence[str]) -> dict[str, int]:
    """The queries each domain's partition is to hold under ``strata``."""
    out = dict.fromkeys(domain_order, 0)
    for names, count in strata:
        out[home_domain(names, domain_order)] += count
    return out


def strata_drawn(
    strata: Strata, query_domains: Sequence[Sequence[str]], domain_order: Sequence[str]
) -> list[dict]:
    """Per stratum: its domain set, the partition it runs in, the count asked and the queries
    drawn (``query_domains``: each chosen query's domains)."""
    sets = [frozenset(d) for d in query_domains]
    return [
        {"domains": " + ".join(names), "home": home_domain(names, domain_order),
         "asked": count, "drawn": sum(s == frozenset(names) for s in sets)}
        for names, count in strata
    ]  # fmt: skip


def short_strata(drawn: list[dict], domain: str) -> list[str]:
    """The warning for each stratum that runs in ``domain``'s partition and drew fewer queries
    than it asked (``strata_drawn``'s rows): the build goes on with what there is, and says so
    (the reference's sampler stops there instead)."""
    return [
        f"stratum {row['domains']}: {row['drawn']} of {row['asked']} queries drawn "
        "(too few viable problems with exactly these domains)"
        for row in drawn
        if row["home"] == domain and row["drawn"] < row["asked"]
    ]


def candidate_lists(
    ids: Sequence[str],
    chosen: list[tuple[str, int]],
    groups: pl.DataFrame,
    k: int,
    seed: int,
) -> pl.DataFrame:
    """K candidates of each group per chosen query, drawn with a generator seeded by (seed,
    query id) from its relevant pairs (``group_table``), with ids, signals and positions."""
    by_query = groups.filter(pl.col("query_row").is_in([r for _, r in chosen])).sort(
        "query_row", "group", "candidate_row"
    )
    parts = {
        key[0]: frame for key, frame in by_query.partition_by("query_row", as_dict=True).items()
    }
    out = []
    for d, row in chosen:
        rng = np.random.default_rng([seed, zlib.crc32(ids[row].encode())])
        frame = parts[row]
        for g in GROUPS:
            members = frame.filter(pl.col("group") == g)
            take = np.sort(rng.choice(members.height, size=k, replace=False))
            out.append(members[take].with_columns(pl.lit(d).alias("domain")))
    if not out:
        return pl.DataFrame(
            schema={
                "domain": pl.String,
                "query_id": pl.String,
                "query_row": pl.Int64,
                "candidate_id": pl.String,
                "candidate_row": pl.Int64,
                "group": pl.String,
                "topic": pl.Float64,
                "summary": pl.Float64,
                "position": pl.Int64,
            }
        )
    df = pl.concat(out)
    id_frame = pl.DataFrame({"row": np.arange(len(ids), dtype=np.int64), "id": list(ids)})
    return (
        df.join(id_frame.rename({"row": "query_row", "id": "query_id"}), on="query_row", how="left")
        .join(
            id_frame.rename({"row": "candidate_row", "id": "candidate_id"}),
            on="candidate_row",
            how="left",
        )
        .with_columns(
            (pl.col("topic_q") / 255).alias("topic"),
            (pl.col("summary_q") / 255).alias("summary"),
            pl.int_range(pl.len()).over("query_row").alias("position"),
        )
        .select(
            "domain",
            "query_id",
            "query_row",
            "candidate_id",
            "candidate_row",
            "group",
            "topic",
            "summary",
            "position",
        )
    )
