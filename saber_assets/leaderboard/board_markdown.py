"""The leaderboard in words: its markdown table (``leaderboard.md``, the asset's metadata), the
significance legend, the domains' coverage note and the CPU judge's caveat. Pure: no Dagster,
no files."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from saber_assets.leaderboard.board import (
    CI_HIGH,
    CI_HIGH_CLEAN,
    CI_HIGH_JOINT,
    CI_LOW,
    CI_LOW_CLEAN,
    CI_LOW_JOINT,
    domain_mean,
    domain_queries,
    score_column,
)
from saber_assets.leaderboard.contamination_columns import checked_rows
from saber_assets.leaderboard.joint import share_texts
from saber_assets.lib.metadata import markdown_table

CPU_JUDGE_CAVEAT = (
    "**Caveat: CPU judge.** These ratings come from the CPU stand-in judge, not an LLM: it "
    "prefers the candidate with the higher s = 0.45·e + 0.25·k + 0.20·t + 0.10·u, where e is the "
    "MiniLM (all-MiniLM-L6-v2) cosine of problem + solution, k the overlap of named techniques "
    "in the solutions, t the topic signal (BMA of Lin) and u the summary signal (formula "
    "cpu-evidence-judge/v2). No retriever registered by default uses MiniLM, but t and u also "
    "chose the candidates, and a stand-in is not a mathematician: compare retrievers for real "
    "only on a benchmark judged by an LLM.\n\n"
)


def superscript_board(board: pl.DataFrame) -> str:
    """ranx's convention: per setting, each system gets a letter, and its nDCG@10 carries the
    letters of the systems it is significantly better than (paired randomization test, Holm)."""
    lines = ["Significance (paired randomization test, Holm-corrected over the pairs of a "
             "setting): a superscript names the systems a row is significantly better than; "
             "\"undecided with\" names those whose test still lies within three Monte-Carlo "
             "standard errors of its Holm threshold at the most flips a pair is given: another "
             "seed could turn that decision either way."]  # fmt: skip
    m = score_column(board)
    for (setting,), part in board.group_by("setting", maintain_order=True):
        letter = {
            r: chr(ord("a") + k) if k < 26 else f"s{k}" for k, r in enumerate(part["retriever"])
        }
        lines += [
            "",
            f"**{setting}**",
            "",
            f"| | retriever | nDCG@{m.split('@')[1]} | rank (95%) |",
            "|---|---|---|---|",
        ]
        for r in part.iter_rows(named=True):
            sup = "".join(
                sorted(letter[x] for x in (r.get("beats") or "").split(", ") if x in letter)
            )
            cell = f"{r[m]:.4f}" + (f"<sup>{sup}</sup>" if sup else "")
            open_ = sorted(letter[x] for x in (r.get("undecided") or "").split(", ") if x in letter)
            cell += f" (undecided with {', '.join(open_)})" if open_ else ""
            lines.append(
                f"| {letter[r['retriever']]} | {r['retriever']} | {cell} | {r.get('rank_ci') or ''} |"
            )
    return "\n".join(lines)


def domain_cells(board: pl.DataFrame, domains: list[str], coverage: list[dict]) -> list[pl.Expr]:
    """The markdown board's domain columns, each headed with the queries its cells average
    (``board_columns.domain_queries``) and marked where the domain fell below its quota."""
    short = {c["domain"] for c in coverage if c["queries"] < c["quota"]}
    out = []
    for d in domains:
        if domain_mean(d) not in board.columns:
            continue
        n = board[domain_queries(d)].max() if domain_queries(d) in board.columns else None
        head = f"{d} (n={n}{', below quota' if d in short else ''})" if n is not None else d
        out.append(pl.col(domain_mean(d)).round(4).alias(head))
    return out


def coverage_note(coverage: list[dict]) -> str:
    """The leaderboard's opening words on the domains: every one at its quota, or those that
    are not, with why (the counts of ``candidates.coverage``)."""
    short = [c for c in coverage if c["queries"] < c["quota"]]
    if not coverage:
        return ""
    if not short:
        quota = coverage[0]["quota"]
        return (
            f"Every domain holds its quota of {quota} queries; n = the queries a cell averages.\n\n"
        )
    lines = ["**Domains below quota** (n = the queries a cell averages; a query in several "
             "domains counts in each):", ""]  # fmt: skip
    for c in short:
        lines.append(f"- {c['domain']}: {c['queries']} of {c['quota']} queries, {c['status']}")
    return "\n".join(lines) + "\n\n"


def contamination_view(board: pl.DataFrame, metric: str) -> list[pl.Expr]:
    """The contamination columns of the markdown board, when any row has checked training
    data (they would be empty otherwise)."""
    if checked_rows(board).is_empty():
        return []
    return [
        pl.col("contaminated_share").round(3),
        pl.col(f"{metric}_clean").round(4),
        pl.col(CI_LOW_CLEAN).round(4),
        pl.col(CI_HIGH_CLEAN).round(4),
    ]


def joint_view(board: pl.DataFrame, part: str) -> list:
    """The joint columns beside their query-only ones (``part``: ``ci`` or ``rank``), when the
    benchmark carried judgments."""
    if CI_LOW_JOINT not in board.columns:
        return []
    if part == "ci":
        corrected = ["ndcg_corrected"] if "ndcg_corrected" in board.columns else []
        return [*[pl.col(c).round(4) for c in corrected], pl.col(CI_LOW_JOINT).round(4),
                pl.col(CI_HIGH_JOINT).round(4),
                pl.lit(share_texts(board)).alias("judge_noise_share")]  # fmt: skip
    return ["rank_ci_joint"]


def joint_paragraph(separable: pl.DataFrame | None, no_joint: str | None) -> str:
    """What the joint intervals are, and how many pairs each test separates per setting."""
    if no_joint:
        return f"**Judge noise:** not carried into these intervals: {no_joint}.\n\n"
    if separable is None or separable.height == 0:
        return ""
    lines = [
        "**Judge noise.** `ci_low`/`ci_high` and `rank_ci` resample the queries, treating the "
        "grades as known; `ci_low_joint`/`ci_high_joint` and `rank_ci_joint` also redraw every "
        "query's grades from its Bradley–Terry fit (basic bootstrap, leaderboard/joint.py); "
        "`judge_noise_share` is the share of the joint interval's variance the judge adds. A noisy "
        "judge pulls every score down (a misgraded top candidate costs the good systems most); "
        "the joint interval corrects for that pull: it is centred on `ndcg_corrected` "
        "(2·score − the draws' mean), so it can sit above the score itself. "
        "Pairs of systems the paired test separates (Holm, alpha as configured):",
        "",
    ]
    for r in separable.iter_rows(named=True):
        joint = r.get("separable_joint")
        low, high = r.get("separable_joint_low"), r.get("separable_joint_high")
        span = (
            f" ({low}–{high} within the draws' own error: another draw set could move it so)"
            if low is not None and high is not None and (low, high) != (joint, joint)
            else ""
        )
        lines.append(
            f"- {r['setting']}: {r['separable_query_only']} of {r['pairs']} over the queries"
            + (f", {joint} over the queries and the judgments{span}" if joint is not None else "")
        )
    return "\n".join(lines) + "\n\n"


def board_markdown(board: pl.DataFrame, domains: list[str], metric: str, manifest: dict) -> str:
    """The board as one markdown table: overall and per domain (each headed with the queries it
    averages), failures, latency, the rank interval, what each row beats, contamination."""
    return markdown_table(
        board.select(
            "retriever",
            "setting",
            "row_id",
            pl.col(metric).round(4),
            pl.col(CI_LOW).round(4),
            pl.col(CI_HIGH).round(4),
            *joint_view(board, "ci"),
            *domain_cells(board, domains, manifest.get("coverage", [])),
            "failed",
            # queries a retriever leaves out by its own rule (the reference's Approach Zero)
            *(["skipped"] if "skipped" in board.columns and board["skipped"].sum() else []),
            pl.col("median_latency_ms").round(2),
            "rank_ci",
            *joint_view(board, "rank"),
            *[c for c in ("tie_group", "tie_group_joint") if c in board.columns],
            "beats",
            *undecided_view(board),
            *(["same_scores_as"] if same_named(board).height else []),
            *contamination_view(board, metric),
        ),
        max_rows=500,
        max_chars=40,
    ).value


def undecided_view(board: pl.DataFrame) -> list[str]:
    """The ``undecided`` column where a row has one (a decision at its Holm threshold)."""
    if "undecided" not in board.columns or board["undecided"].is_null().all():
        return []
    return ["undecided"]


def same_named(board: pl.DataFrame) -> pl.DataFrame:
    """The rows that score every query as another row of their setting does."""
    if "same_scores_as" not in board.columns:
        return board.clear()
    return board.filter(pl.col("same_scores_as").is_not_null())


def same_scores_note(board: pl.DataFrame, markdown: bool = True) -> str:
    """Which systems are one system under two names, per setting (``board.same_scores``):
    their scores, intervals and tests are the same numbers twice, not two results."""
    rows = same_named(board)
    if rows.height == 0:
        return ""
    groups = {}
    for setting, name, same in rows.select("setting", "retriever", "same_scores_as").iter_rows():
        groups.setdefault(setting, set()).add(tuple(sorted([name, *same.split(", ")])))
    parts = [
        f"in {setting}, {' and '.join(g)} score every query alike"
        for setting in sorted(groups)
        for g in sorted(groups[setting])
    ]
    head = "**One system, two names:**" if markdown else "One system, two names:"
    return (
        f"{head} " + "; ".join(parts) + ". Their scores, intervals and tests are the same "
        "numbers twice (a re-ranker whose depth covers every candidate is its re-ranking "
        "model)." + ("\n\n" if markdown else "")
    )


@dataclass(frozen=True)
class BoardText:
    """The board's words, each once: the judge, its caveat (empty for an LLM judge), the
    domains' note, the table and the significance legend."""

    judge: str
    caveat: str
    note: str
    table: str
    legend: str
    judge_noise: str = ""
    same: str = ""  # systems that are one system under two names

    @property
    def document(self) -> str:
        """``leaderboard.md``."""
        return (
            f"Judge backend: {self.judge}\n\n{self.caveat}{self.note}{self.same}"
            f"{self.judge_noise}"
            f"{self.table}\n\n"
            f"{self.legend}\n"
        )


def board_text(
    board: pl.DataFrame, domains: list[str], metric: str, manifest: dict,
    separable: pl.DataFrame | None = None, no_joint: str | None = None,
) -> BoardText:  # fmt: skip
    judge = manifest.get("judge_backend", "unknown")
    return BoardText(
        judge=judge,
        caveat=CPU_JUDGE_CAVEAT if judge == "cpu" else "",
        note=coverage_note(manifest.get("coverage", [])),
        table=board_markdown(board, domains, metric, manifest),
        legend=superscript_board(board),
        judge_noise=joint_paragraph(separable, no_joint),
        same=same_scores_note(board),
    )
