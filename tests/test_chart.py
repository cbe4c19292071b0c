"""deploy/helm/values.yaml as the official chart renders it: the instance config every Dagster pod
loads, loaded with dagster's own validation, and the merged values against the chart's schema."""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

import pytest
import yaml

from saber_assets.config import REPO_ROOT

from .chart_instance import ChartFail, UnknownValuesKey, check_known, merge, render_instance

HELM = REPO_ROOT / "deploy" / "helm"
CHART = HELM / "chart"


def _values() -> dict:
    return yaml.safe_load((HELM / "values.yaml").read_text())


def _defaults() -> dict:
    return yaml.safe_load((CHART / "chart-defaults.yaml").read_text())


def load_instance(directory: Path, instance: dict) -> dict:
    """Write the instance config and load it as a pod does at start-up: dagster's instance-config
    validation (schema and the cross-checks, e.g. run limits vs the concurrency block), then each
    configurable class's own config schema (run launcher, storages, coordinator, compute logs)."""
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config
    from dagster._serdes.config_class import ConfigurableClassData

    directory.mkdir(parents=True, exist_ok=True)
    text = yaml.dump(instance, Dumper=_NoAliases, sort_keys=False)
    (directory / "dagster.yaml").write_text(text)
    config, _ = dagster_instance_config(str(directory))
    for key, block in config.items():
        if isinstance(block, dict) and {"module", "class"} <= set(block):
            # ConfigurableClassData reads legacy module names (dagster.core.*) as dagster does
            data = ConfigurableClassData(block["module"], block["class"], "{}")
            klass = getattr(importlib.import_module(data.module_name), data.class_name)
            result = process_config(klass.config_type(), block.get("config") or {})
            assert result.success, f"{key}: {[e.message for e in result.errors]}"
    return config


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def test_the_instance_config_the_chart_renders_loads_in_dagster(tmp_path, monkeypatch):
    # a pod gets the password from the chart's postgresql secret as DAGSTER_PG_PASSWORD
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "from-the-secret")
    values = _values()
    check_known(values)
    config = load_instance(tmp_path / "pod", render_instance(merge(_defaults(), values)))
    # one run limit, in the concurrency block; runs wait for pool slots before they launch
    assert not (config["run_coordinator"].get("config") or {}).get("max_concurrent_runs")
    assert config["concurrency"]["runs"]["max_concurrent_runs"] == 24
    assert config["concurrency"]["pools"] == {"default_limit": 4, "granularity": "run"}
    assert config["run_launcher"]["class"] == "K8sRunLauncher"
    assert config["compute_logs"]["class"] == "LocalComputeLogManager"
    assert config["compute_logs"]["config"] == {"base_dir": "/data/dagster-compute-logs"}
    # the local instance (saber build / saber ui) loads as well
    local = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    load_instance(tmp_path / "local", local)


def test_the_old_double_run_limit_is_refused_as_dagster_refuses_it(tmp_path, monkeypatch):
    from dagster._core.errors import DagsterInvalidConfigError

    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "from-the-secret")
    values = _values()
    old = copy.deepcopy(values)
    old["concurrency"].pop("runs", None)
    old["dagsterDaemon"]["runCoordinator"]["config"] = {
        "queuedRunCoordinator": {"maxConcurrentRuns": 24}
    }
    with pytest.raises(
        DagsterInvalidConfigError, match="incompatible with the `concurrency > runs`"
    ):
        load_instance(tmp_path / "old", render_instance(merge(_defaults(), old)))
    both = copy.deepcopy(values)
    both["dagsterDaemon"]["runCoordinator"]["config"] = {
        "queuedRunCoordinator": {"maxConcurrentRuns": 24}
    }
    with pytest.raises(ChartFail, match="Cannot set both"):  # the chart itself fails to render
        render_instance(merge(_defaults(), both))


def test_a_values_key_the_transcription_does_not_render_fails_the_test():
    values = _values()
    values["dagsterDaemon"]["sensors"] = {"useThreads": True}
    with pytest.raises(UnknownValuesKey, match="dagsterDaemon.sensors.useThreads"):
        check_known(values)
    check_known({"dagsterWebserver": {"replicaCount": 3}})  # not an instance section


def _k8s_definitions_path() -> Path:
    """kubernetes-validate's bundled definitions of the Kubernetes version the tests pin."""
    import kubernetes_validate

    from .test_deploy import K8S_VERSION

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    return root / f"v{K8S_VERSION}-local" / "_definitions.json"


def _schema_errors(values: dict) -> list[str]:
    """Errors of ``values`` against the chart's schema; its Kubernetes ``$ref``s (a web copy of
    ``_definitions.json``) are served from kubernetes-validate's bundled copy of the same file."""
    import jsonschema
    from referencing import Registry
    from referencing.jsonschema import DRAFT7

    schema = json.loads((CHART / "values.schema.json").read_text())
    bundled = json.loads(_k8s_definitions_path().read_text())["$defs"]
    # the chart points at "#/definitions/…", the bundled file keeps them under "$defs"
    k8s = DRAFT7.create_resource({"definitions": bundled, "$defs": bundled})

    def retrieve(uri: str):
        if not uri.endswith("/_definitions.json"):
            raise LookupError(f"the chart schema refers to {uri}, which is not bundled")
        return k8s

    # Helm validates with gojsonschema (draft 7: a $ref overrides its sibling keywords), against
    # the web copy's non-strict definitions
    validator = jsonschema.Draft7Validator(schema, registry=Registry(retrieve=retrieve))
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(values)]


def test_the_merged_values_validate_against_the_charts_schema():
    merged = merge(_defaults(), _values())
    assert _schema_errors(merged) == []
    # a key the chart requires, missing after the merge (as when a values file sets it to null)
    broken = copy.deepcopy(merged)
    del broken["runLauncher"]["config"]["k8sRunLauncher"]["imagePullPolicy"]
    errors = _schema_errors(broken)
    assert len(errors) == 1 and errors[0].startswith("runLauncher/config/k8sRunLauncher:")
    # without the defaults the project's values lack what the chart supplies
    assert len(_schema_errors(_values())) > 10
