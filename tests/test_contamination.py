"""Contamination measured on the text: known answers on the bundled problems."""

from __future__ import annotations

import gzip
import json
import re

import polars as pl

from saber_assets.leaderboard.contamination import (
    audit,
    exact_form,
    own_candidate_hits,
)
from saber_assets.settings import REPO_ROOT, ContaminationConfig

CORPORA = REPO_ROOT / "data" / "corpora"


def read(name: str) -> list[dict]:
    with gzip.open(CORPORA / f"{name}.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def rephrase(text: str, k: int) -> str:
    """Light edits a copy picks up: numbers changed, whitespace, LaTeX spacing."""
    text = re.sub(r"\d+", lambda m: str(int(m.group()) + 7 + k), text)
    text = text.replace(" ", "  ", 3).replace("=", r"\,=\,", 2).replace("$", " $ ", 2)
    return text.replace("\\frac", "\\dfrac") + "\n"


def benchmark():
    math = read("math")
    tests = [r for r in math if r["id"].startswith("test/") and len(r["problem"]) > 80][:40]
    trains = [r for r in math if r["id"].startswith("train/") and len(r["problem"]) > 80][:20]
    items = pl.DataFrame(
        [(r["id"], "query", "Algebra" if k % 2 else "Geometry", r["problem"])
         for k, r in enumerate(tests)]
        + [(r["id"], "candidate", "Algebra", r["problem"]) for r in trains],
        schema=["item", "role", "domain", "text"], orient="row",
    )  # fmt: skip
    olympiad = [(f"ob:{r['id']}", r["question"]) for r in read("olympiadbench")[:500]]
    return tests, items, olympiad


def test_a_training_corpus_with_planted_queries_flags_exactly_those():
    tests, items, olympiad = benchmark()
    verbatim = [(f"copy:{r['id']}", r["problem"]) for r in tests[:10]]
    changed = [(f"edit:{r['id']}", rephrase(r["problem"], k)) for k, r in enumerate(tests[10:15])]
    assert all(t != r["problem"] for (_, t), r in zip(changed, tests[10:15], strict=True))
    training = olympiad[:250] + verbatim + olympiad[250:] + changed
    matches, read_rows = audit(items, iter(training))
    assert read_rows == 515
    flagged = set(matches["item"])
    assert flagged == {r["id"] for r in tests[:15]}
    # each matched training row is the planted one, and how it was found is said
    for item, tid in matches.select("item", "training_id").iter_rows():
        assert tid.split(":", 1)[1] == item
    assert set(matches.filter(pl.col("item").is_in([r["id"] for r in tests[:10]]))["how"]) == {
        "exact"
    }
    # without number folding, copies with new numbers are no longer the same statement
    exact_only = audit(items, iter(training), ContaminationConfig(fold_numbers=False))[0]
    assert exact_form(changed[0][1], False) != exact_form(tests[10]["problem"], False)
    assert {r["id"] for r in tests[:10]} <= set(exact_only["item"])
    assert len(set(exact_only["item"]) & {r["id"] for r in tests[10:15]}) < 5  # folding mattered


def test_a_disjoint_corpus_flags_nothing():
    _, items, olympiad = benchmark()
    matches, read_rows = audit(items, iter(olympiad))
    assert read_rows == 500 and matches.height == 0


def test_a_query_planted_among_its_own_candidates_is_reported():
    tests, _, _ = benchmark()
    texts = {r["id"]: r["problem"] for r in tests}
    texts["planted"] = rephrase(tests[3]["problem"], 1)
    cands = pl.DataFrame(
        {"query_id": [tests[3]["id"]] * 5 + [tests[4]["id"]] * 4,
         "candidate_id": [tests[k]["id"] for k in (5, 6, 7, 8)] + ["planted"]
         + [tests[k]["id"] for k in (9, 10, 11, 12)]},
    )  # fmt: skip
    hits = own_candidate_hits(cands, texts)
    assert hits.select("query", "candidate").rows() == [(tests[3]["id"], "planted")]
    assert hits["jaccard"][0] > 0.5


def test_declared_training_data_names_alone_are_not_checked_and_local_text_is_read(tmp_path):
    from saber_assets.leaderboard.contamination import (
        TrainingRead,
        corpus_files,
        declared_training,
        training_rows,
    )
    from saber_assets.leaderboard.retrievers.registry import load_registry

    mine = tmp_path / "mine.jsonl"
    mine.write_text(
        json.dumps({"uid": "a1", "q": "Find $x$ if $x+1=2$."}) + "\n"
        + json.dumps({"uid": "a2", "q": ""}) + "\n"
    )  # fmt: skip
    reg = tmp_path / "retrievers.yaml"
    reg.write_text(f"""retrievers:
  - name: rader-like
    kind: bm25
    meta:
      training_data:
        - NuminaMath-CoT
        - {{name: math-train, bundled: math, id_prefix: "train/"}}
        - {{name: mine, path: "{mine}", fields: {{id: uid, problem: q}}}}
  - name: plain
    kind: bm25
""")
    entries = load_registry(reg)
    decl = declared_training(entries)
    assert decl["plain"] == {}
    assert decl["rader-like"]["NuminaMath-CoT"] is None  # declared, not checked
    math_train = decl["rader-like"]["math-train"]
    got = TrainingRead()
    rows = list(training_rows(math_train, corpus_files(math_train)[0], got))
    assert rows and all(i.startswith("train/") for i, _ in rows)
    math_ids = {r["id"] for r in read("math")}
    assert len(rows) == got.rows == sum(i.startswith("train/") for i in math_ids)
    mine_corpus = decl["rader-like"]["mine"]
    got = TrainingRead()
    assert list(training_rows(mine_corpus, corpus_files(mine_corpus)[0], got)) == [
        ("a1", "Find $x$ if $x+1=2$.")
    ]
    # the row without a problem is counted with its reason, never dropped silently
    assert got.rows == 1 and got.rejected == [("mine.jsonl", 2, "'q' empty or not text")]
