"""The single Dagster Definitions object of the saber code location."""

import os
from pathlib import Path

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    AssetSelection,
    Definitions,
    EnvVar,
    define_asset_job,
    in_process_executor,
    load_asset_checks_from_modules,
    load_assets_from_modules,
    multiprocess_executor,
)

from saber_assets.analyses import assets as analysis_assets
from saber_assets.analyses import report_assets
from saber_assets.annotations import assets as annotation_assets
from saber_assets.candidates import assets as candidate_assets
from saber_assets.corpus import assets as corpus_assets
from saber_assets.io_managers import WarehouseParquetIOManager
from saber_assets.leaderboard import assets as leaderboard_assets
from saber_assets.lib.partitions import annotation_partitions, domain_partitions
from saber_assets.lib.pods import check_pod_jobs, k8s_tags
from saber_assets.ontology import assets as ontology_assets
from saber_assets.ontology.domains import domain_keys
from saber_assets.ratings import assets as rating_assets
from saber_assets.resources import SaberSettings
from saber_assets.schedules import retriever_runs_backstop
from saber_assets.sensors import (
    input_files_sensor,
    observe_inputs,
    observe_registry,
    retriever_registry_sensor,
)
from saber_assets.settings import DEFAULT_CONFIG, SQL_DIR, LLMConfig, data_home, load_config
from saber_assets.signals import assets as signal_assets
from saber_assets.stages import SOURCE_ASSETS, STAGES
from saber_assets.tournament import assets as tournament_assets
from saber_assets.versions import asset_code_versions
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource
from saber_resources.templates import load_templates
from saber_resources.warehouse import Warehouse

# Modules whose assets do not depend on the config's partition counts.
STATIC_MODULES = [
    corpus_assets,
    ontology_assets,
    annotation_assets,
    signal_assets,
    candidate_assets,
    tournament_assets,
    rating_assets,
    leaderboard_assets,
    analysis_assets,
    report_assets,
]


def llm_resource(cfg: LLMConfig, prompts: dict[str, str] | None = None) -> LLMResource:
    """The LLM resource; ``prompts`` (task -> template file) are checked here, when the
    definitions load, so a bad template stops the build before any call."""
    fields = cfg.model_dump(exclude={"api_key_env"})
    api_key = EnvVar(cfg.api_key_env) if cfg.api_key_env else None
    load_templates(prompts or {})
    return LLMResource(**fields, api_key=api_key, prompts=prompts or {})


def stores_resource(cfg, home: Path) -> StoresResource:
    if cfg.stores.kind == "postgres":
        return StoresResource(kind="postgres", dsn=EnvVar(cfg.stores.dsn_env))
    return StoresResource(
        kind="duckdb",
        path=str(home / cfg.name / "stores.duckdb"),
        legacy_path=str(home / cfg.name / "warehouse.duckdb"),
    )


def with_code_versions(assets: list, cfg) -> list:
    """Every stage asset with its Dagster code version (``versions.asset_code_versions``): the
    config sections and code it reads and the versions upstream of it."""
    parents: dict[str, list[str]] = {}
    for a in assets:
        for spec in getattr(a, "specs", ()):
            parents[spec.key.to_user_string()] = [d.asset_key.to_user_string() for d in spec.deps]
    versions = asset_code_versions(cfg, parents)
    missing = sorted(set(parents) - set(versions) - set(SOURCE_ASSETS))
    if missing:  # a new asset must say what its version hashes
        raise ValueError(f"assets without an entry in stages.ASSET_INPUTS: {missing}")

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
    config_file: str | os.PathLike | None = None, home: Path | None = None
) -> Definitions:
    """Definitions for one pipeline config; outputs under ``home`` (default: $SABER_HOME or .saber/)."""
    config_file = str(config_file or os.environ.get("SABER_CONFIG") or DEFAULT_CONFIG)
    cfg = load_config(config_file)
    home = Path(home or data_home())
    parquet_dir = home / cfg.name / "parquet"
    # the Parquet assets at storage.base_uri (object stores through UPath); the warehouse's
    # views read the local layout
    parquet_uri = (
        f"{cfg.storage.base_uri.rstrip('/')}/{cfg.name}/parquet"
        if cfg.storage.base_uri
        else str(parquet_dir)
    )
    warehouse = Warehouse(
        path=str(home / cfg.name / "warehouse.duckdb"),
        parquet_dir=str(parquet_dir),
        sql_dir=str(SQL_DIR),
    )
    executor = in_process_executor if cfg.executor == "in_process" else multiprocess_executor
    chunked = annotation_assets.build_annotation_assets(
        annotation_partitions(cfg.annotations.chunks)
    )
    sharded = signal_assets.build_signal_assets(signal_assets.shard_partitions(cfg.signals.shards))
    # Domain partitions come from the config's ontology (SABER_CONFIG when Dagster loads this file).
    by_domain = domain_partitions(list(domain_keys(cfg.ontology).values()))
    per_domain = [
        *candidate_assets.build_candidate_assets(by_domain),
        *tournament_assets.build_tournament_assets(by_domain),
        *rating_assets.build_rating_assets(by_domain),
        *leaderboard_assets.build_run_assets(by_domain),
    ]
    checks = [a for a in per_domain if isinstance(a, AssetChecksDefinition)]
    per_domain = [a for a in per_domain if not isinstance(a, AssetChecksDefinition)]
    assets = [*load_assets_from_modules(STATIC_MODULES), *chunked, *sharded, *per_domain]

    assets = with_code_versions(assets, cfg)
    check_pod_jobs(cfg)
    jobs = [
        define_asset_job(
            stage.job,
            selection=AssetSelection.assets(*stage.assets),
            executor_def=executor,
            description=stage.description,
            tags=k8s_tags(stage.job, cfg),
        )
        for stage in STAGES
    ]
    jobs += [observe_inputs, observe_registry]
    return Definitions(
        assets=assets,
        asset_checks=[*load_asset_checks_from_modules(STATIC_MODULES), *checks],
        jobs=jobs,
        sensors=[retriever_registry_sensor, input_files_sensor],
        schedules=[retriever_runs_backstop],
        resources={
            "settings": SaberSettings(config_file=config_file, home=str(home)),
            "warehouse": warehouse,
            "stores": stores_resource(cfg, home),
            "llm": llm_resource(cfg.llm, cfg.prompt_paths()),
            "parquet_io": WarehouseParquetIOManager(base_dir=parquet_uri, warehouse=warehouse),
        },
        executor=executor,
    )


defs = make_definitions()
