"""The benchmark's three retrieval settings and the texts each shows: queries as statements (or
statement + solution for full→full), documents as statement + solution (or statements for
statement→statement)."""

from __future__ import annotations

from typing import Literal

from saber_assets.benchmark.data import Benchmark

Setting = Literal["statement-statement", "statement-full", "full-full"]
SETTINGS: tuple[Setting, ...] = ("statement-statement", "statement-full", "full-full")


def full_text(problem: str, solution: str) -> str:
    return f"Problem: {problem}\n\nSolution: {solution}"


def _check(setting: str) -> None:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r} (settings: {', '.join(SETTINGS)})")


def document_side(setting: str) -> str:
    """What a setting shows of a document: "statement", or "full" (statement and solution).
    statement→full and full→full show the same documents, so they share one index."""
    _check(setting)
    return "statement" if setting == "statement-statement" else "full"


def setting_texts(setting: str, problem: str, solution: str, as_query: bool) -> str:
    """statement→statement, statement→full (query statement, documents with solutions), full→full."""
    # a document's side is document_side's answer, so texts and shared indexes cannot drift apart
    use_full = setting == "full-full" if as_query else document_side(setting) == "full"
    _check(setting)
    return full_text(problem, solution) if use_full else problem


def document_texts(bench: Benchmark, setting: str) -> list[str]:
    """Every document as the setting shows it to a retriever: one list per document side and
    documents table, kept on the benchmark (a run asks for them in each setting, once to load
    its index and once to score; at 283K full texts each list took ~0.3 s to build, and the same
    string objects keep their hashes for every lookup after the first). Never change it in place."""
    side = document_side(setting)
    kept = bench.texts_memo.get(side)
    if kept is not None and kept[0] is bench.documents:
        return kept[1]
    docs = bench.documents
    texts = [
        setting_texts(setting, p, s, as_query=False)
        for p, s in zip(docs["problem"], docs["solution"], strict=True)
    ]
    bench.texts_memo[side] = (docs, texts)
    return texts
