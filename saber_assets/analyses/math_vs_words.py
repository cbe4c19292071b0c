"""Math or words: does a retriever find a query's best candidates through its formulas or its
prose? Each query statement is split deterministically into a math-only variant (its LaTeX
spans, kept as `$…$` so math-aware retrievers still parse them) and a words-only variant (the
rest), with the tokenisers' own formula regex. For each retriever and setting, each variant is
scored against the query's 5 highest-rated candidates; math wins a query when its mean score is
higher. Queries where either side is empty are dropped and counted.

With ``segment`` (the paper's LLM formatting step, ``analyses.math_segmentation: llm``, the
default with an LLM backend) every query is split by the model instead, each expression checked
to occur verbatim; a failed split is dropped with its reason. Without it, a statement whose
mathematics is not in LaTeX has no formula span and is dropped."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import polars as pl

from saber_assets.benchmark.data import best_rated
from saber_assets.benchmark.texts import setting_texts
from saber_assets.lib import sections
from saber_assets.lib.figures import pyplot
from saber_assets.retrievers.base import RetrieverFailed
from saber_assets.retrievers.tokenize import plain_tokens, split_math
from saber_assets.runs.evaluate import corpus_score_matrix

TOP = 5
_SPACES = re.compile(r"\s+")


def variants(text: str) -> tuple[str, str]:
    """(math-only, words-only) of a text; either may be empty."""
    prose, formulas = split_math(text)
    words = _SPACES.sub(" ", prose).strip()
    if not plain_tokens(words):
        words = ""
    return " ".join(f"${f}$" for f in formulas), words


Segment = Callable[[Sequence[str]], list[tuple[str, str] | str]]  # (math, words) or an error


def split_ratio(math: str, words: str) -> float | None:
    m, w = len(plain_tokens(math)), len(plain_tokens(words))
    return m / (m + w) if m + w else None


def math_token_ratio(text: str) -> float | None:
    """Share of a text's plain tokens that lie inside formulas."""
    prose, formulas = split_math(text)
    m = sum(len(plain_tokens(f)) for f in formulas)
    total = m + len(plain_tokens(prose))
    return m / total if total else None


def _variant_scores(retriever, texts: list[str], docs: list[str], tops: list[list[int]]):
    """Mean score of each text against its own top documents (indices into ``docs``), and the
    texts that failed. Retrievers with a corpus path score every text against ``docs`` as the
    corpus (the evaluation's bulk path): by document row where they can (their scores of those
    rows in that corpus, without ranking it: Approach Zero's exhaustive search of the pool was
    51 of the analysis's 52 s on the full config), else the whole matrix; others one text at a
    time."""
    if hasattr(retriever, "corpus_scores") or hasattr(retriever, "corpus_scores_batch"):
        if hasattr(retriever, "fit_corpus"):
            retriever.fit_corpus(docs)
        if getattr(retriever, "candidates_by_row", False):
            got = retriever.candidate_scores_batch(texts, tops, docs)
            errors = {n: str(g) for n, g in enumerate(got) if isinstance(g, Exception)}
            means = [float("nan") if n in errors else float(np.mean(g)) for n, g in enumerate(got)]
            return means, errors
        matrix, errors = corpus_score_matrix(retriever, texts, docs)
        return [float(np.mean(matrix[n, top])) for n, top in enumerate(tops)], errors
    means, errors = [], {}
    for n, (text, top) in enumerate(zip(texts, tops, strict=True)):
        try:
            means.append(float(np.mean(retriever.score(text, [docs[k] for k in top]))))
        except RetrieverFailed as exc:
            means.append(float("nan"))
            errors[n] = str(exc)
    return means, errors


def math_vs_words(
    queries: pl.DataFrame,
    documents: pl.DataFrame,
    retrievers: dict,
    settings: tuple[str, ...],
    top: int = TOP,
    segment: Segment | None = None,
    settings_of: Mapping[str, Sequence[str]] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per query, retriever and setting: math score, words score, math_wins or a failure;
    summary per retriever, setting and domain: queries, dropped, failed, math-win %, math-token
    ratio). The documents scored are the union of the queries' top candidates. A retriever
    named in ``settings_of`` is tried only in the settings listed for it (its registry entry's:
    the leaderboard runs it nowhere else)."""
    items = list(
        queries.select(
            "id", "problem", "solution", "candidates", "relevance_scores", "domains"
        ).iter_rows()
    )
    best = [best_rated(c, r, top) for _, _, _, c, r, _ in items]
    pool = sorted({d for b in best for d in b})
    at = {d: k for k, d in enumerate(pool)}
    tops = [[at[d] for d in b] for b in best]
    rows = []
    for setting in settings:
        docs = [
            setting_texts(
                setting, documents["problem"][d], documents["solution"][d], as_query=False
            )
            for d in pool
        ]
        texts = [setting_texts(setting, p, s, as_query=True) for _, p, s, *_ in items]
        split = [variants(t) for t in texts]
        how = ["latex" if m else None for m, _ in split]
        ratios = [math_token_ratio(t) for t in texts]
        seg_errors: dict[int, str] = {}
        if segment is not None:
            for n, got in zip(range(len(texts)), segment(texts), strict=True):
                if isinstance(got, str):
                    seg_errors[n] = f"segmentation failed: {got}"
                    continue
                split[n], how[n], ratios[n] = got, "llm", split_ratio(*got)
        keep = [n for n, (m, w) in enumerate(split) if m and w]
        for name, retriever in retrievers.items():
            if settings_of is not None and setting not in settings_of.get(name, (setting,)):
                continue
            both = [split[n][0] for n in keep] + [split[n][1] for n in keep]
            means, errors = _variant_scores(retriever, both, docs, [tops[n] for n in keep] * 2)
            result = {}
            for j, n in enumerate(keep):
                err = errors.get(j) or errors.get(j + len(keep))
                sm, sw = means[j], means[j + len(keep)]
                result[n] = (None, None, None, err) if err else (sm, sw, sm > sw, None)
            for n, (qid, *_, domains) in enumerate(items):
                sm, sw, wins, err = result.get(n, (None, None, None, seg_errors.get(n)))
                rows.append(
                    {
                        "retriever": name, "setting": setting, "query_id": qid,
                        "domains": domains, "ratio": ratios[n], "split": how[n], "math": sm,
                        "words": sw, "math_wins": wins, "dropped": n not in result,
                        "error": err,
                    }
                )  # fmt: skip
    schema = {
        "retriever": pl.String, "setting": pl.String, "query_id": pl.String,
        "domains": pl.List(pl.String), "ratio": pl.Float64, "split": pl.String,
        "math": pl.Float64,
        "words": pl.Float64, "math_wins": pl.Boolean, "dropped": pl.Boolean, "error": pl.String,
    }  # fmt: skip
    per_query = pl.DataFrame(rows, schema=schema)
    by_domain = per_query.explode("domains").rename({"domains": "domain"})
    # ALL: each query once (a query in two domains counts in both of their rows, once here)
    every = per_query.drop("domains").with_columns(pl.lit(ALL).alias("domain"))
    summary = (
        pl.concat([by_domain, every.select(by_domain.columns)])
        .group_by("retriever", "setting", "domain")
        .agg(
            pl.col("math_wins").is_not_null().sum().alias("queries"),
            pl.col("dropped").sum().alias("dropped"),
            pl.col("error").is_not_null().sum().alias("failed"),
            (100 * pl.col("math_wins").cast(pl.Float64).mean()).round(1).alias("math_wins_pct"),
            pl.col("ratio").mean().round(3).alias("math_token_ratio"),
            (pl.col("split") == "llm").sum().alias("llm_split"),
        )
        .sort("retriever", "setting", pl.col("domain") == ALL, "domain")
    )
    return per_query, summary


ALL = "all queries"  # the summary's row of each retriever and setting over its distinct queries


def choose_retrievers(
    entries: list, wanted: list[str] | None, settings: Sequence[str] | None = None
) -> tuple[list, list[tuple[str, str]]]:
    """The registry entries the analysis tries, and (name, reason) for those it does not: by
    default every runnable entry but the LLM re-rankers that runs in one of the analysis's
    ``settings`` (an entry limited to others, as the sample's e5 is to statements for its cost
    on CPU, is left out, not run where the leaderboard never runs it: 65 of the sample's 83 s);
    a named one that cannot run, runs in none of them, or is not registered, is an error."""
    from saber_assets.retrievers.registry import KINDS, runnable

    unknown = sorted(set(wanted or []) - {e.name for e in entries})
    if unknown:
        raise ValueError(f"analyses.math_vs_words_retrievers: {unknown} are not in the registry")
    run, not_run = runnable(entries)
    elsewhere = [
        (e.name, f"runs only in {', '.join(e.settings)} (its registry entry), not in "
                 f"{', '.join(settings)}")
        for e in run
        if settings is not None and e.settings is not None and not set(e.settings) & set(settings)
    ]  # fmt: skip
    not_run = not_run + elsewhere
    if wanted is None:
        skip = {n for n, _ in elsewhere}
        return [e for e in run if not KINDS[e.kind].judges and e.name not in skip], not_run
    blocked = [f"{n} ({why})" for n, why in not_run if n in wanted]
    if blocked:
        raise ValueError(f"analyses.math_vs_words_retrievers cannot run here: {blocked}")
    return [e for e in entries if e.name in wanted], not_run


# ---- its section of the report


def wins_figure(summary: pl.DataFrame):
    plt = pyplot()

    part = summary.filter(pl.col("setting") == summary["setting"].min())
    names = sorted(part["retriever"].unique().to_list())
    domains = sorted(part["domain"].unique().to_list())
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(domains) + 2), 4))
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        got = dict(
            part.filter(pl.col("retriever") == name).select("domain", "math_wins_pct").iter_rows()
        )
        ax.bar(
            np.arange(len(domains)) + k * width,
            [got.get(d) or 0 for d in domains],
            width,
            label=name,
        )
    ax.set_xticks(np.arange(len(domains)) + 0.4 - width / 2, domains, fontsize=7)
    ax.axhline(50, color="grey", lw=0.8, ls=":")
    ax.set_ylabel("% of queries where math-only wins")
    ax.set_title(part["setting"][0] if part.height else "")
    ax.legend(fontsize=6, ncol=2)
    return fig


def read_math_vs_words(summary: pl.DataFrame) -> str:
    """The headline over queries, each once (the ``ALL`` rows), per retriever and setting: the
    highest and the lowest share of queries whose formulas alone beat their words alone."""
    if not summary.height:
        return "No queries with both formulas and words."
    rows = (
        summary.filter((pl.col("domain") == ALL) & (pl.col("queries") > 0))
        .drop_nulls("math_wins_pct")
        .sort("math_wins_pct", "retriever", "setting", descending=[True, False, False])
    )
    if not rows.height:
        return "Every retriever failed or every query was dropped: nothing to compare."
    top, low = rows.row(0, named=True), rows.row(-1, named=True)

    def who(r: dict) -> str:
        return (
            f"{r['math_wins_pct']:.0f}% ({r['retriever']}, {r['setting']}, {r['queries']} queries)"
        )

    return (
        "Share of queries where the formulas alone are closer to the best-rated candidates "
        f"than the words alone, each query counted once: from {who(top)} down to {who(low)}. "
        "Above 50% a retriever leans on the mathematics, below it on the prose."
    )


math_vs_words_section = sections.table_section(
    "Math vs words", read_math_vs_words, "math-only wins per retriever, setting and domain",
    wins_figure, "math-only wins (%)",
)  # fmt: skip


def llm_segment(segmenter):
    """The segmenter's answers as math_vs_words wants them: (math variant, words) or the error."""

    def segment(texts):
        return [
            (" ".join(f"${e}$" for e in o.value[0]), o.value[1]) if o.ok else o.error
            for o in segmenter.segment_batch(list(texts))
        ]

    return segment
