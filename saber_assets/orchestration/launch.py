"""`saber build`'s loop: every missing or unsynced step of the selection, job by job (the plan:
``orchestration.plan``), in this process or on a running deployment (``orchestration.remote``), after the Dagster
runs a killed build left are marked failed (``dead_launches``). It prints through a ``Console``; the
CLI (``cli/build.py``) only parses its arguments and calls ``build``."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from saber_assets.config import DEFAULT_CONFIG, REPO_ROOT, data_home, load_config
from saber_assets.outputs import Outputs
from saber_assets.stages import stage_of


def _stdout(line: str) -> None:
    print(line, flush=True)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def terminal_line(line: str) -> None:
    """Redraw the terminal's last line as ``line`` (cut to the terminal's width); "" clears it."""
    width = shutil.get_terminal_size((120, 24)).columns - 1
    sys.stdout.write("\r\033[K" + line[:width])
    sys.stdout.flush()


@dataclass
class Console:
    """Where a build's lines go: ``out`` for its progress, ``err`` for failures (stdout and
    stderr by default; a test or another front end collects them). ``live``: a terminal's line
    redrawn in place (``terminal_line``), None where the lines go to a log. ``steps``: a line per
    step even in a stage of many partitions (``saber build --steps``)."""

    out: Callable[[str], None] = field(default=_stdout)
    err: Callable[[str], None] = field(default=_stderr)
    live: Callable[[str], None] | None = None
    steps: bool = False


@dataclass
class StageSummary:
    """A stage of many steps (a partition each): on a terminal one progress line redrawn per
    step, then one summary line: the partitions, each asset's rows summed, the job's seconds and
    the peak RSS (the form ``print_launch``'s own last line has). Whatever a step says beyond its
    rows (faults met, a failed check, a warning, a failure) is still printed, each as it comes."""

    console: Console
    total: int
    done: int = 0
    failed: int = 0
    seconds: float = 0.0
    jobs: dict[str, None] = field(default_factory=dict)
    partitions: list[str] = field(default_factory=list)
    rows: dict[str, int | None] = field(default_factory=dict)  # None: an asset that is no table

    def say(self, line: str) -> None:
        if self.console.live is not None:
            self.console.live("")
        self.console.out(line)

    def step(self, step, result, seconds: float) -> None:
        self.done += 1
        self.failed += not result.success
        self.seconds += seconds
        self.jobs.setdefault(result.dagster_run.job_name, None)
        self.partitions += [p for p in step.partitions if p]
        for event in result.get_asset_materialization_events():
            mat = event.materialization
            n = summary_value(mat.metadata, "dagster/row_count")
            name = mat.asset_key.to_user_string()
            was = self.rows.get(name)
            self.rows[name] = None if n is None else (was or 0) + int(n)
        if self.console.live is not None:
            self.console.live(f"  {step.label}  {self.done}/{self.total}  ({self.seconds:.0f}s)")

    def close(self) -> None:
        parts = self.partitions
        named = ", ".join(parts[:3]) + (f", … {parts[-1]}" if len(parts) > 4 else
                                        "".join(f", {p}" for p in parts[3:]))  # fmt: skip
        assets = ", ".join(f"{a} rows={n}" if n is not None else a for a, n in self.rows.items())
        state = "ok" if not self.failed else f"{self.failed} of {self.done} FAILED"
        self.say(
            f"  {self.done} partitions ({named}): {assets or 'nothing materialised'} "
            + job_line("/".join(self.jobs), state, self.seconds)
        )


def job_line(job: str, state: str, seconds: float) -> str:
    """A job's closing words, ``(JOB ok in 1.2s, process peak RSS 0.98 GB)``: the form
    ``perf/scale.py`` reads each job's seconds from."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    return f"({job} {state} in {seconds:.1f}s, process peak RSS {peak:.2f} GB)"


# Dagster's console logger at this level prints nothing a build does not print better itself:
# the step lines, the warnings in plain words (`launch_warnings`) and the failures at the end.
QUIET = "CRITICAL"


def launch_warnings(instance, run_id: str) -> list[str]:
    """The messages a run's steps logged at WARNING or above, each once, in their order."""
    import logging

    seen: dict[str, None] = {}
    for entry in instance.all_logs(run_id):
        if entry.dagster_event is None and entry.level >= logging.WARNING and entry.user_message:
            seen.setdefault(" ".join(entry.user_message.split()), None)
    return list(seen)


def prepare_dagster_home(home: Path) -> Path:
    """Project-local DAGSTER_HOME with the repo's dagster.yaml, so run history survives restarts."""
    dagster_home = home / "dagster_home"
    dagster_home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO_ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    return dagster_home


def summary_value(metadata: dict, key: str):
    v = metadata.get(key)
    return None if v is None else getattr(v, "value", v)


def faults_line(metadatas) -> str | None:
    """One line for the faults a run's LLM calls met (``llm_faults`` of its materialisations):
    by cause, the retries and the seconds they cost; None when it met none."""
    import json
    from collections import Counter

    faults: Counter = Counter()
    lost = 0.0
    for metadata in metadatas:
        value = summary_value(metadata, "llm_faults")
        if value:
            seen = json.loads(value)
            faults.update(seen["by_cause"])
            lost += seen["lost_s"]
    if not faults:
        return None
    causes = ", ".join(f"{k} {v}" for k, v in sorted(faults.items()))
    return f"faults met: {causes} ({sum(faults.values())} retries, {lost:.1f}s lost)"


def failed_error_checks(result) -> list:
    """The checks of a run that failed at ERROR severity, or failed and were accepted (a run
    told to accept them turns the judge's into a warning): what is built from their asset must
    not be built on unless accepted (the judge's position bias: grades that follow the order
    shown)."""
    from dagster import AssetCheckSeverity

    def accepted(check) -> bool:
        value = check.metadata.get("accepted")
        return bool(getattr(value, "value", value))

    return [
        check
        for check in result.get_asset_check_evaluations()
        if not check.passed and (check.severity == AssetCheckSeverity.ERROR or accepted(check))
    ]


def stopped_by_checks_only(result) -> bool:
    """Whether a run that did not succeed failed only where a blocking check stopped it (the
    check's own step, and what was not built after it): reported as the check, not a crash."""
    failures = [ev for ev in result.all_events if ev.is_step_failure]
    return bool(failures) and all(
        ev.step_failure_data.error.cls_name == "DagsterAssetCheckFailedError" for ev in failures
    )


def print_launch(
    result, seconds: float, console: Console, summary: StageSummary | None = None
) -> None:
    """One line per materialisation: asset, partition, rows; the faults its LLM calls met;
    failed checks too. With ``summary`` (a stage of many partitions), a step that succeeded
    prints only its faults and failed checks; the summary counts its rows."""
    say = summary.say if summary is not None else console.out
    mats = [event.materialization for event in result.get_asset_materialization_events()]
    for mat in [] if summary is not None and result.success else mats:
        part = f" [{mat.partition}]" if mat.partition else ""
        rows = summary_value(mat.metadata, "dagster/row_count")
        label = mat.asset_key.to_user_string() + part
        # an asset that is no table (an index, a run folder) has no row count to print
        say(f"  {label:<40} rows={rows}" if rows is not None else f"  {label}")
    if line := faults_line(m.metadata for m in mats):
        say(f"  {line}" if summary is None else f"  {result.dagster_run.job_name}: {line}")
    for check in result.get_asset_check_evaluations():
        if not check.passed:
            why = f": {check.description}" if check.description else ""
            say(f"  CHECK FAILED: {check.asset_key.to_user_string()} / {check.check_name}{why}")
    if summary is None or not result.success:
        say(
            "  "
            + job_line(result.dagster_run.job_name, "ok" if result.success else "FAILED", seconds)
        )


def sync_partitions(instance, cfg) -> dict[str, list[str]]:
    """Add a `retriever` partition for every registry entry, and a `training_corpus` partition
    for every training corpus with text it declares, that lacks one (never removes any); returns
    the new keys by partitioning."""
    from saber_assets.contamination.matches import checked_corpora
    from saber_assets.retrievers.discovery import registry_for

    entries = registry_for(cfg)
    wanted = {
        "retriever": [e.name for e in entries],
        "training_corpus": list(checked_corpora(entries)),
    }
    added = {}
    for name, keys in wanted.items():
        have = set(instance.get_dynamic_partitions(name))
        added[name] = [k for k in keys if k not in have]
        if added[name]:
            instance.add_dynamic_partitions(name, added[name])
    return added


def package_assets(defs) -> dict[str, list[str]]:
    """Each package (Dagster group) and the assets it declares, as `--select` takes them."""
    graph = defs.resolve_asset_graph()
    out: dict[str, list[str]] = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.is_materializable:
            out.setdefault(node.group_name, []).append(key.to_user_string())
    return out


def domain_selection(select: list[str], keys: dict[str, str]) -> list[str]:
    """``domain=NAME`` by a domain's title (as the UI and the leaderboard show it) or its
    partition key, rewritten to the key; a name that is neither is an error listing the domains
    (selecting nothing would look like a build with nothing to do)."""
    out = []
    by_key = set(keys.values())
    for x in select:
        if x.startswith("domain="):
            name = x.split("=", 1)[1]
            if name not in keys and name not in by_key:
                listing = ", ".join(repr(t) for t in keys)
                raise ValueError(f"--select domain={name}: no such domain; the domains: {listing}")
            x = f"domain={keys.get(name, name)}"
        out.append(x)
    return out


def observe_sources(defs, instance, run_config: dict | None = None) -> None:
    """Observe the input files and the registry entries (their data versions) before a build
    asks what is unsynced; a failed observation is an error (the versions would be guesses)."""
    from saber_assets.orchestration.observe import OBSERVE_JOBS

    for job in (j.name for j in OBSERVE_JOBS):
        res = defs.resolve_job_def(job).execute_in_process(
            instance=instance, raise_on_error=False, run_config=run_config
        )
        if not res.success:
            raise RuntimeError(f"{job} failed: the input files or the registry could not be read")


def build_remote(
    url: str, defs, cfg, force: bool, select: list[str], stages: list, console: Console
) -> int:
    """The build on a running deployment (``orchestration.remote``): its own Dagster says what is
    unsynced."""
    from dagster import AssetKey, DagsterInstance

    from saber_assets.orchestration.plan import (
        fan_in_parents,
        partition_filter,
        runnable_names,
        stage_partition_keys,
    )
    from saber_assets.orchestration.remote import build_on

    with DagsterInstance.ephemeral() as scratch:  # the partitions, not run history
        names = sync_partitions(scratch, cfg)
        repo = defs.get_repository_def()
        retrievers = runnable_names(cfg, say=console.out)
        domains = [x.split("=", 1)[1] for x in select if x.startswith("domain=")]
        plan = [
            (stage, [p for p in stage_partition_keys(repo, scratch, stage) if keep(p)])
            for stage in stages
            for keep in [partition_filter(stage, domains, retrievers)]
        ]
        fan_in = {
            (a, p): [(k.to_user_string(), ups) for k, ups in edges]
            for stage, partitions in plan
            for p in partitions
            for a in stage.assets
            if (edges := fan_in_parents(scratch, repo.asset_graph, AssetKey(a), p))
        }
    console.out(f"saber build --on {url}: {sum(len(p) for _, p in plan)} steps in the plan")
    return build_on(url, plan, names, force, fan_in=fan_in, say=console.out, say_error=console.err)


def build(
    config: str | None,
    log_level: str,
    force: bool = False,
    select: list[str] | None = None,
    on: str | None = None,
    console: Console | None = None,
    accept_failed_checks: bool = False,
) -> int:
    """Every missing or unsynced step of the selection, job by job, here or ``on`` a running
    deployment; each line to ``console``. Returns the exit status. A check that fails at ERROR
    severity stops the build after its stage (nothing is built on it) and the status is 1,
    unless ``accept_failed_checks``: then the build goes on and says so."""
    console = console or Console()
    cfg = load_config(config)  # fail fast, before Dagster starts, on a bad config file
    # Dagster's world is imported here, not at the top: `saber ui` imports this module for
    # `prepare_dagster_home`, and the definitions alone take 4 s to import
    home = data_home()
    from dagster import DagsterInstance

    from saber_assets.definitions import make_definitions
    from saber_assets.ontology.domains import domain_keys
    from saber_assets.orchestration.dead_launches import reap_dead_launches
    from saber_assets.orchestration.plan import (
        components_first,
        one_launch_per_retriever,
        partition_filter,
        runnable_names,
        selected_stages,
        stage_steps,
    )
    from saber_assets.retrievers.discovery import registry_for

    defs = make_definitions(config, home, cfg)
    select = domain_selection(select or [], domain_keys(cfg.ontology))
    # an unknown job or package fails here, before anything runs
    stages = selected_stages(select, package_assets(defs))
    if on:
        return build_remote(on, defs, cfg, force, select, stages, console)
    from saber_assets.corpus.sources import missing_sources

    if missing := missing_sources(cfg.corpus):  # before any step: the first reads them
        console.err("saber build: the corpus cannot be read yet:\n  " + "\n  ".join(missing))
        return 2
    prepare_dagster_home(home)
    instance = DagsterInstance.get()
    t0 = time.perf_counter()
    console.out(
        f"saber build: config {config or DEFAULT_CONFIG} ({cfg.name}), outputs under {home / cfg.name}"
    )
    run_config = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    for run_id in reap_dead_launches(instance):
        console.out(f"  run {run_id} of a killed build marked failed, its pool slots freed")
    sync_partitions(instance, cfg)
    observe_sources(defs, instance, run_config)
    retrievers = runnable_names(cfg, say=console.out)
    domains = [x.split("=", 1)[1] for x in select if x.startswith("domain=")]
    from saber_assets.lib.declare import ACCEPT_FAILED_CHECKS_TAG

    accept_tags = {ACCEPT_FAILED_CHECKS_TAG: "true"} if accept_failed_checks else {}
    tally = Tally()
    verbose = log_level.upper() in ("DEBUG", "INFO")
    for stage in stages:
        if tally.failed:
            break  # later stages need this one complete
        if tally.blocked and not accept_failed_checks:
            break  # nothing is built on what a check refused
        if stage.reads_queries and no_queries(Outputs.of(cfg, home)):
            # the analyses read queries, ratings and a leaderboard: over none they have nothing
            # to say, and a build whose model found no viable query still finishes
            console.out(
                f"  {stage.alias} skipped: the benchmark has no query (no viable query in any "
                "domain: see relevance_thresholds)"
            )
            continue
        # asked only now: the previous stage may have given this one new inputs
        keep = partition_filter(stage, domains, retrievers)
        steps = stage_steps(defs.get_repository_def(), instance, stage, keep, force)
        if stage.fusions_last:
            steps = components_first(steps, registry_for(cfg))
        if stage.by_domain and stage.by_retriever:
            steps = one_launch_per_retriever(steps, static_domains(defs, stage.job))
        launch_stage(defs, instance, steps, run_config, accept_tags, console, verbose, tally)
    elapsed = time.perf_counter() - t0
    console.out(f"steps:     {tally.ran} run, {tally.skipped} up to date (`--force` rebuilds them)")
    print_outputs(defs, Outputs.of(cfg, home), console, bool(tally.failed))
    return closing(tally, Outputs.of(cfg, home), elapsed, accept_failed_checks, console)


@dataclass
class Tally:
    """What a build's launches came to: steps run and up to date, the failed Dagster runs, and
    the (step, check) pairs a check stopped at ERROR severity."""

    ran: int = 0
    skipped: int = 0
    failed: list = field(default_factory=list)
    blocked: list[tuple[str, object]] = field(default_factory=list)


def launch_stage(defs, instance, steps: list, run_config: dict, tags: dict, console: Console,
                 verbose: bool, tally: Tally) -> None:  # fmt: skip
    """Each step of a stage that has a reason to run, launched as a Dagster run in this
    process; a partition range that fails is launched again one partition at a time, so the
    domains that work are recorded and the failure is the one domain's."""
    from saber_assets.orchestration.dead_launches import process_tags  # Dagster: see build

    to_run = sum(bool(step.reasons) for step in steps)
    summary = (
        StageSummary(console, to_run) if to_run > 1 and not (console.steps or verbose) else None
    )
    queue = deque(steps)
    while queue:
        step = queue.popleft()
        if not step.reasons:
            tally.skipped += 1
            continue
        if verbose:
            console.out(f"  {step.label}: {'; '.join(step.reasons[:3])}")
        t1 = time.perf_counter()
        result = defs.resolve_job_def(step.job).execute_in_process(
            instance=instance,
            raise_on_error=False,
            run_config=run_config,
            partition_key=None if step.last else step.partition,
            tags={**process_tags(), **tags, **range_tags(step)},
        )
        seconds = time.perf_counter() - t1
        print_launch(result, seconds, console, summary)
        for message in launch_warnings(instance, result.run_id):
            (summary.say if summary else console.out)(f"  warning: {message}")
        if not result.success and step.parts:
            (summary.say if summary else console.out)(
                f"  {step.label} failed: its partitions one run each"
            )
            queue.extendleft(reversed(step.parts))
            if summary is not None:
                summary.total += len(step.parts) - 1
            continue
        tally.ran += len(step.partitions)  # a range's partitions count as steps, as when up to date
        if summary is not None:
            summary.step(step, result, seconds)
        if not result.success and not stopped_by_checks_only(result):
            tally.failed.append(result)
        tally.blocked += [(step.label, check) for check in failed_error_checks(result)]
    if summary is not None:
        summary.close()


def print_outputs(defs, outputs: Outputs, console: Console, failed: bool) -> None:
    """The build's closing lines: its warehouse views refreshed, where everything is, the
    benchmark's coverage, the verdict, the board's leaders, the report and the explorer."""
    # here, as this module's other imports of Dagster's world: `saber ui` imports the module
    # for `prepare_dagster_home`, and DuckDB alone would add 0.27 s to every command's start
    import duckdb

    from saber_resources.warehouse import Warehouse

    wh = defs.resources["warehouse"]
    assert isinstance(wh, Warehouse)
    try:
        views = wh.refresh_views()
    except duckdb.Error as exc:  # views are derived: `saber warehouse` makes them again
        if not failed:
            raise
        views = [f"not refreshed: {str(exc).splitlines()[0][:120]}"]
    console.out(f"parquet:   {wh.parquet_dir}")
    console.out(f"warehouse: {wh.path} (views: {', '.join(views) or 'none'})")
    console.out(f"dagster:   {os.environ['DAGSTER_HOME']} (open the UI with `uv run saber ui`)")
    if lines := benchmark_lines(outputs):
        console.out("benchmark: " + lines[0])
        for line in lines[1:]:
            console.out(f"  {line}")
    if verdict := verification_of(outputs):
        console.out(f"verify:    {verdict}")
    for line in board_lines(outputs):
        console.out(line)
    report = outputs.report / "index.html"
    if report.exists():
        console.out(f"report:    {report}")
    explorer = outputs.explorer / "index.html"
    if explorer.exists():
        console.out(f"explorer:  {explorer} (served: uv run saber report --serve)")


def closing(tally: Tally, outputs: Outputs, elapsed: float, accept_failed_checks: bool,
            console: Console) -> int:  # fmt: skip
    """The build's verdict and exit status: its failed steps, in their own words; the checks
    that stopped it (or were accepted); or that it finished."""
    failed, blocked = tally.failed, tally.blocked
    if failed:
        failures = [
            (
                res.dagster_run.job_name,
                f"{ev.step_key}{partition_of(res)}",
                ev.step_failure_data.error,
            )
            for res in failed
            for ev in res.all_events
            if ev.is_step_failure
        ]
        if full := disk_full(failures, outputs.root):
            console.err(full)  # one line: the rest is the same error, many times
        else:
            for _, step_key, error in failures:
                console.err(f"FAILED step {step_key}: {innermost(error)}")
        console.err(f"saber build FAILED after {elapsed:.1f}s")
        return 1
    for label, check in blocked:
        why = f": {check.description}" if check.description else ""
        say = console.out if accept_failed_checks else console.err
        say(f"{'ACCEPTED' if accept_failed_checks else 'STOPPED BY'} failed check "
            f"{check.asset_key.to_user_string()} / {check.check_name} ({label}){why}")  # fmt: skip
    if blocked and not accept_failed_checks:
        console.err(
            f"saber build STOPPED after {elapsed:.1f}s: {len(blocked)} check(s) failed at ERROR "
            "severity, and nothing was built on what they check. Fix the cause (the judge's "
            "position bias: another judge, `tournament.both_orders`; the verification: "
            "`saber verify` lists each number that differs), or build with "
            "--accept-failed-checks: the benchmark then records the failure, and `saber push` "
            "refuses it unless told the same"
        )
        return 1
    console.out(f"saber build finished in {elapsed:.1f}s")
    return 0


def innermost(error) -> str:
    """A step failure's own words: the exception the asset raised, not Dagster's wrapper
    around it ("Error occurred while executing op ...")."""
    while error.cause is not None:
        error = error.cause
    return error.message.strip()


def partition_of(result) -> str:
    """`` [PARTITION]`` of a run (``[FIRST … LAST]`` for a range), or nothing."""
    from dagster._core.storage.tags import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
        PARTITION_NAME_TAG,
    )

    tags = result.dagster_run.tags
    if key := tags.get(PARTITION_NAME_TAG):
        return f" [{key}]"
    first = tags.get(ASSET_PARTITION_RANGE_START_TAG)
    return f" [{first} … {tags.get(ASSET_PARTITION_RANGE_END_TAG)}]" if first else ""


def range_tags(step) -> dict[str, str]:
    """A step over a partition range (``plan.one_launch_per_retriever``) as Dagster's tags."""
    if not step.last:
        return {}
    from dagster._core.storage.tags import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    return {
        ASSET_PARTITION_RANGE_START_TAG: step.partition,
        ASSET_PARTITION_RANGE_END_TAG: step.last,
    }


def static_domains(defs, job: str) -> list[str]:
    """The domain keys of a domain × retriever job, in their partition order."""
    parts = defs.resolve_job_def(job).partitions_def
    return list(parts.get_partitions_def_for_dimension("domain").get_partition_keys())


def disk_full(failures: list[tuple[str, str, object]], outputs: Path) -> str | None:
    """The one line a build stopped by a full disk prints (errno 28 anywhere in a failed step's
    error, its causes included): where, how much is free, which stage and step; None otherwise.
    Every output is written whole or not at all, so nothing finished is lost."""
    for job, step_key, error in failures:
        chain, seen = [], error
        while seen is not None:
            chain.append(f"{seen.message} {''.join(seen.stack or [])}")
            seen = seen.cause or seen.context
        if any("No space left on device" in text or "os error 28" in text for text in chain):
            free = shutil.disk_usage(outputs).free if outputs.exists() else 0
            stage = stage_of(job).alias
            return (
                f"saber build: the disk is full under {outputs} ({free / 2**20:.1f} MiB free), "
                f"in stage {stage} (step {step_key}): free space there and run the build again "
                "(what finished is kept, no file was left half written)"
            )
    return None


def benchmark_lines(outputs: Outputs) -> list[str]:
    """The built benchmark in a few lines: its queries, then each domain against its quota
    and why one falls short (the manifest's coverage); none before the benchmark is built."""
    import json

    import polars as pl

    from saber_assets.candidates.coverage import COVERAGE_SCHEMA, below_quota, coverage_lines

    path = outputs.benchmark / "manifest.json"
    if not path.exists():
        return []
    coverage = json.loads(path.read_text()).get("coverage")
    if not coverage:
        return []
    table = pl.DataFrame(coverage, schema=COVERAGE_SCHEMA)
    short = below_quota(table).height
    head = f"{int(table['queries'].sum()):,} queries over {table.height} domains, " + (
        "every domain at its quota" if not short else f"{short} below quota"
    )
    return [head, *coverage_lines(table)]


def board_lines(outputs: Outputs, most: int = 4) -> list[str]:
    """Who leads each setting: the first tie group (the systems the paired test cannot
    separate from the leader), up to ``most`` names, with the leader's score."""
    import polars as pl

    from saber_assets.leaderboard.board import Board, score_column

    if not Board.exists(outputs.leaderboard):
        return []
    board = Board.read_table(outputs.leaderboard)
    if board.height == 0 or "tie_group" not in board.columns:
        return []
    metric = score_column(board)
    lines = []
    for (setting,), part in board.sort("setting", metric, descending=[False, True]).group_by(
        "setting", maintain_order=True
    ):
        top = part.filter(pl.col("tie_group") == part["tie_group"][0])
        names = top["retriever"].to_list()
        more = f" and {len(names) - most} more" if len(names) > most else ""
        lines.append(
            f"{'leaders:' if not lines else '':<10} {setting}: {', '.join(names[:most])}{more} "
            f"({metric} {part[metric][0]:.3f}; "
            + ("one tie group" if len(names) > 1 else "ahead of the rest, significantly")
            + ")"
        )
    return lines


def verification_of(outputs: Outputs) -> str | None:
    """The scored benchmark's verification verdict in words, once its board was verified."""
    from saber_assets.benchmark.data import MANIFEST, verification_line
    from saber_assets.outputs import read_json_or_none

    manifest = read_json_or_none(outputs.evaluation_benchmark / MANIFEST)
    if not manifest or "verification" not in manifest:
        return None
    return verification_line(manifest)


def no_queries(outputs: Outputs) -> bool:
    """Whether the built evaluation benchmark exists and holds no query."""
    queries = outputs.evaluation_benchmark / "queries.parquet"
    if not queries.exists():
        return False
    import pyarrow.parquet as pq

    return pq.ParquetFile(queries).metadata.num_rows == 0
