"""Helpers that turn tables into Dagster metadata a person would rather look at than read."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
from dagster import MetadataValue

from saber_assets.lib.figures import png_base64


def markdown_table(df: pl.DataFrame, max_rows: int = 20, max_chars: int = 80) -> MetadataValue:
    """A markdown table; long cells are cut so the UI stays readable."""
    df = df.head(max_rows)
    cols = df.columns

    def cell(v) -> str:
        s = "" if v is None else str(v)
        s = s.replace("\n", " ").replace("|", "\\|")
        return s if len(s) <= max_chars else s[: max_chars - 1] + "…"

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.iter_rows()]
    return MetadataValue.md("\n".join(lines))


def figure_markdown(fig, alt: str) -> MetadataValue:
    """A matplotlib figure as an inline PNG in markdown metadata (closes the figure)."""
    return MetadataValue.md(f"![{alt}](data:image/png;base64,{png_base64(fig)})")


def stage_metadata(
    rows: int | None = None, *, seconds: float | None = None, by: object = None
) -> dict[str, object]:
    """The metadata every stage asset writes, under the same keys everywhere: its row count under
    Dagster's own key (the UI plots it across materialisations), the seconds its work took, and
    for work a model did, the backend, model and prompt version of the task (``by``) that did it.
    What is particular to a stage follows it in the asset's own metadata."""
    out: dict[str, object] = {}
    if rows is not None:
        out["dagster/row_count"] = int(rows)
    if seconds is not None:
        out["seconds"] = round(seconds, 2)
    if by is not None:
        out |= {"backend": by.backend, "model": by.model, "prompt_version": by.version}
    return out


def task_label(task: object) -> str:
    """A model task as its metadata names it: ``backend:model (prompt version)``."""
    return f"{task.backend}:{task.model} ({task.version})"


def llm_metadata(tasks: dict[str, object]) -> dict[str, object]:
    """What each LLM task (name -> its task object) cost: calls, answers served from the cache,
    retries by cause, unparsed answers (retried) and failures (never parsed), the server's tokens
    in and out, seconds waiting and the most requests in flight; one row per task, under
    ``llm_calls``. CPU stand-ins report their call counts only."""
    rows = []
    faults: Counter = Counter()  # the transport's retries by cause, over every task
    lost = 0.0
    for name, task in tasks.items():
        stats = getattr(task, "stats", None)
        if stats is None:
            continue
        retries = dict(getattr(stats, "retries", {}) or {})
        faults.update(stats.faults() if hasattr(stats, "faults") else {})
        lost += getattr(stats, "lost_s", 0.0)
        rows.append(
            {
                "task": name,
                "calls": stats.calls,
                "cached": stats.cached,
                "retries": sum(retries.values()),
                "retries_by_cause": ", ".join(f"{k} {v}" for k, v in sorted(retries.items()))
                or "-",
                "unparsed": stats.parse_failures,
                "read_from_reasoning": getattr(stats, "salvaged", 0),
                "refused": getattr(stats, "refused", 0),
                "failed": stats.failed,
                "tokens_in": getattr(stats, "prompt_tokens", 0),
                "tokens_out": getattr(stats, "completion_tokens", 0),
                "seconds": round(getattr(stats, "seconds", 0.0), 2),
                "max_in_flight": getattr(stats, "max_in_flight", 0),
            }
        )
    if not rows:
        return {}
    return {
        "llm_calls": markdown_table(pl.DataFrame(rows), max_chars=120),
        # what `saber build` prints per run, and what a faulted build's runs are compared by
        "llm_faults": json.dumps(
            {"by_cause": dict(sorted(faults.items())), "lost_s": round(lost, 2)}
        ),
    }
