"""verification: every number the board publishes recomputed from the benchmark's own files
(``leaderboard/verify.py``), the build's last leaderboard step."""

import time

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    MaterializeResult,
    MetadataValue,
)

from saber_assets.leaderboard.verify import record_verdict, verify
from saber_assets.lib.declare import stage_asset
from saber_assets.lib.metadata import stage_metadata
from saber_assets.pipeline import PipelineResource

VERIFIED = "verified"  # the verification's check: ERROR, so a failure stops the build there


@stage_asset(
    reads=("seed", "leaderboard"),
    kinds={"polars"},
    deps=["leaderboard", "full_corpus_fill"],
    check_specs=[AssetCheckSpec(VERIFIED, asset="benchmark_verification",
                                description="Every published number is what the benchmark's "
                                "own files give (`saber verify`)")],
)  # fmt: skip
def benchmark_verification(
    context: AssetExecutionContext, pipeline: PipelineResource
) -> MaterializeResult:
    """Every number the board publishes recomputed from the benchmark's files, its runs and its
    board alone, through independent implementations (``leaderboard/verify.py``). The verdict
    goes into the benchmark's manifest (``saber push`` refuses a failed one, the card, the report
    and the explorer say it) and ``verification.json``; a failed one stops the build here."""
    out = pipeline.outputs()
    t0 = time.perf_counter()
    cfg = pipeline.load()
    # what this build's own config makes uncheckable, never what the bundle says of itself
    allowed = ["soft-grades"] if cfg.tournament.policy == "efficient" else []
    if cfg.ratings.prior == "choix":
        allowed += ["choix-ties", "choix-fill"]
    verdict = verify(out.evaluation_benchmark, out.runs, out.leaderboard, allowed=allowed)
    seconds = time.perf_counter() - t0
    # the built benchmark too where it is the one scored: `saber push` publishes that folder
    scored = [out.evaluation_benchmark]
    if cfg.benchmark.path is None and out.benchmark.is_dir():
        scored.append(out.benchmark)
    record_verdict(verdict, scored, out.leaderboard)
    if verdict.not_checked:
        context.log.warning("not verified: " + "; ".join(verdict.not_checked))
    return MaterializeResult(
        metadata={
            **stage_metadata(sum(verdict.checked.values()), seconds=seconds),
            "verdict": verdict.summary(),
            "checked": MetadataValue.json(verdict.checked),
            "differences": MetadataValue.md(verdict.table()),
            "not_checked": MetadataValue.md("\n".join(f"- {x}" for x in verdict.not_checked)
                                            or "everything"),
        },
        check_results=[AssetCheckResult(
            check_name=VERIFIED, passed=verdict.passed, severity=AssetCheckSeverity.ERROR,
            description=verdict.summary(),
            metadata={"differences": len(verdict.differences)},
        )],
    )  # fmt: skip
