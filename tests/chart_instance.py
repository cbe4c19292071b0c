"""The instance ``dagster.yaml`` the official Dagster chart renders from its values, in Python.

A transcription of the chart's ``templates/configmap-instance.yaml`` and the helpers it includes
(``deploy/helm/chart/templates/``: ``dagsterYaml.runCoordinator.queued``,
``dagsterYaml.concurrency``, ``dagsterYaml.computeLogManager.custom``, the PostgreSQL, scheduler
and K8s run-launcher blocks), for the values keys this project sets. A values key under a
section the instance config is rendered from, that this renderer does not know, is an error
(``UnknownValuesKey``): a new setting cannot slip past the loading test unrendered. The chart's
own guard (``fail`` when both run limits are set) is reproduced too.
"""

from __future__ import annotations

from collections.abc import Iterator

import yaml

# values sections that feed the instance config (the rest: pods, images, services)
INSTANCE_SECTIONS = {
    "postgresql", "dagsterDaemon", "runLauncher", "concurrency", "computeLogManager",
    "telemetry", "scheduler", "retention", "pythonLogs", "additionalInstanceConfig", "ui",
}  # fmt: skip
# the leaves (or whole sub-trees, ending in ".*") this renderer turns into instance config; keys
# the chart reads only for the pods it creates (e.g. the daemon's own resources) are listed too
RENDERED = {
    "postgresql.enabled", "postgresql.postgresqlHost", "postgresql.postgresqlUsername",
    "postgresql.postgresqlPassword", "postgresql.postgresqlDatabase", "postgresql.service.port",
    "postgresql.postgresqlParams.*", "postgresql.postgresqlScheme",
    "dagsterDaemon.enabled", "dagsterDaemon.runCoordinator.enabled",
    "dagsterDaemon.runCoordinator.type",
    "dagsterDaemon.runCoordinator.config.queuedRunCoordinator.maxConcurrentRuns",
    "dagsterDaemon.runCoordinator.config.queuedRunCoordinator.tagConcurrencyLimits",
    "dagsterDaemon.runCoordinator.config.queuedRunCoordinator.dequeueIntervalSeconds",
    "dagsterDaemon.runCoordinator.config.queuedRunCoordinator.dequeueUseThreads",
    "dagsterDaemon.runCoordinator.config.queuedRunCoordinator.dequeueNumWorkers",
    "dagsterDaemon.runRetries.enabled", "dagsterDaemon.runRetries.maxRetries",
    "dagsterDaemon.runRetries.retryOnAssetOrOpFailure",
    "dagsterDaemon.runMonitoring.enabled", "dagsterDaemon.runMonitoring.startTimeoutSeconds",
    "dagsterDaemon.runMonitoring.cancelTimeoutSeconds",
    "dagsterDaemon.runMonitoring.maxRuntimeSeconds",
    "dagsterDaemon.runMonitoring.maxResumeRunAttempts",
    "dagsterDaemon.runMonitoring.pollIntervalSeconds",
    "dagsterDaemon.runMonitoring.freeSlotsAfterRunEndSeconds",
    "runLauncher.type", "runLauncher.config.k8sRunLauncher.runK8sConfig.*",
    "runLauncher.config.k8sRunLauncher.failPodOnRunFailure",
    "runLauncher.config.k8sRunLauncher.imagePullPolicy",
    "runLauncher.config.k8sRunLauncher.jobNamespace",
    "runLauncher.config.k8sRunLauncher.envConfigMaps.*",
    "runLauncher.config.k8sRunLauncher.envSecrets.*",
    "runLauncher.config.k8sRunLauncher.volumes.*",
    "runLauncher.config.k8sRunLauncher.volumeMounts.*",
    "concurrency.enabled", "concurrency.pools.defaultLimit", "concurrency.pools.granularity",
    "concurrency.pools.opGranularityRunBuffer", "concurrency.runs.maxConcurrentRuns",
    "concurrency.runs.tagConcurrencyLimits.*",
    "computeLogManager.type", "computeLogManager.config.customComputeLogManager.module",
    "computeLogManager.config.customComputeLogManager.class",
    "computeLogManager.config.customComputeLogManager.config.*",
    "computeLogManager.config.localComputeLogManager.*",
    "telemetry.enabled",
    # the daemon's own pod (not instance config)
    "dagsterDaemon.labels.*", "dagsterDaemon.env.*", "dagsterDaemon.volumes.*",
    "dagsterDaemon.volumeMounts.*", "dagsterDaemon.podSecurityContext.*",
    "dagsterDaemon.securityContext.*", "dagsterDaemon.resources.*",
}  # fmt: skip


class UnknownValuesKey(KeyError):
    """A values key the renderer cannot turn into instance config: extend it, or the test."""


class ChartFail(ValueError):
    """The chart's own ``fail``: Helm refuses to render these values."""


def leaves(tree, prefix: str = "") -> Iterator[str]:
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix


def check_known(project_values: dict) -> None:
    """Every key of the project's own values under an instance section is one this renders."""
    for path in leaves(project_values):
        if path.split(".")[0] not in INSTANCE_SECTIONS:
            continue
        known = path in RENDERED or any(
            r.endswith(".*") and (path == r[:-2] or path.startswith(r[:-1])) for r in RENDERED
        )
        if not known:
            raise UnknownValuesKey(
                f"values key {path!r} is not rendered by this test's chart transcription"
            )


def merge(defaults, values):
    """Helm's merge of a user's values over the chart's: maps key by key; lists and scalars replace."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        out = dict(defaults)
        for k, v in values.items():
            out[k] = merge(defaults[k], v) if k in defaults else v
        return out
    return values


def _postgres(v: dict) -> dict:
    pg = v["postgresql"]
    cfg = {
        "username": pg["postgresqlUsername"],
        "password": {"env": "DAGSTER_PG_PASSWORD"},
        "hostname": pg["postgresqlHost"],
        "db_name": pg["postgresqlDatabase"],
        "port": pg["service"]["port"],
        "params": pg.get("postgresqlParams") or {},
    }
    if pg.get("postgresqlScheme"):
        cfg["scheme"] = pg["postgresqlScheme"]
    return {"postgres_db": cfg}


def _queued(v: dict) -> dict:
    q = v["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"] or {}
    out = {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"}
    config = {}
    if q.get("maxConcurrentRuns"):
        config["max_concurrent_runs"] = q["maxConcurrentRuns"]
    if q.get("tagConcurrencyLimits"):
        config["tag_concurrency_limits"] = q["tagConcurrencyLimits"]
    if q.get("dequeueIntervalSeconds"):
        config["dequeue_interval_seconds"] = q["dequeueIntervalSeconds"]
    # the chart's defaults carry these two, so the chart release that has them renders them
    # (the vendored helper is an older copy without them)
    if q.get("dequeueUseThreads") is not None:
        config["dequeue_use_threads"] = q["dequeueUseThreads"]
    if q.get("dequeueNumWorkers"):
        config["dequeue_num_workers"] = q["dequeueNumWorkers"]
    if any(x not in (None, [], {}, "") for x in q.values()):
        # with nothing under it the chart writes `config:` (null), which dagster refuses
        out["config"] = config or None
    return out


def _concurrency(v: dict) -> dict:
    c = v["concurrency"]
    pools, runs = c.get("pools") or {}, c.get("runs") or {}
    rc = v["dagsterDaemon"]["runCoordinator"]
    if rc.get("enabled") and rc.get("type") == "QueuedRunCoordinator":
        q = rc["config"]["queuedRunCoordinator"] or {}
        if runs.get("maxConcurrentRuns") is not None and q.get("maxConcurrentRuns") is not None:
            raise ChartFail(
                "Cannot set both concurrency.runs.maxConcurrentRuns and "
                "dagsterDaemon.runCoordinator.config.queuedRunCoordinator.maxConcurrentRuns"
            )
        if runs.get("tagConcurrencyLimits") and q.get("tagConcurrencyLimits"):
            raise ChartFail("Cannot set both tagConcurrencyLimits")
    out = {}
    if any(
        pools.get(k) is not None for k in ("defaultLimit", "opGranularityRunBuffer")
    ) or pools.get("granularity"):
        p = {}
        if pools.get("defaultLimit") is not None:
            p["default_limit"] = pools["defaultLimit"]
        if pools.get("granularity"):
            p["granularity"] = pools["granularity"]
        if pools.get("opGranularityRunBuffer") is not None:
            p["op_granularity_run_buffer"] = pools["opGranularityRunBuffer"]
        out["pools"] = p
    if runs.get("maxConcurrentRuns") is not None or runs.get("tagConcurrencyLimits"):
        r = {}
        if runs.get("maxConcurrentRuns") is not None:
            r["max_concurrent_runs"] = runs["maxConcurrentRuns"]
        if runs.get("tagConcurrencyLimits"):
            r["tag_concurrency_limits"] = runs["tagConcurrencyLimits"]
        out["runs"] = r
    return out


def _k8s_launcher(v: dict, namespace: str, release: str) -> dict:
    k = v["runLauncher"]["config"]["k8sRunLauncher"]
    cfg = {
        "load_incluster_config": True,
        "job_namespace": k.get("jobNamespace") or namespace,
        "image_pull_policy": k.get("imagePullPolicy") or "Always",
        "service_account_name": f"{release}-dagster",
        "dagster_home": "/opt/dagster/dagster_home",
        "instance_config_map": f"{release}-dagster-instance",
        "postgres_password_secret": v["global"]["postgresqlSecretName"],
        "env_config_maps": [f"{release}-dagster-pipeline-env", *(k.get("envConfigMaps") or [])],
        "env_secrets": [
            s["name"] if isinstance(s, dict) else s for s in (k.get("envSecrets") or [])
        ],
        "volume_mounts": k.get("volumeMounts") or [],
        "volumes": k.get("volumes") or [],
        "fail_pod_on_run_failure": bool(k.get("failPodOnRunFailure")),
    }
    if k.get("runK8sConfig"):
        rk = k["runK8sConfig"]
        cfg["run_k8s_config"] = {
            snake: rk[camel]
            for camel, snake in (
                ("containerConfig", "container_config"),
                ("podSpecConfig", "pod_spec_config"),
                ("podTemplateSpecMetadata", "pod_template_spec_metadata"),
                ("jobSpecConfig", "job_spec_config"),
                ("jobMetadata", "job_metadata"),
            )  # fmt: skip
            if rk.get(camel)
        }
    return {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": cfg}


def _compute_logs(v: dict) -> dict:
    c = v["computeLogManager"]
    if c["type"] == "CustomComputeLogManager":
        cc = c["config"]["customComputeLogManager"]
        return {"module": cc["module"], "class": cc["class"], "config": cc.get("config") or {}}
    if c["type"] == "LocalComputeLogManager":
        local = (c.get("config") or {}).get("localComputeLogManager") or {}
        config = {"base_dir": local["baseDir"]}
        if local.get("pollingTimeout") is not None:
            config["polling_timeout"] = local["pollingTimeout"]
        return {
            "module": "dagster.core.storage.local_compute_log_manager",
            "class": "LocalComputeLogManager",
            "config": config,
        }
    if c["type"] == "NoOpComputeLogManager":
        return {"module": "dagster.core.storage.noop_compute_log_manager",
                "class": "NoOpComputeLogManager"}  # fmt: skip
    raise UnknownValuesKey(f"computeLogManager.type {c['type']!r} is not transcribed here")


def render_instance(values: dict, namespace: str = "saber", release: str = "saber") -> dict:
    """The instance config (as a dict) the chart renders from merged ``values``."""
    v = values
    inst: dict = {}
    if v["scheduler"]["type"] == "DagsterDaemonScheduler":
        inst["scheduler"] = {"module": "dagster.core.scheduler", "class": "DagsterDaemonScheduler"}
    storage = _postgres(v)
    for key, cls in (("schedule_storage", "PostgresScheduleStorage"),
                     ("run_storage", "PostgresRunStorage"),
                     ("event_log_storage", "PostgresEventLogStorage")):  # fmt: skip
        module = {"schedule_storage": "dagster_postgres.schedule_storage",
                  "run_storage": "dagster_postgres.run_storage",
                  "event_log_storage": "dagster_postgres.event_log"}[key]  # fmt: skip
        inst[key] = {"module": module, "class": cls, "config": storage}
    if v["runLauncher"]["type"] != "K8sRunLauncher":
        raise UnknownValuesKey(f"runLauncher.type {v['runLauncher']['type']!r} is not transcribed")
    inst["run_launcher"] = _k8s_launcher(v, namespace, release)
    d = v["dagsterDaemon"]
    if d["enabled"] and d["runCoordinator"]["enabled"]:
        if d["runCoordinator"]["type"] != "QueuedRunCoordinator":
            raise UnknownValuesKey("only the QueuedRunCoordinator is transcribed")
        inst["run_coordinator"] = _queued(v)
    elif d["enabled"]:
        inst["run_coordinator"] = {
            "module": "dagster._core.run_coordinator.sync_in_memory_run_coordinator",
            "class": "SyncInMemoryRunCoordinator",
        }
    inst["compute_logs"] = _compute_logs(v)
    if d["enabled"] and d["runMonitoring"]["enabled"]:
        m = d["runMonitoring"]
        rm = {"enabled": True, "start_timeout_seconds": m["startTimeoutSeconds"]}
        for camel, snake in (("cancelTimeoutSeconds", "cancel_timeout_seconds"),
                             ("maxRuntimeSeconds", "max_runtime_seconds"),
                             ("maxResumeRunAttempts", "max_resume_run_attempts")):  # fmt: skip
            if m.get(camel) is not None:
                rm[snake] = m[camel]
        rm["poll_interval_seconds"] = m["pollIntervalSeconds"]
        rm["free_slots_after_run_end_seconds"] = m["freeSlotsAfterRunEndSeconds"]
        inst["run_monitoring"] = rm
    if d["enabled"] and d["runRetries"]["enabled"]:
        r = d["runRetries"]
        inst["run_retries"] = {"enabled": True}
        if r.get("maxRetries"):
            inst["run_retries"]["max_retries"] = r["maxRetries"]
        if "retryOnAssetOrOpFailure" in r:
            inst["run_retries"]["retry_on_asset_or_op_failure"] = r["retryOnAssetOrOpFailure"]
    inst["telemetry"] = {"enabled": v["telemetry"]["enabled"]}
    if v["concurrency"].get("enabled"):
        inst["concurrency"] = _concurrency(v)
    return inst


def dump(instance: dict) -> str:
    return yaml.safe_dump(instance, sort_keys=False)
