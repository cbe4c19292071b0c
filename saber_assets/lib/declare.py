"""How every stage asset is declared: once, in its stage's ``assets.py``, as a plain function with
its Dagster attributes, the partitions and the pod size left out. ``build`` makes the Dagster
definition when the definitions load: the partitions are its stage's (``stages.STAGES``, from
the config's chunk, shard and domain counts) and the op tags its stage's pod size
(``pods.k8s_tags``), so a run launched from the UI sizes its step pods the way the build's
jobs do (under ``executor: k8s_job``). The observable source assets are not stage assets and
are declared with Dagster's own decorators."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    DataVersion,
    Output,
    PartitionsDefinition,
    asset,
    asset_check,
    multi_asset,
    observable_source_asset,
)

from saber_assets.pipeline import PipelineResource
from saber_assets.stages import stage_of_asset
from saber_assets.versions import input_versions

# a run with this tag builds on what a failed check refused: the judge's check then fails as a
# warning, so it blocks nothing, and the benchmark records the failure (`saber build
# --accept-failed-checks` sets it; `saber push` refuses such a benchmark unless told the same)
ACCEPT_FAILED_CHECKS_TAG = "saber/accept_failed_checks"


@dataclass(frozen=True)
class Declared:
    """A stage asset (or a check of one) before the config gives its partitions and pod size."""

    fn: Callable[..., Any]
    make: Callable[..., Callable[[Callable[..., Any]], Any]]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    # an analysis's section of the HTML report: (its table, the config) -> report.Section
    section: Callable[..., Any] | None = None
    # the config sections (or `section.key`s) its output depends on: its code version hashes
    # them (versions.asset_code_versions), so changing one marks it unsynced; every stage asset
    # says (None: it did not, which the definitions refuse)
    reads: tuple[str, ...] | None = None
    # the pod its job's runs need on Kubernetes (lib/pod_sizes.py; None: the default pod)
    pod: Callable[..., Any] | None = None

    @property
    def is_check(self) -> bool:
        return self.make is asset_check

    @property
    def asset_name(self) -> str:
        """The asset whose stage gives the partitions and the pod (a check's: the one it checks)."""
        if self.is_check:
            return self.attrs["asset"]
        if "outs" in self.attrs:
            return next(iter(self.attrs["outs"]))
        return self.attrs.get("name") or self.fn.__name__

    @property
    def asset_names(self) -> tuple[str, ...]:
        """Every asset it declares (a multi-asset's outs); none for a check."""
        if self.is_check:
            return ()
        return tuple(self.attrs["outs"]) if "outs" in self.attrs else (self.asset_name,)

    @property
    def module(self) -> str:
        """The module that declares it: what its code version hashes, with that module's imports."""
        return self.fn.__module__

    def build(
        self,
        partitions: Mapping[str, PartitionsDefinition] | None = None,
        op_tags: Mapping[str, str] | None = None,
    ) -> AssetsDefinition | AssetChecksDefinition:
        """The Dagster definition, partitioned as its stage (``partitions`` by
        ``Stage.partitioned_by``, from ``definitions.stage_partitions``)."""
        attrs = dict(self.attrs)
        by = stage_of_asset(self.asset_name).partitioned_by
        if by:
            if not partitions or by not in partitions:
                raise ValueError(f"{self.asset_name} is partitioned by {by}: pass its partitions")
            attrs["partitions_def"] = partitions[by]
        if op_tags and not self.is_check:
            attrs["op_tags"] = dict(op_tags)
        if not self.is_check:
            attrs["group_name"] = package_of(self.module)
        return self.make(**attrs)(self.fn)


def package_of(module: str) -> str:
    """The stage package a module belongs to (``saber_assets.<package>.…``): every asset's
    Dagster group, so the UI's groups are the packages a newcomer finds the code in."""
    parts = module.split(".")
    if len(parts) < 3 or parts[0] != "saber_assets":
        raise ValueError(f"{module} is in no stage package of saber_assets")
    return parts[1]


def source_asset(**attrs: Any) -> Callable[[Callable[..., Any]], Any]:
    """``@observable_source_asset`` in its declaring module's package group (``package_of``)."""
    return lambda fn: observable_source_asset(group_name=package_of(fn.__module__), **attrs)(fn)


def stage_asset(
    reads: tuple[str, ...] | None = None, pod: Callable[..., Any] | None = None, **attrs: Any
) -> Callable[[Callable[..., Any]], Declared]:
    """``@asset`` for a stage asset that depends on the config sections ``reads`` and whose job
    needs the pod ``pod`` sizes; its partitions and op tags come at build time."""
    return lambda fn: Declared(
        fn, asset, attrs, reads=None if reads is None else tuple(reads), pod=pod
    )


def stage_multi_asset(
    reads: tuple[str, ...] | None = None, **attrs: Any
) -> Callable[[Callable[..., Any]], Declared]:
    """``@multi_asset``: every output depends on the config sections ``reads``."""
    return lambda fn: Declared(
        fn, multi_asset, attrs, reads=None if reads is None else tuple(reads)
    )


def stage_check(asset: str, **attrs: Any) -> Callable[[Callable[..., Any]], Declared]:
    """``@asset_check`` of a stage asset, named by key, partitioned like it."""
    return lambda fn: Declared(fn, asset_check, {"asset": asset, **attrs})


def table_asset(
    reads: tuple[str, ...] | None = None, pod: Callable[..., Any] | None = None, **extra: Any
) -> Callable[[Callable[..., Any]], Declared]:
    """A stage asset whose output is a table in the Parquet store (polars by default)."""
    extra.setdefault("kinds", {"polars", "parquet"})
    return stage_asset(reads, pod, io_manager_key="parquet_io", **extra)


# what the report reads (every section's settings), and an analysis that declares none
ANALYSIS_READS = ("seed", "analyses", "robustness", "tournament", "llm", "prompts", "leaderboard.k",
                  "candidates.published_queries")  # fmt: skip
# what an analysis that asks the judge reads: the judge's settings and its prompts
JUDGE_READS = ("seed", "tournament", "llm", "prompts")


def analysis(
    section: Callable[..., Any] | None = None,
    reads: tuple[str, ...] = ANALYSIS_READS,
    **extra: Any,
) -> Callable[[Callable[..., Any]], Declared]:
    """The declaration of every analysis: a Parquet output, its section of the report (the
    report asset reads every analysis that declares one) and the config it reads (``reads``:
    its own keys, so another analysis's settings never re-version it)."""
    extra.setdefault("kinds", {"polars", "parquet"})
    attrs = {"io_manager_key": "parquet_io", **extra}
    return lambda fn: Declared(timed(fn), asset, attrs, section, tuple(reads))


def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose output carries the seconds it took in its metadata (``seconds``, unless it
    measured its own): which analysis is the build's long one, per materialisation."""

    @functools.wraps(fn)  # Dagster reads the parameters (inputs, resources) through it
    def run(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds = round(time.perf_counter() - t0, 2)
        if not isinstance(out, Output):
            return Output(out, metadata={"seconds": seconds})
        if "seconds" in out.metadata:
            return out
        return out.with_metadata({**out.metadata, "seconds": seconds})

    return run


def declared_in(modules: Iterable[ModuleType]) -> list[Declared]:
    """Every declaration in the modules, in module order; a name declared twice is an error."""
    found: dict[str, Declared] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, Declared):
                key = f"{value.asset_name}:{value.fn.__name__}"
                if key in found and found[key] is not value:
                    raise ValueError(f"{key} is declared twice ({module.__name__})")
                found[key] = value
    return list(found.values())


def input_files_asset(name: str, module: str, description: str):
    """An observable source asset for input files (``versions.input_versions``) in the package
    group of ``module`` (its declaring module's ``__name__``): their content hash is the data
    version, so a changed file marks what reads it unsynced (observed by each build and by the
    input files sensor)."""

    @observable_source_asset(name=name, group_name=package_of(module), description=description)
    def observe(pipeline: PipelineResource) -> DataVersion:
        return DataVersion(input_versions(pipeline.load())[name])

    return observe
