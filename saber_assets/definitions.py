"""The single Dagster Definitions object of the saber code location."""

import os
from pathlib import Path

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    AssetSelection,
    Definitions,
    EnvVar,
    ExecutorDefinition,
    MultiPartitionsDefinition,
    PartitionsDefinition,
    define_asset_job,
    in_process_executor,
    load_assets_from_modules,
    multiprocess_executor,
)

from saber_assets.config import (
    DEFAULT_CONFIG,
    SQL_DIR,
    LLMConfig,
    PipelineConfig,
    data_home,
    load_config,
)
from saber_assets.declarations import STAGE_MODULES, stage_declarations
from saber_assets.io_managers import WarehouseParquetIOManager
from saber_assets.lib.declare import Declared
from saber_assets.lib.partitions import (
    annotation_partitions,
    domain_partitions,
    retriever_partitions,
    shard_partitions,
    training_partitions,
)
from saber_assets.ontology.domains import domain_keys
from saber_assets.orchestration.observe import OBSERVE_JOBS
from saber_assets.outputs import Outputs
from saber_assets.pipeline import PipelineResource, stores_resource
from saber_assets.pods import check_pod_jobs, k8s_tags, orchestrator_tags
from saber_assets.schedules import retriever_runs_backstop
from saber_assets.sensors import (
    build_discovery_sensor,
    build_sync_sensor,
    input_files_sensor,
    retriever_registry_sensor,
)
from saber_assets.stages import (
    DOMAIN_X_RETRIEVER,
    SOURCE_ASSETS,
    STAGES,
    stage_of_asset,
)
from saber_assets.versions import asset_code_versions
from saber_resources.llm import LLMResource
from saber_resources.templates import load_templates
from saber_resources.warehouse import Warehouse


def llm_resource(cfg: LLMConfig, prompts: dict[str, str] | None = None) -> LLMResource:
    """The LLM resource; ``prompts`` (task -> template file) are checked here, when the
    definitions load, so a bad template stops the build before any call."""
    fields = cfg.model_dump(exclude={"api_key_env"})
    api_key = EnvVar(cfg.api_key_env) if cfg.api_key_env else None
    load_templates(prompts or {})
    return LLMResource(**fields, api_key=api_key, prompts=prompts or {})


def stage_partitions(cfg: PipelineConfig) -> dict[str, PartitionsDefinition]:
    """Each partitioning of the stage table, with the config's chunk, shard and domain counts."""
    by_domain = domain_partitions(list(domain_keys(cfg.ontology).values()))
    return {
        "annotation chunk": annotation_partitions(cfg.annotations.chunks),
        "signal shard": shard_partitions(cfg.signals.shards),
        "domain": by_domain,
        "retriever": retriever_partitions,
        "training corpus": training_partitions,
        DOMAIN_X_RETRIEVER: MultiPartitionsDefinition(
            {"retriever": retriever_partitions, "domain": by_domain}
        ),
    }


def stage_executor(kind: str) -> ExecutorDefinition:
    """``k8s_job``: a pod per step (the cluster image has dagster-k8s); the others run in the
    run's own process or processes."""
    if kind == "k8s_job":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor
    return in_process_executor if kind == "in_process" else multiprocess_executor


def asset_modules(declared: list[Declared] | None = None) -> dict[str, str]:
    """Stage asset name -> the module that declares it (what its code version hashes)."""
    declared = stage_declarations() if declared is None else declared
    return {name: d.module for d in declared for name in d.asset_names}


def asset_reads(declared: list[Declared] | None = None) -> dict[str, tuple[str, ...]]:
    """Stage asset name -> the config sections it reads, as its declaration says; an asset
    that does not say is refused (its version would miss a change)."""
    declared = stage_declarations() if declared is None else declared
    silent = sorted(
        n for d in declared if not d.is_check and d.reads is None for n in d.asset_names
    )
    if silent:
        raise ValueError(
            f"assets that do not say which config sections they read (reads=): {silent}"
        )
    return {name: d.reads for d in declared if not d.is_check for name in d.asset_names}


def with_code_versions(
    assets: list, cfg: PipelineConfig, modules: dict[str, str], reads: dict[str, tuple[str, ...]]
) -> list:
    """Every stage asset with its Dagster code version (``versions.asset_code_versions``): the
    config sections it reads, the source its module runs and the versions upstream of it."""
    parents: dict[str, list[str]] = {}
    for a in assets:
        for spec in getattr(a, "specs", ()):
            parents[spec.key.to_user_string()] = [d.asset_key.to_user_string() for d in spec.deps]
    missing = sorted(set(parents) - set(reads) - set(SOURCE_ASSETS))
    if missing:
        raise ValueError(f"assets declared without a stage declaration: {missing}")
    versions = asset_code_versions(cfg, parents, modules, reads)

    def versioned(a):
        if not isinstance(a, AssetsDefinition) or not any(
            s.key.to_user_string() in versions for s in a.specs
        ):
            return a
        return a.map_asset_specs(
            lambda spec: spec.replace_attributes(code_version=versions[spec.key.to_user_string()])
        )

    return [versioned(a) for a in assets]


def make_definitions(
    config_file: str | os.PathLike | None = None,
    home: Path | None = None,
    cfg: PipelineConfig | None = None,
) -> Definitions:
    """Definitions for one pipeline config; outputs under ``home`` (default: $SABER_HOME or .saber/).
    ``cfg``: the config already loaded from ``config_file`` (the build reads the file once)."""
    config_file = str(config_file or os.environ.get("SABER_CONFIG") or DEFAULT_CONFIG)
    cfg = cfg or load_config(config_file)
    home = Path(home or data_home())
    parquet_dir = Outputs.of(cfg, home).parquet
    # the Parquet assets at storage.base_uri (object stores through UPath); the warehouse's
    # views read the local layout
    parquet_uri = (
        f"{cfg.storage.base_uri.rstrip('/')}/{cfg.name}/parquet"
        if cfg.storage.base_uri
        else str(parquet_dir)
    )
    warehouse = Warehouse(
        path=str(Outputs.of(cfg, home).warehouse),
        parquet_dir=str(parquet_dir),
        sql_dir=str(SQL_DIR),
    )
    check_pod_jobs(cfg)
    executor = stage_executor(cfg.executor)
    partitions = stage_partitions(cfg)
    declared = stage_declarations()
    built = [d.build(partitions, k8s_tags(stage_of_asset(d.asset_name).job, cfg)) for d in declared]
    checks = [b for b in built if isinstance(b, AssetChecksDefinition)]
    # the observable source assets (input files, the registry) are Dagster's own declarations
    sources = load_assets_from_modules(STAGE_MODULES)
    assets = [*sources, *(b for b in built if not isinstance(b, AssetChecksDefinition))]
    assets = with_code_versions(assets, cfg, asset_modules(declared), asset_reads(declared))
    # under the k8s executor every step has its own pod, sized by its asset's op tags: the run's
    # pod only orchestrates, and a job tag would size it like the heaviest step for nothing
    per_step = cfg.executor == "k8s_job"
    jobs = [
        define_asset_job(
            stage.job,
            selection=AssetSelection.assets(*stage.assets),
            executor_def=executor,
            description=stage.description,
            tags=orchestrator_tags() if per_step else k8s_tags(stage.job, cfg),
        )
        for stage in STAGES
    ]
    stage_jobs = list(jobs)
    jobs += list(OBSERVE_JOBS)
    return Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=jobs,
        sensors=[
            retriever_registry_sensor,
            input_files_sensor,
            build_sync_sensor(stage_jobs),
            build_discovery_sensor(cfg.discovery.minimum_interval_seconds),
        ],
        schedules=[retriever_runs_backstop],
        resources={
            "pipeline": PipelineResource(config_file=config_file, home=str(home)),
            "warehouse": warehouse,
            "stores": stores_resource(cfg, home),
            "llm": llm_resource(cfg.llm, cfg.prompt_paths()),
            "parquet_io": WarehouseParquetIOManager(base_dir=parquet_uri, warehouse=warehouse),
        },
        executor=executor,
    )


defs = make_definitions()
