"""The paper's human study, run again on any benchmark: candidate pairs sampled for people the
way the paper did (stratified by the pair's rank distance Δr in the final ratings), written as a
Label Studio project (labelling config, instructions, tasks with formulas rendered as MathML), and
Label Studio's JSON export read back into label rows checked against the study and the benchmark.

A task shows one query and two of its candidates, in an order drawn per task (seeded, recorded);
a configured share of tasks asks for two annotators (Label Studio's per-task ``overlap``) so that
people can be compared with each other. Labels are ``first`` / ``second`` / ``tie`` of the order
shown; ``human_pairs`` turns them into the (query, a, b, choice) rows of ``human_agreement``."""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.lib.math_html import CSS, render
from saber_assets.study.human_agreement import AnnotationError, rating_ranks, read_annotations
from saber_assets.versions import digest
from saber_resources.stores import StoreDB, ensure_table

STRATA = (0, 25, 50)  # Δr strata [0, 25), [25, 50), ≥ 50 (the agreement's nested buckets)
FROM_NAME, TO_NAME = "closer", "query"
# the label config's choice values -> the stored label
CHOICE_LABELS = {"1": "first", "2": "second", "tie": "tie"}
LABELS = ("first", "second", "tie")

STUDY_SCHEMA = {
    "task_id": pl.String, "study": pl.String, "domain": pl.String, "query": pl.String,
    "a": pl.String, "b": pl.String, "delta_r": pl.Int64, "stratum": pl.Int64,
    "shown_first": pl.String, "shown_second": pl.String, "annotators": pl.Int64,
}  # fmt: skip
LABEL_SCHEMA = {
    "task_id": pl.String, "annotator": pl.String, "annotator_email": pl.String,
    "query": pl.String, "shown_first": pl.String, "shown_second": pl.String,
    "label": pl.String, "labelled_at": pl.Datetime("us"), "lead_time_s": pl.Float64,
    "study": pl.String, "ls_task": pl.Int64, "ls_annotation": pl.Int64,
}  # fmt: skip
REFUSED_SCHEMA = {"task": pl.String, "annotation": pl.Int64, "reason": pl.String}

INSTRUCTIONS = """
<p><b>Which candidate is closer to the query in method?</b></p>
<p>Each task shows a math problem (the <i>query</i>) and two other problems with their solutions.
Pick the candidate whose solution would help most to solve the query: the one that uses the same
key idea, technique or chain of reasoning.</p>
<ul>
<li>Judge the <b>method</b>, not the topic: two problems about triangles can need unrelated
ideas, and a counting problem can be solved by the same trick as a number-theory one.</li>
<li>Ignore wording, length, notation and difficulty, and whether the numbers look alike.</li>
<li>Choose <b>Tie</b> only when the two are equally close (or equally unrelated) after reading
both solutions.</li>
</ul>
<p>Keys: <kbd>1</kbd> first candidate, <kbd>2</kbd> second candidate, <kbd>t</kbd> tie;
then submit.</p>
<p>A formula on a yellow background could not be typeset and is shown as its LaTeX source.</p>
"""


class StudyError(ValueError):
    pass


@dataclass
class StudySample:
    pairs: pl.DataFrame  # STUDY_SCHEMA
    wanted: dict[int, int]  # stratum -> pairs asked for
    notes: list[str] = field(default_factory=list)


def allocate(n_pairs: int, strata: Iterable[int]) -> dict[int, int]:
    """``n_pairs`` split as evenly as possible over the strata (the first ones get the rest)."""
    strata = list(strata)
    base, extra = divmod(n_pairs, len(strata))
    return {s: base + (k < extra) for k, s in enumerate(strata)}


def gaps(n: int, lower: int, upper: int | None) -> range:
    """The rank distances of a stratum [lower, upper) that a query with n candidates has."""
    return range(max(lower, 1), n if upper is None else min(upper, n))


def sample_study(
    ratings: pl.DataFrame,
    n_pairs: int,
    seed: int,
    double_share: float = 0.1,
    study: str = "study",
    strata: tuple[int, ...] = STRATA,
) -> StudySample:
    """``n_pairs`` distinct candidate pairs (two candidates of one query), an equal share per Δr
    stratum; within a stratum a query uniformly, then a pair of its candidates uniformly among
    those at that distance. A stratum the benchmark cannot fill (queries with fewer candidates
    than its lower bound) gives its share to the others, said in ``notes``. The shown order is
    drawn per task; ``round(double_share * n_pairs)`` tasks, drawn evenly over the strata, ask
    for two annotators. Everything comes from one generator seeded by ``seed``."""
    if n_pairs < 1:
        raise StudyError("a study needs at least one pair")
    rng = np.random.default_rng([seed, 1521])  # 1521: the paper's study, so seeds stay apart
    _, ranks = rating_ranks(ratings)
    by_query: dict[str, list[str]] = {}
    for (q, c), _k in sorted(ranks.items(), key=lambda x: (x[0][0], x[1])):
        by_query.setdefault(q, []).append(c)
    domain = dict(ratings.select("query_id", "domain").unique("query_id").iter_rows())
    queries = sorted(by_query)
    bounds = [*strata[1:], None]
    # pairs available per (query, stratum): sum over gaps d in [lo, hi) of (n - d)
    available = {}
    for s, hi in zip(strata, bounds, strict=True):
        for q in queries:
            n = len(by_query[q])
            available[(q, s)] = sum(n - d for d in gaps(n, s, hi))
    can = {s: sum(available[(q, s)] for q in queries) for s in strata}
    wanted, notes = stratum_shares(n_pairs, strata, can, by_query)
    rows = []
    for s, hi in zip(strata, bounds, strict=True):
        pool = [q for q in queries if available[(q, s)] > 0]
        if not wanted[s]:
            continue
        picks = draw_stratum(rng, pool, by_query, s, hi, wanted[s], can[s])
        for q, i, j in picks:
            x, y = by_query[q][i], by_query[q][j]
            a, b = min(x, y), max(x, y)
            rows.append({"query": q, "a": a, "b": b, "delta_r": j - i, "stratum": s,
                         "domain": domain.get(q)})  # fmt: skip
    frame = pl.DataFrame(rows).sort("stratum", "query", "a", "b")
    k = frame.height
    first_is_a = rng.random(k) < 0.5
    doubles = set()
    n_double = round(double_share * k)
    if n_double:
        per = allocate(n_double, [s for s in strata if wanted[s]])
        for s, m in per.items():
            idx = np.flatnonzero(frame["stratum"].to_numpy() == s)
            doubles.update(rng.choice(idx, min(m, len(idx)), replace=False).tolist())
    frame = frame.with_columns(
        task_id=pl.Series(
            [task_id(study, q, a, b) for q, a, b in frame.select("query", "a", "b").iter_rows()]
        ),
        study=pl.lit(study),
        shown_first=pl.when(pl.Series(first_is_a)).then("a").otherwise("b"),
        shown_second=pl.when(pl.Series(first_is_a)).then("b").otherwise("a"),
        annotators=pl.Series([2 if r in doubles else 1 for r in range(k)]),
    )
    return StudySample(frame.select(list(STUDY_SCHEMA)).cast(STUDY_SCHEMA), wanted, notes)


def stratum_shares(n_pairs: int, strata: tuple[int, ...], can: dict[int, int],
                   by_query: dict[str, list[str]]) -> tuple[dict[int, int], list[str]]:  # fmt: skip
    """(pairs wanted per Δr stratum, notes): an equal share each; a stratum with no pair gives
    its share to the others, one short of its share moves the rest to the next with room."""
    notes = []
    wanted = allocate(n_pairs, strata)
    usable = [s for s in strata if can[s] > 0]
    if len(usable) < len(strata):
        empty = [s for s in strata if can[s] == 0]
        longest = max(len(c) for c in by_query.values())
        notes.append(
            f"Δr stratum(s) {empty}: no pairs (the queries have at most {longest} candidates); "
            f"their share went to {usable}"
        )
        wanted = allocate(n_pairs, usable) | dict.fromkeys(empty, 0)
    if sum(can.values()) < n_pairs:
        raise StudyError(f"{n_pairs} pairs asked for, the benchmark has {sum(can.values())}")
    # a stratum short of its share: the rest moves to the next one that has room
    for s in strata:
        short = wanted[s] - can[s]
        if short > 0:
            wanted[s] = can[s]
            for t in strata:
                room = can[t] - wanted[t]
                if room > 0 and short > 0:
                    wanted[t] += min(room, short)
                    short -= min(room, short)
            notes.append(f"Δr stratum {s}: only {can[s]} pairs exist; the rest went elsewhere")
    return wanted, notes


def draw_stratum(rng: np.random.Generator, pool: list[str], by_query: dict[str, list[str]],
                 s: int, hi: int | None, want: int, can: int) -> list[tuple[str, int, int]]:  # fmt: skip
    """``want`` distinct pairs (query, i, j) of the stratum [s, hi): a query uniformly, then a
    gap d with weight (n − d), then the pair (i, i + d); from the full list where dense."""
    exhaustive = want * 4 > can  # dense: draw from the full list instead
    if exhaustive:
        every = [
            (q, i, i + d)
            for q in pool
            for d in gaps(len(by_query[q]), s, hi)
            for i in range(len(by_query[q]) - d)
        ]
        picks = [every[k] for k in sorted(rng.choice(len(every), want, replace=False))]
    else:
        picks, seen = [], set()
        while len(picks) < want:
            q = pool[rng.integers(len(pool))]
            n = len(by_query[q])
            ds = np.array(gaps(n, s, hi))
            d = int(rng.choice(ds, p=(n - ds) / (n - ds).sum()))
            i = int(rng.integers(n - d))
            if (q, i, i + d) not in seen:
                seen.add((q, i, i + d))
                picks.append((q, i, i + d))
    return picks


def task_id(study: str, query: str, a: str, b: str) -> str:
    """A task's id: its study and pair, stable across exports of the same study."""
    digest = hashlib.sha256(f"{study}\x1f{query}\x1f{a}\x1f{b}".encode()).hexdigest()[:16]
    return f"{study}:{digest}"


def label_config(title: str = "Which candidate is closer to the query in method?") -> str:
    """The labelling interface: the query on top, the two candidates side by side (problem and
    solution), one choice of 1 / 2 / tie with keyboard shortcuts."""
    panel = (
        '<View style="flex: 1; padding: 0 1em; border-left: 3px solid {color}">'
        '<Header value="{name}"/><HyperText name="{key}" value="${key}_html" inline="true"/>'
        "</View>"
    )
    return (
        f"<View>\n  <Style>{CSS}</Style>\n"
        f'  <Header value="{html.escape(title, quote=True)}"/>\n'
        '  <View style="padding: .5em 1em; background: #f0f4ff">'
        f'<Header value="Query" size="5"/><HyperText name="{TO_NAME}" value="$query_html" '
        'inline="true"/></View>\n'
        '  <View style="display: flex; margin-top: 1em">\n    '
        + panel.format(color="#2a6", name="Candidate 1", key="first")
        + "\n    "
        + panel.format(color="#c62", name="Candidate 2", key="second")
        + "\n  </View>\n"
        f'  <Choices name="{FROM_NAME}" toName="{TO_NAME}" choice="single-radio" '
        'required="true" showInline="true">\n'
        '    <Choice value="1" alias="1" hotkey="1" html="Candidate 1"/>\n'
        '    <Choice value="2" alias="2" hotkey="2" html="Candidate 2"/>\n'
        '    <Choice value="tie" alias="tie" hotkey="t" html="Tie"/>\n'
        "  </Choices>\n</View>\n"
    )


def problem_html(problem: str, solution: str | None) -> tuple[str, list[tuple[str, str]]]:
    """A problem and its solution as HTML, and the formulas that did not convert."""
    p = render(problem)
    parts = [f"<div><b>Problem.</b> {p.html}</div>"]
    bad = list(p.unconverted)
    if solution:
        s = render(solution)
        parts.append(f"<div style='margin-top:.6em'><b>Solution.</b> {s.html}</div>")
        bad += s.unconverted
    return "".join(parts), bad


def study_tasks(
    pairs: pl.DataFrame, texts: dict[str, tuple[str, str | None]]
) -> tuple[list[dict], list[dict]]:
    """Label Studio tasks for the study's pairs (``texts``: id -> (problem, solution); the query
    shows its problem only), and one row per formula left as source (task, item, LaTeX, reason).
    ``overlap`` is the number of annotators a task asks for."""
    tasks, unconverted = [], []
    for row in pairs.iter_rows(named=True):
        data = {"saber_task": row["task_id"], "saber_study": row["study"],
                "query_id": row["query"], "first_id": row["shown_first"],
                "second_id": row["shown_second"]}  # fmt: skip
        for key, item, with_solution in (
            ("query", row["query"], False),
            ("first", row["shown_first"], True),
            ("second", row["shown_second"], True),
        ):
            if item not in texts:
                raise StudyError(f"task {row['task_id']}: {item} is not in the corpus")
            problem, solution = texts[item]
            data[f"{key}_html"], bad = problem_html(problem, solution if with_solution else None)
            unconverted += [
                {"task": row["task_id"], "item": item, "latex": t, "reason": r} for t, r in bad
            ]
        tasks.append({"data": data, "overlap": int(row["annotators"])})
    return tasks, unconverted


def annotation_label(annotation: dict) -> str:
    """The label of one Label Studio annotation (first / second / tie); StudyError otherwise."""
    result = annotation.get("result") or []
    if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
        raise StudyError(f"the annotation's result {str(result)[:40]!r} is not a list of objects")
    choices = []
    for r in result:
        if r.get("from_name") == FROM_NAME and r.get("type") == "choices":
            value = r.get("value") or {}
            picked = value.get("choices") if isinstance(value, dict) else None
            if not isinstance(picked, list | None):
                raise StudyError(f"choices {str(picked)[:40]!r} are not a list")
            choices += picked or []
    if not all(isinstance(c, str) for c in choices):
        raise StudyError(f"choices {str(choices)[:40]!r} are not texts")
    if len(choices) != 1:
        raise StudyError(f"{len(choices)} choices under {FROM_NAME!r}, need exactly one")
    if choices[0] not in CHOICE_LABELS:
        raise StudyError(f"choice {choices[0]!r} is not one of {sorted(CHOICE_LABELS)}")
    return CHOICE_LABELS[choices[0]]


USER_ID = re.compile(r"[0-9]{1,10}")
MAX_USER_ID = 2**31 - 1  # Label Studio's user ids are positive database integers


def annotator_of(annotation: dict, emails: dict[int, str]) -> tuple[str, str | None]:
    """(stable annotator key ``ls:<user id>``, e-mail where known): the export gives the user's
    id, or the user itself when asked to expand it."""
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        uid, email = who.get("id"), who.get("email")
    else:
        uid, email = who, None
    if uid is None:
        raise StudyError("the annotation names no annotator (completed_by)")
    # ASCII digits only: str.isdigit() also takes "²" (int() then fails) and "٣" (read as 3)
    if isinstance(uid, str) and USER_ID.fullmatch(uid):
        uid = int(uid)
    if isinstance(uid, bool) or not isinstance(uid, int) or not 1 <= uid <= MAX_USER_ID:
        raise StudyError(f"completed_by {str(uid)[:40]!r} is not a Label Studio user id")
    if email is not None and not isinstance(email, str):
        raise StudyError(f"completed_by's email is a {type(email).__name__}, not text")
    return f"ls:{int(uid)}", email or emails.get(int(uid))


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    if not isinstance(value, str):
        raise StudyError(f"a time {str(value)[:40]!r} is not an ISO 8601 text")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).replace(tzinfo=None)
    except ValueError:
        raise StudyError(f"a time {value[:40]!r} is not ISO 8601") from None


def _lead_time(value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise StudyError(f"lead_time {str(value)[:40]!r} is not a number of seconds")
    return float(value)


def labels_from_export(
    export: list[dict],
    study: pl.DataFrame | None,
    benchmark_pairs: set[tuple[str, str]] | None,
    emails: dict[int, str] | None = None,
    stored: dict[str, set[str]] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(labels, refused) from Label Studio's JSON export (a list of tasks with annotations).
    A label is kept when its task is one of the study's, shows the study's pair in the study's
    order, and both candidates are rated for the query in the benchmark (``benchmark_pairs``:
    (query, candidate)); otherwise refused with the reason. Without a study, a task's own data
    (query_id, first_id, second_id) says what it showed; without ``benchmark_pairs`` the pair is
    not checked. Cancelled (skipped) annotations are no labels and are not refused. A task's
    annotators already in the stores (``stored``: task -> annotators, ``stored_annotators``)
    count toward its overlap, so one-annotator files imported one by one cannot exceed it; an
    annotation that cannot be read in any way is refused with the reason, never the export."""
    emails = emails or {}
    if not isinstance(export, list):
        raise StudyError("a Label Studio JSON export is a list of tasks")
    if study is None:
        study = study_from_export(export)
    by_task = {r["task_id"]: r for r in study.iter_rows(named=True)}
    labels, refused = [], []
    # task -> the annotators whose labels are kept (or were, by an earlier import)
    annotators: dict[str, set[str]] = {t: set(a) for t, a in (stored or {}).items()}
    for n, task in enumerate(export):
        if not isinstance(task, dict):
            refused.append({"task": f"#{n}", "annotation": None,
                            "reason": f"export entry {n} is a {type(task).__name__}, not a task"})  # fmt: skip
            continue
        data = task.get("data") if isinstance(task.get("data"), dict) else {}
        tid = data.get("saber_task")
        tid = tid if isinstance(tid, str) else None
        anns = task.get("annotations") or []
        if not isinstance(anns, list):
            anns = [anns]
        for ann in anns:
            if not isinstance(ann, dict):
                refused.append({"task": str(tid or task.get("id")), "annotation": None,
                                "reason": f"an annotation is a {type(ann).__name__}, not an object"})  # fmt: skip
                continue
            if ann.get("was_cancelled"):
                continue

            def refuse(reason: str, tid=tid, ann=ann, task=task) -> None:
                refused.append({"task": str(tid if tid else task.get("id"))[:200],
                                "annotation": plain_id(ann.get("id")), "reason": reason})  # fmt: skip

            row = by_task.get(tid) if tid is not None else None
            problem = task_problem(task, tid, row, data, benchmark_pairs)
            if problem:
                refuse(problem)
                continue
            try:
                label, annotator, email, labelled_at, lead_time = read_annotation(ann, task, emails)
            except StudyError as exc:
                refuse(str(exc))
                continue
            except Exception as exc:  # whatever a hostile annotation holds, it is one refusal
                refuse(f"cannot be read: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            # a task asks for `overlap` annotators: more ids than that under one task is one
            # person under several ids (or a forged export), and would inflate the agreement
            seen = annotators.setdefault(tid, set())
            overlap = row.get("annotators")
            if annotator not in seen and overlap is not None and len(seen) >= int(overlap):
                refuse(f"task {tid} asked for {int(overlap)} annotator(s) and already has "
                       f"{sorted(seen)}: a label by {annotator} is one too many")  # fmt: skip
                continue
            seen.add(annotator)
            labels.append({
                "task_id": tid, "annotator": annotator, "annotator_email": email,
                "query": row["query"], "shown_first": row["shown_first"],
                "shown_second": row["shown_second"], "label": label,
                "labelled_at": labelled_at, "lead_time_s": lead_time, "study": row["study"],
                "ls_task": task.get("id"), "ls_annotation": ann.get("id"),
            })  # fmt: skip
    return (
        pl.DataFrame(labels, schema=LABEL_SCHEMA),
        pl.DataFrame(refused, schema=REFUSED_SCHEMA),
    )


def task_problem(task: dict, tid: str | None, row: dict | None, data: dict,
                 benchmark_pairs: set[tuple[str, str]] | None) -> str | None:  # fmt: skip
    """Why a task's labels cannot be kept (not a study task, not this study's, another pair or
    order than the study's, a candidate the benchmark does not rate), or None."""
    if tid is None:
        return f"Label Studio task {task.get('id')} is no saber study task (no saber_task)"
    if row is None:
        return f"unknown task {tid}: not in this study"
    shown = (data.get("query_id"), data.get("first_id"), data.get("second_id"))
    if shown != (row["query"], row["shown_first"], row["shown_second"]):
        return (f"task {tid} shows {shown}, the study has "
                f"{(row['query'], row['shown_first'], row['shown_second'])}")  # fmt: skip
    missing = [
        c
        for c in (row["a"], row["b"])
        if benchmark_pairs is not None and (row["query"], c) not in benchmark_pairs
    ]
    if missing:
        return (f"the benchmark has no pair ({row['query']}, {missing[0]}): "
                "not a rated candidate of that query")  # fmt: skip
    return None


def read_annotation(ann: dict, task: dict, emails: dict[int, str]):
    """(label, annotator, email, labelled at, lead time) of an annotation, or a ``StudyError``
    saying what cannot be read (the task's and annotation's ids must be integers)."""
    label = annotation_label(ann)
    annotator, email = annotator_of(ann, emails)
    labelled_at = parse_time(ann.get("updated_at") or ann.get("created_at"))
    lead_time = _lead_time(ann.get("lead_time"))
    for what, value in (("task id", task.get("id")), ("annotation id", ann.get("id"))):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise StudyError(f"the {what} {str(value)[:40]!r} is not an integer")
    return label, annotator, email, labelled_at, lead_time


def plain_id(value) -> int | None:
    """A Label Studio id as the refusal table stores it: an int64, else None (the reason says)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
    return value if ok else None


# a saber study asks one or two annotators of a task (``sample_pairs``): an export read without
# its study is held to that, never to the overlap it states itself (1,000 let 3 annotators in)
MAX_ANNOTATORS = 2
PAIRS_FILE = "pairs.parquet"  # a study folder's pairs (``saber study export``)


def study_overlap(value) -> int:
    """The annotators an export's task may have, read from its own ``overlap`` only within what a
    saber study asks (1 to ``MAX_ANNOTATORS``; the most where it states none)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return min(max(value, 1), MAX_ANNOTATORS)
    return MAX_ANNOTATORS


def study_from_export(export: list[dict]) -> pl.DataFrame:
    """The study as the export's tasks describe it (their ``data``), for an export read without
    its study's files; an entry that is no task is left to ``labels_from_export`` to refuse."""
    rows = []
    for task in export:
        d = task.get("data") if isinstance(task, dict) else None
        if not isinstance(d, dict):
            continue
        if all(isinstance(d.get(k), str) and d.get(k)
               for k in ("saber_task", "query_id", "first_id", "second_id")):  # fmt: skip
            a, b = sorted((d["first_id"], d["second_id"]))
            rows.append({"task_id": d["saber_task"], "study": d.get("saber_study"),
                         "domain": None, "query": d["query_id"], "a": a, "b": b,
                         "delta_r": None, "stratum": None, "shown_first": d["first_id"],
                         "shown_second": d["second_id"],
                         "annotators": study_overlap(task.get("overlap"))})  # fmt: skip
    return pl.DataFrame(rows, schema=STUDY_SCHEMA)


def human_pairs(labels: pl.DataFrame) -> pl.DataFrame:
    """Stored labels as ``human_agreement``'s rows: query, a, b (a < b), choice (a / b / tie),
    annotator, shown_first."""
    lo = pl.min_horizontal("shown_first", "shown_second")
    hi = pl.max_horizontal("shown_first", "shown_second")
    chosen = pl.when(pl.col("label") == "first").then("shown_first").otherwise("shown_second")
    return labels.select(
        "query",
        lo.alias("a"),
        hi.alias("b"),
        pl.when(pl.col("label") == "tie")
        .then(pl.lit("tie"))
        .when(chosen == lo)
        .then(pl.lit("a"))
        .otherwise(pl.lit("b"))
        .alias("choice"),
        "annotator",
        "shown_first",
    )


def read_human_file(
    path: str | Path,
    study: pl.DataFrame | None = None,
    benchmark_pairs: set[tuple[str, str]] | None = None,
) -> pl.DataFrame:
    """``analyses.human_annotations``: a Label Studio JSON export of a saber study (a label that
    cannot be read is an error with its reason), else ``read_annotations``' CSV / Parquet. The
    export is read against ``study`` (the home's, where it has one: its tasks, pairs and
    overlaps) and the benchmark's rated pairs, as ``saber study import`` reads it; without a
    study, against what its own tasks say, each held to a saber study's overlap."""
    path = Path(path).expanduser()
    if path.suffix != ".json" or not path.exists():
        return read_annotations(path)
    try:
        labels, refused = labels_from_export(json.loads(path.read_text()), study, benchmark_pairs)
    except (StudyError, json.JSONDecodeError) as exc:
        raise AnnotationError(f"{path}: {exc}") from None
    if refused.height:
        r = refused.row(0, named=True)
        raise AnnotationError(
            f"{path}: task {r['task']}: {r['reason']} ({refused.height} labels refused)"
        )
    return human_pairs(labels)


def store_labels(db: StoreDB, labels: pl.DataFrame) -> tuple[int, int]:
    """(new, already stored): the labels added to the stores' ``human_labels`` by its
    idempotent insert; a label already there (same task and annotator) is left as it was."""
    ensure_table(db, "human_labels")
    if not labels.height:
        return 0, 0
    found = db.lookup(
        "human_labels", ["task_id", "annotator"], {}, "task_id", labels["task_id"].to_list()
    )
    have = pl.DataFrame(found, schema={"task_id": pl.String, "annotator": pl.String}, orient="row")
    new = labels.join(have, on=["task_id", "annotator"], how="anti").unique(
        ["task_id", "annotator"], keep="first", maintain_order=True
    )
    db.insert_ignore("human_labels", new)
    return new.height, labels.height - new.height


def stored_labels(db: StoreDB, study: str | None = None) -> pl.DataFrame:
    """The stores' human labels (of one study, or all), oldest first."""
    ensure_table(db, "human_labels")
    cols = ", ".join(LABEL_SCHEMA)
    where, params = ("WHERE study = ?", [study]) if study else ("", [])
    frame = db.frame(
        f"SELECT {cols} FROM human_labels {where} ORDER BY labelled_at, task_id", params
    )
    return frame.cast(LABEL_SCHEMA) if frame.height else pl.DataFrame(schema=LABEL_SCHEMA)


def stored_annotators(db: StoreDB, tasks: list[str]) -> dict[str, set[str]]:
    """task -> the annotators the stores hold a label of, for the given tasks."""
    ensure_table(db, "human_labels")
    found = db.lookup("human_labels", ["task_id", "annotator"], {}, "task_id", tasks)
    out: dict[str, set[str]] = {}
    for task, annotator in found:
        out.setdefault(task, set()).add(annotator)
    return out


def labels_version(db, study: str | None = None) -> str:
    """The data version of the stored human labels (of one study, or all): it moves when a pull
    or an import adds one, so what reads them is marked unsynced."""
    labels = stored_labels(db, study).sort("task_id", "annotator")
    return digest(labels.select("task_id", "annotator", "label").rows())
