"""What changed between two builds of a benchmark (`saber diff OLD NEW`, the explorer's
``diff.html``): the queries added and removed, the grades that moved, and the board's order.

A build is read as a ``BuildState``: every (query, candidate) grade with the candidate's group,
the board's score per (setting, retriever), and the manifest facts a rebuild changes (seed,
judge, thresholds, corpus). It comes from an outputs folder (``evaluation_benchmark/``,
``leaderboard/leaderboard.csv`` and, for the groups, ``parquet/relevance_ratings/``) or from a
snapshot the explorer keeps of each build it shows (``builds/<id>/``: ``grades.parquet``,
``board.csv``, ``manifest.json``), so a rebuild in the same folder can still be compared with
the one it replaced.

- A grade moved when a (query, candidate) pair graded in both builds differs by more than
  ``TOLERANCE`` (the exchange format's grades are exact floats; a refit of the same judgments
  reproduces them to ~1e-12). Candidates drawn in one build only are counted, not compared.
- The board's agreement per setting is Kendall's τ-b over the retrievers on both boards
  (``scipy.stats.kendalltau``: ties in either build count as the statistic defines); a pair
  flipped when one build scores a strictly above b and the other strictly below.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.leaderboard.board import Board, score_column
from saber_assets.lib.correlation import kendall_tau_b
from saber_assets.outputs import folder_written_whole

TOLERANCE = 1e-9
# the manifest facts that say why a rebuild's numbers moved
FACTS = ("seed", "corpus_version", "judge_backend", "judge_model", "judges", "thresholds",
         "candidates_per_group", "quota_per_domain", "tournament", "ratings")  # fmt: skip
GRADES_SCHEMA = {"query_id": pl.String, "candidate_id": pl.String, "grade": pl.Float64,
                 "group": pl.String}  # fmt: skip
BOARD_SCHEMA = {"setting": pl.String, "retriever": pl.String, "score": pl.Float64,
                "tie_group": pl.Int64}  # fmt: skip
SNAPSHOTS_KEPT = 5
GROUP_KEYS = ("query_id", "candidate_id", "group")  # of relevance_ratings


@dataclass
class BuildState:
    """What a build published that a rebuild can move."""

    label: str
    grades: pl.DataFrame  # GRADES_SCHEMA; group null where the build kept none
    board: pl.DataFrame  # BOARD_SCHEMA; empty for a build not scored yet
    facts: dict = field(default_factory=dict)  # FACTS from the manifest

    @classmethod
    def read(cls, folder: Path) -> BuildState:
        """A build's outputs folder, a snapshot, or a benchmark folder (grades only)."""
        folder = Path(folder)
        if (folder / "grades.parquet").is_file():
            return cls(
                str(folder),
                pl.read_parquet(folder / "grades.parquet").cast(GRADES_SCHEMA),  # type: ignore[arg-type]
                pl.read_csv(folder / "board.csv", schema=BOARD_SCHEMA),
                json.loads((folder / "manifest.json").read_text(encoding="utf-8")),
            )
        for bench_dir in (folder / "evaluation_benchmark", folder / "benchmark", folder):
            if (bench_dir / "manifest.json").is_file():
                break
        else:
            raise FileNotFoundError(
                f"{folder}: not a build (no evaluation_benchmark/ or benchmark/ with a "
                "manifest.json), a benchmark folder, or a snapshot (grades.parquet)"
            )
        root = bench_dir.parent if bench_dir != folder else folder
        board_dir = root / "leaderboard"
        board = Board.read_table(board_dir) if Board.exists(board_dir) else None
        ratings = sorted((root / "parquet" / "relevance_ratings").glob("*.parquet"))
        return cls.of(
            str(folder),
            Benchmark.read(bench_dir),
            board,
            pl.concat([pl.read_parquet(f, columns=list(GROUP_KEYS)) for f in ratings])
            if ratings
            else None,
        )

    @classmethod
    def of(
        cls,
        label: str,
        bench: Benchmark,
        board: pl.DataFrame | None,
        ratings: pl.DataFrame | None,
    ) -> BuildState:
        """A build from what was read already: its benchmark, ``leaderboard.csv`` (None: not
        scored yet) and its relevance ratings (the candidates' groups; None: not kept)."""
        groups = None
        if ratings is not None and ratings.height:
            groups = ratings.select(GROUP_KEYS).unique(["query_id", "candidate_id"], keep="first")
        return cls(
            label,
            grades_of(bench, groups),
            board_state(board) if board is not None else empty_board(),
            facts_of(bench.manifest),
        )

    def fingerprint(self) -> str:
        """A hash of the grades and the board: equal for two builds that publish the same."""
        h = hashlib.sha256()
        for frame in (self.grades.sort("query_id", "candidate_id"),
                      self.board.sort("setting", "retriever")):  # fmt: skip
            for row in frame.iter_rows():
                h.update(repr(row).encode())
        h.update(json.dumps(self.facts, sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]

    def write(self, folder: Path) -> Path:
        """This state as a snapshot folder, whole."""
        with folder_written_whole(folder) as out:
            out.mkdir(parents=True, exist_ok=True)
            self.grades.write_parquet(out / "grades.parquet")
            self.board.write_csv(out / "board.csv")
            (out / "manifest.json").write_text(json.dumps(self.facts, default=str, indent=1))
        return folder


def empty_board() -> pl.DataFrame:
    return pl.DataFrame(schema=BOARD_SCHEMA)


def board_state(board: pl.DataFrame) -> pl.DataFrame:
    """The board's score per (setting, retriever), and its tie group where it has one."""
    metric = score_column(board)
    tie = pl.col("tie_group") if "tie_group" in board.columns else pl.lit(None)
    return board.select(
        "setting", "retriever", pl.col(metric).alias("score"), tie.alias("tie_group")
    ).cast(BOARD_SCHEMA)  # type: ignore[arg-type]


def grades_of(bench: Benchmark, groups: pl.DataFrame | None) -> pl.DataFrame:
    doc_id = bench.documents["id"]
    q = bench.queries.select("id", "candidates", "relevance_scores").explode(
        "candidates", "relevance_scores"
    )
    grades = pl.DataFrame(
        {
            "query_id": q["id"],
            "candidate_id": doc_id.gather(q["candidates"].cast(pl.Int64)),
            "grade": q["relevance_scores"].cast(pl.Float64),
        }
    )
    if groups is None:
        return grades.with_columns(pl.lit(None, pl.String).alias("group")).cast(GRADES_SCHEMA)  # type: ignore[arg-type]
    return grades.join(groups, on=["query_id", "candidate_id"], how="left").cast(GRADES_SCHEMA)  # type: ignore[arg-type]


def facts_of(manifest: dict) -> dict:
    return {k: manifest[k] for k in FACTS if k in manifest}


@dataclass
class SettingDiff:
    setting: str
    systems: int  # on both boards
    tau: float | None  # None: fewer than two systems, or a board with one score for all
    flipped: list[dict]  # a, b, old_a, old_b, new_a, new_b: the pairs whose order reversed
    only_old: list[str]
    only_new: list[str]


@dataclass
class BuildDiff:
    old: str
    new: str
    facts: dict[str, tuple]  # manifest fact -> (old, new), those that differ
    queries_added: list[str]
    queries_removed: list[str]
    compared: int  # (query, candidate) grades in both
    candidates_added: int  # graded in the new build only, on queries of both
    candidates_removed: int
    moved: pl.DataFrame  # query_id, candidate_id, group, old, new, delta: |delta| > TOLERANCE
    by_group: pl.DataFrame  # group, compared, moved, mean_abs_delta, max_abs_delta
    settings: list[SettingDiff]

    @property
    def nothing_moved(self) -> bool:
        return not (
            self.queries_added or self.queries_removed or self.moved.height
            or self.candidates_added or self.candidates_removed
            or any(s.flipped or s.only_old or s.only_new for s in self.settings)
        )  # fmt: skip


def diff_builds(old: BuildState, new: BuildState) -> BuildDiff:
    old_q = set(old.grades["query_id"].unique().to_list())
    new_q = set(new.grades["query_id"].unique().to_list())
    both = old_q & new_q
    o = old.grades.filter(pl.col("query_id").is_in(list(both)))
    n = new.grades.filter(pl.col("query_id").is_in(list(both)))
    keys = ["query_id", "candidate_id"]
    joined = o.rename({"grade": "old", "group": "old_group"}).join(
        n.rename({"grade": "new"}), on=keys, how="full", coalesce=True
    )
    paired = joined.filter(pl.col("old").is_not_null() & pl.col("new").is_not_null()).with_columns(
        pl.coalesce("group", "old_group").alias("group"), (pl.col("new") - pl.col("old")).alias("delta")
    )  # fmt: skip
    moved = (
        paired.filter(pl.col("delta").abs() > TOLERANCE)
        .select(*keys, "group", "old", "new", "delta")
        .sort(pl.col("delta").abs(), "query_id", "candidate_id", descending=[True, False, False])
    )
    by_group = (
        paired.with_columns(pl.col("group").fill_null("(no group recorded)"))
        .group_by("group")
        .agg(
            pl.len().alias("compared"),
            (pl.col("delta").abs() > TOLERANCE).sum().alias("moved"),
            pl.col("delta").abs().mean().alias("mean_abs_delta"),
            pl.col("delta").abs().max().alias("max_abs_delta"),
        )
        .sort("group")
    )
    return BuildDiff(
        old=old.label,
        new=new.label,
        facts={
            k: (old.facts.get(k), new.facts.get(k))
            for k in FACTS
            if old.facts.get(k) != new.facts.get(k)
        },  # fmt: skip
        queries_added=sorted(new_q - old_q),
        queries_removed=sorted(old_q - new_q),
        compared=paired.height,
        candidates_added=joined.filter(pl.col("old").is_null()).height,
        candidates_removed=joined.filter(pl.col("new").is_null()).height,
        moved=moved,
        by_group=by_group,
        settings=board_diffs(old.board, new.board),
    )


def board_diffs(old: pl.DataFrame, new: pl.DataFrame) -> list[SettingDiff]:
    out = []
    for setting in sorted(set(old["setting"].to_list()) | set(new["setting"].to_list())):
        a = dict(old.filter(pl.col("setting") == setting).select("retriever", "score").iter_rows())
        b = dict(new.filter(pl.col("setting") == setting).select("retriever", "score").iter_rows())
        common = sorted(set(a) & set(b))
        tau = kendall_tau_b([a[r] for r in common], [b[r] for r in common])
        flipped = [
            {"a": x, "b": y, "old_a": a[x], "old_b": a[y], "new_a": b[x], "new_b": b[y]}
            for x, y in combinations(common, 2)
            if (a[x] - a[y]) * (b[x] - b[y]) < 0
        ]
        out.append(SettingDiff(setting, len(common), tau, flipped,
                               sorted(set(a) - set(b)), sorted(set(b) - set(a))))  # fmt: skip
    return out


# what a terminal would act on rather than show: C0 and C1 controls (ESC starts OSC 52, which
# writes the clipboard, and OSC 8 links), DEL, and the bidirectional overrides that reorder a line
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``), so a snapshot's
    text can never drive the terminal it is printed to."""
    return _UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)


def diff_lines(d: BuildDiff, query_link=None, most: int = 10) -> list[str]:
    """The diff as the console prints it; ``query_link(query_id)``: where a query's page is."""
    link = lambda q: f"  {query_link(q)}" if query_link and query_link(q) else ""  # noqa: E731
    lines = [f"old: {d.old}", f"new: {d.new}"]
    if d.nothing_moved:
        return [*lines, "nothing moved: the same queries, grades and board"
                + (" (the manifests differ: " + ", ".join(d.facts) + ")" if d.facts else "")]  # fmt: skip
    for k, (a, b) in d.facts.items():
        lines.append(f"changed {k}: {json.dumps(a, default=str)} -> {json.dumps(b, default=str)}")
    lines.append(f"queries: {len(d.queries_added)} added, {len(d.queries_removed)} removed")
    for q in d.queries_added[:most]:
        lines.append(f"  + {q}{link(q)}")
    for q in d.queries_removed[:most]:
        lines.append(f"  - {q}")
    lines.append(
        f"grades: {d.moved.height} of {d.compared} moved (|Δ| > {TOLERANCE:g}); "
        f"{d.candidates_added} candidates drawn only in the new build, "
        f"{d.candidates_removed} only in the old"
    )
    for g, n, m, mean, mx in d.by_group.iter_rows():
        if n:
            lines.append(f"  {g}: {m} of {n} moved, mean |Δ| {mean:.3f}, largest {mx:.3f}")
    for q, c, _g, a, b, delta in d.moved.head(most).iter_rows():
        lines.append(f"  {q} / {c}: {a:.3f} -> {b:.3f} ({delta:+.3f}){link(q)}")
    for s in d.settings:
        tau = "n/a" if s.tau is None else f"{s.tau:.3f}"
        lines.append(f"board {s.setting}: Kendall τ {tau} over {s.systems} systems, "
                     f"{len(s.flipped)} pairs flipped")  # fmt: skip
        for f in s.flipped[:most]:
            lines.append(f"  {f['a']} vs {f['b']}: {f['old_a']:.4f} vs {f['old_b']:.4f} -> "
                         f"{f['new_a']:.4f} vs {f['new_b']:.4f}")  # fmt: skip
        if s.only_old or s.only_new:
            lines.append(f"  only old: {', '.join(s.only_old) or '-'}; "
                         f"only new: {', '.join(s.only_new) or '-'}")  # fmt: skip
    return [printable(line) for line in lines]


def diff_data(d: BuildDiff, most: int = 200) -> dict:
    """The diff as the explorer's page reads it (JSON)."""
    return {
        "old": d.old,
        "new": d.new,
        "facts": {k: [a, b] for k, (a, b) in d.facts.items()},
        "queries_added": d.queries_added,
        "queries_removed": d.queries_removed,
        "compared": d.compared,
        "candidates_added": d.candidates_added,
        "candidates_removed": d.candidates_removed,
        "moved_count": d.moved.height,
        "moved": d.moved.head(most).to_dicts(),
        "by_group": d.by_group.to_dicts(),
        "settings": [s.__dict__ for s in d.settings],
        "nothing_moved": d.nothing_moved,
    }


def remember(history: Path, state: BuildState) -> tuple[BuildState | None, str]:
    """Keep ``state`` as the newest snapshot under ``history`` (the last ``SNAPSHOTS_KEPT``);
    the snapshot of the latest earlier build that published something else, if any, and the
    current fingerprint."""
    fp = state.fingerprint()
    history.mkdir(parents=True, exist_ok=True)
    snaps = sorted((p for p in history.iterdir() if p.is_dir() and not p.name.startswith(".")),
                   key=lambda p: p.name)  # fmt: skip
    previous = next((p for p in reversed(snaps) if not p.name.endswith(fp)), None)
    if not snaps or not snaps[-1].name.endswith(fp):
        number = int(snaps[-1].name.split("-", 1)[0]) + 1 if snaps else 1
        state.write(history / f"{number:06d}-{fp}")
        snaps = sorted(p for p in history.iterdir() if p.is_dir() and not p.name.startswith("."))
        for old in snaps[:-SNAPSHOTS_KEPT]:
            if previous is None or old != previous:
                shutil.rmtree(old, ignore_errors=True)
    if previous is None:
        return None, fp
    earlier = BuildState.read(previous)
    # named by its snapshot, not its path: the page is published with the benchmark
    earlier.label = (
        f"build {previous.name.split('-', 1)[0].lstrip('0')} ({previous.name.split('-', 1)[-1]})"
    )
    return earlier, fp
