"""deploy/ read against the code and the Kubernetes schemas, without a cluster or a Docker engine:
rename a pool, an env var, a secret key, a port or a job in one place and a test here fails."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from saber_assets.config import REPO_ROOT, load_config

DEPLOY = REPO_ROOT / "deploy"
K8S_VERSION = "1.33.0"


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _values() -> dict:
    return yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())


def _user_code() -> dict:
    [dep] = _values()["dagster-user-deployments"]["deployments"]
    return dep


def _env(dep: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in dep["env"]}


def _merge(base, patch):
    """Strategic merge as kustomize does it for these patches: maps merge, containers merge by
    name, other lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and all("name" in x for x in base + patch)
    ):
        by_name = {x["name"]: x for x in base}
        return [_merge(by_name[p["name"]], p) if p["name"] in by_name else p for p in patch] + [
            x for x in base if x["name"] not in {p["name"] for p in patch}
        ]
    return patch


def _vllm_objects() -> list[dict]:
    """deploy/vllm as `kubectl apply -k` renders it."""
    kustom = yaml.safe_load((DEPLOY / "vllm" / "kustomization.yaml").read_text())
    objects = [d for r in kustom["resources"] for d in _docs(DEPLOY / "vllm" / r)]
    for p in kustom["patches"]:
        patch = yaml.safe_load((DEPLOY / "vllm" / p["path"]).read_text())
        [target] = [
            o
            for o in objects
            if (o["kind"], o["metadata"]["name"]) == (patch["kind"], patch["metadata"]["name"])
        ]
        objects[objects.index(target)] = _merge(target, patch)
    return objects


def _by_kind(objects: list[dict], kind: str) -> dict:
    [obj] = [o for o in objects if o["kind"] == kind]
    return obj


def test_manifests_validate_against_the_kubernetes_schema():
    import kubernetes_validate

    objects = [*_vllm_objects(), *_docs(DEPLOY / "k8s" / "storage.yaml")]
    assert {o["kind"] for o in objects} == {"Deployment", "Service", "PersistentVolumeClaim", "Job"}
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    # the shared volume is RWX on a named class, and its folders get the runtime uid's ownership
    storage = {o["kind"]: o for o in _docs(DEPLOY / "k8s" / "storage.yaml")}
    claim, init = storage["PersistentVolumeClaim"], storage["Job"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"] and claim["spec"]["storageClassName"]
    uid = _user_code()["podSecurityContext"]["runAsUser"]
    script = " ".join(init["spec"]["template"]["spec"]["containers"][0]["args"])
    compute_logs = _values()["computeLogManager"]["config"]["localComputeLogManager"]
    for folder in (_env(_user_code())["SABER_HOME"], compute_logs["baseDir"]):
        assert folder in script.split("&&")[0] and folder in script.split("&&")[1]
    assert f"chown {uid}:{uid}" in script
    assert init["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": claim["metadata"]["name"]
    }
    # the run pods' default container config and each job's tag, inside a Pod
    run = _values()["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "run"},
        "spec": {
            **run["podSpecConfig"],
            "containers": [{"name": "run", "image": "saber", **run["containerConfig"]}],
        },
    }
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    broken = copy.deepcopy(pod)
    broken["spec"]["containers"][0]["resources"]["requets"] = {"cpu": "1"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_vllm_serves_what_the_cluster_config_calls(monkeypatch):
    objects = _vllm_objects()
    deploy = _by_kind(objects, "Deployment")
    [c] = deploy["spec"]["template"]["spec"]["containers"]
    service = _by_kind(objects, "Service")
    env = _env(_user_code())
    for name in ("SABER_LLM_BASE_URL", "SABER_LLM_MODEL", "SABER_STORAGE_URI", "SABER_HOME"):
        monkeypatch.delenv(name, raising=False)
    cfg = load_config(REPO_ROOT / "configs" / "cluster.yaml")
    # the config's defaults and the values' env point at the same service, port and model
    for base_url in (cfg.llm.base_url, env["SABER_LLM_BASE_URL"]):
        url = urlparse(base_url)
        assert url.hostname == service["metadata"]["name"] and url.path == "/v1"
        assert url.port == service["spec"]["ports"][0]["port"] == c["ports"][0]["containerPort"]
    assert c["args"][0] == cfg.llm.model == env["SABER_LLM_MODEL"]
    assert cfg.llm.backend == "openai" and cfg.llm.json_mode == "structured_outputs"
    # the env overrides reach the config
    monkeypatch.setenv("SABER_LLM_MODEL", "Org/Other-7B")
    monkeypatch.setenv("SABER_LLM_BASE_URL", "http://judge:9000/v1")
    moved = load_config(REPO_ROOT / "configs" / "cluster.yaml")
    assert (moved.llm.model, moved.llm.base_url) == ("Org/Other-7B", "http://judge:9000/v1")
    # the API key: one Secret key, read by vllm serve and by the openai backend via EnvVar
    keys = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "valueFrom" in e}
    assert keys[cfg.llm.api_key_env] == {"name": "saber-llm", "key": cfg.llm.api_key_env}
    assert {"name": "saber-llm"} in _user_code()["envSecrets"]
    # probes on /health, a model cache volume, memory-backed /dev/shm, a GPU
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/health"
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    claim = volumes[mounts["/models"]]["persistentVolumeClaim"]["claimName"]
    assert claim == _by_kind(objects, "PersistentVolumeClaim")["metadata"]["name"]
    assert "--download-dir=/models" in c["args"]
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_helm_values_name_what_the_code_reads(monkeypatch):
    from saber_assets import definitions

    dep = _user_code()
    env = _env(dep)
    # the code location the image serves, the config it loads, where outputs go
    assert dep["dagsterApiGrpcArgs"] == ["-m", "saber_assets.definitions"]
    config = Path(env["SABER_CONFIG"])
    assert config.parent == Path("/opt/saber/configs")
    assert (REPO_ROOT / "configs" / config.name).exists()
    src = (REPO_ROOT / "saber_assets" / "definitions.py").read_text()
    assert 'os.environ.get("SABER_CONFIG")' in src
    assert 'os.environ.get("SABER_HOME"' in (REPO_ROOT / "saber_resources" / "home.py").read_text()
    # every SABER_* variable the cluster config expands is set by the values
    used = set(re.findall(r"\$\{(SABER_[A-Z_]+)", (REPO_ROOT / "configs/cluster.yaml").read_text()))
    assert used and used <= set(env)
    # the stores' DSN variable comes from a Secret the guide tells you to create
    cfg = load_config(REPO_ROOT / "configs" / "cluster.yaml")
    guide = (DEPLOY / "README.md").read_text()
    assert cfg.stores.kind == "postgres"
    assert {"name": "saber-stores"} in dep["envSecrets"]
    assert f"--from-literal={cfg.stores.dsn_env}=" in guide
    assert "--from-literal=VLLM_API_KEY=" in guide and "postgresql-password" in guide
    assert _values()["global"]["postgresqlSecretName"] in guide
    # volumes: the claim the pods mount exists
    claims = {d["metadata"]["name"] for d in _docs(DEPLOY / "k8s" / "storage.yaml")}
    for vols in (dep["volumes"], _values()["dagsterWebserver"]["volumes"]):
        assert {
            v["persistentVolumeClaim"]["claimName"] for v in vols if "persistentVolumeClaim" in v
        } <= claims
    # pools: the only pool the assets use is the one the values limit (and the guide names)
    defs = definitions.make_definitions(REPO_ROOT / "configs" / "cluster.yaml")
    pools = {a.op.pool for a in defs.get_repository_def().assets_defs_by_key.values() if a.op.pool}
    assert pools == {"llm"}
    assert _values()["concurrency"]["enabled"] and "pool `llm`" in guide
    # the image: user, port, module, config path
    docker = (DEPLOY / "Dockerfile").read_text()
    uid = int(re.search(r"ARG UID=(\d+)", docker).group(1))
    assert dep["podSecurityContext"]["runAsUser"] == uid
    run_pod = _values()["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]
    assert run_pod["podSpecConfig"]["securityContext"]["runAsUser"] == uid
    assert f"EXPOSE {dep['port']}" in docker
    assert '"-m", "saber_assets.definitions"' in docker
    assert f"SABER_CONFIG={env['SABER_CONFIG']}" in docker


def test_every_job_sizes_its_pods_through_the_launchers_tag():
    from dagster_k8s.job import get_user_defined_k8s_config

    from saber_assets import definitions
    from saber_assets.pods import K8S_TAG, pod_size
    from saber_assets.signals.sizing import shard_pod_memory_gib

    path = REPO_ROOT / "configs" / "cluster.yaml"
    cfg = load_config(path)
    defs = definitions.make_definitions(path)
    jobs = {j.name: j for j in defs.get_repository_def().get_all_jobs()}
    built = {n for n in jobs if n.startswith("build_")}
    assert {"build_signal_shards", "build_annotations", "build_domains", "build_runs"} <= built
    sizes = {}
    for name in built:
        parsed = get_user_defined_k8s_config(jobs[name].tags)  # the launcher's own parser
        res = parsed.container_config["resources"]
        assert res["limits"]["memory"] == res["requests"]["memory"]
        sizes[name] = res["requests"]
        assert K8S_TAG in jobs[name].tags
    # the shards cover the expected corpus: no last shard swallowing the rest
    assert cfg.signals.shards * cfg.signals.rows_per_shard >= cfg.pods.expected_problems
    # the cluster config keeps viability summaries: a block of full rows per thread
    assert cfg.signals.layout == "summaries"
    threads = cfg.signals.threads
    gib = shard_pod_memory_gib(
        cfg.pods.expected_problems, cfg.signals.rows_per_shard, summaries_threads=threads
    )
    assert sizes["build_signal_shards"] == {"cpu": str(cfg.signals.threads), "memory": f"{gib}Gi"}
    # too few shards: the last one takes the rest of the corpus, and its pod is sized for it
    few = cfg.model_copy(update={"signals": cfg.signals.model_copy(update={"shards": 16})})
    rows = cfg.pods.expected_problems - 15 * cfg.signals.rows_per_shard
    assert pod_size("build_signal_shards", few).memory == (
        f"{shard_pod_memory_gib(cfg.pods.expected_problems, rows, summaries_threads=threads)}Gi"
    )
    assert sizes["build_annotations"] == sizes["build_domains"] == cfg.pods.llm.model_dump()
    # the jobs the guide tells an operator to launch exist
    guide = (DEPLOY / "README.md").read_text()
    named = set(re.findall(r"\bbuild_[a-z_]+\b", guide))
    assert named and named <= built, named - built
    # a job `pods.jobs` names must exist (a renamed one would size nothing)
    from saber_assets.pods import check_pod_jobs

    check_pod_jobs(cfg.model_copy(update={"pods": cfg.pods.model_copy(update={"jobs": {
        "build_runs": cfg.pods.runs}})}))  # fmt: skip
    stale = cfg.pods.model_copy(update={"jobs": {"build_signal_index": cfg.pods.runs}})
    with pytest.raises(ValueError, match="pods.jobs: no job build_signal_index; the jobs: build_"):
        check_pod_jobs(cfg.model_copy(update={"pods": stale}))


def test_ui_launched_runs_size_their_step_pods_like_the_build_under_the_k8s_executor(
    tmp_path, monkeypatch
):
    """A UI launch runs the implicit asset job, without the stage jobs' tags: under
    `executor: k8s_job` each step's pod is sized by its asset's op tags instead, read by
    dagster-k8s's own parser from the execution plan the step handler reads."""
    from dagster._core.definitions.assets.job.asset_job import IMPLICIT_ASSET_JOB_NAME
    from dagster._core.execution.api import create_execution_plan
    from dagster_k8s.job import get_user_defined_k8s_config

    from saber_assets import definitions
    from saber_assets.pods import pod_size
    from saber_assets.stages import STAGES

    text = (REPO_ROOT / "configs" / "cluster.yaml").read_text()
    assert "executor: in_process" in text
    path = tmp_path / "cluster.yaml"
    path.write_text(text.replace("executor: in_process", "executor: k8s_job", 1))
    cfg = load_config(path)
    for var in (cfg.llm.api_key_env, cfg.stores.dsn_env):  # the plan resolves the resources
        monkeypatch.setenv(var, "unused")
    defs = definitions.make_definitions(path)
    repo = defs.get_repository_def()
    jobs = {j.name: j for j in repo.get_all_jobs()}
    implicit = repo.get_implicit_global_asset_job_def()
    assert implicit.name == IMPLICIT_ASSET_JOB_NAME
    assert implicit.executor_def.name == "k8s"
    plan = create_execution_plan(implicit)
    op_of = {k.to_user_string(): a.op.name for k, a in repo.assets_defs_by_key.items()}
    steps = {step.key: step for step in plan.steps}
    want, got = {}, {}
    for stage in STAGES:
        # the run's pod only orchestrates: no size, but the token to launch the step pods
        run_pod = get_user_defined_k8s_config(jobs[stage.job].tags)
        assert run_pod.container_config == {}
        assert run_pod.pod_spec_config == {"automount_service_account_token": True}
        assert run_pod.pod_template_spec_metadata == {"labels": {"saber/launches": "steps"}}
        size = pod_size(stage.job, cfg)
        for name in stage.assets:
            res = get_user_defined_k8s_config(steps[op_of[name]].tags).container_config
            res = res["resources"]
            assert res["limits"]["memory"] == res["requests"]["memory"]
            got[name] = res["requests"]
            want[name] = {"cpu": size.cpu, "memory": size.memory}
    assert got == want
    # the shard step asks for the shard estimate, not the default pod
    assert got["pair_signal_shards"] != got["corpus"]


def test_shard_pod_memory_grows_with_the_corpus_and_the_shard():
    from saber_assets.signals.sizing import shard_memory_bytes, shard_pod_memory_gib

    small, big = shard_memory_bytes(10_000, 2048), shard_memory_bytes(283_000, 2048)
    assert big > small and shard_memory_bytes(283_000, 8192) > big
    assert shard_pod_memory_gib(283_000, 2048) >= big * 1.5 / 2**30


def test_the_first_pass_pod_holds_every_threads_row_histograms():
    from saber_assets.config import PipelineConfig
    from saber_assets.pods import pod_size
    from saber_assets.signals.sizing import bounds_memory_bytes

    one, four = bounds_memory_bytes(283_000, 16, 1), bounds_memory_bytes(283_000, 16, 4)
    assert four - one == 3 * 283_000 * 16 * 16 * 4  # one (n, bins, bins) uint32 per thread
    cfg = PipelineConfig.model_validate(
        {
            "corpus": {"sources": [{"name": "math", "bundled": "math"}]},
            "signals": {"threads": 8, "bound_bins": 32},
            "pods": {"expected_problems": 1_000_000},
        }
    )
    size = pod_size("build_signal_inputs", cfg)
    assert size.cpu == "8"
    assert int(size.memory.removesuffix("Gi")) * 2**30 >= 9 * 1_000_000 * 32 * 32 * 4 * 1.5


def test_dockerfiles_cache_dependencies_run_unprivileged_and_pin_vllm():
    code = (DEPLOY / "Dockerfile").read_text()
    lines = [ln.strip() for ln in code.splitlines() if ln.strip() and not ln.startswith("#")]
    deps = next(i for i, ln in enumerate(lines) if "--no-install-project" in ln)
    first_src = next(
        i for i, ln in enumerate(lines) if ln.startswith("COPY") and "saber_assets" in ln
    )
    assert deps < first_src  # the dependency layer does not depend on the sources
    assert re.search(r"COPY .*pyproject\.toml uv\.lock", lines[deps - 1])
    syncs = [ln for ln in lines if "uv sync" in ln]
    assert len(syncs) == 2 and all("--locked" in s and "--no-dev" in s for s in syncs)
    assert all("--extra k8s" in s for s in syncs)
    user = [i for i, ln in enumerate(lines) if ln.startswith("USER ")]
    assert user and lines[user[-1]] not in ("USER root", "USER 0")
    assert user[-1] < next(i for i, ln in enumerate(lines) if ln.startswith("CMD"))
    assert "NUMBA_CACHE_DIR=/opt/saber/.cache/numba" in code
    assert "chown saber:saber /opt/saber/.cache /opt/saber/.cache/numba" in code
    assert not any(
        "chown -R" in ln for ln in lines
    )  # no layer that copies the venv to change its owner
    # the chart's DAGSTER_HOME exists and belongs to the runtime user
    assert "DAGSTER_HOME=/opt/dagster/dagster_home" in code
    assert re.search(r"chown saber:saber [^\n]*/opt/dagster/dagster_home", code)
    # the K8sRunLauncher passes `dagster api execute_run …` as container args: no ENTRYPOINT
    assert not any(ln.startswith("ENTRYPOINT") for ln in lines)
    assert "ARG SABER_REGISTRY" in code and "ARG BASE_IMAGE" in code
    # every base image pinned by digest: the code image's default, the GPU image's required arg
    assert re.search(r"^ARG BASE_IMAGE=[\w./:-]+@sha256:[0-9a-f]{64}$", code, re.MULTILINE)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", code, re.MULTILINE)
    # the k8s extra (run pods) and the Postgres instance storage are in the lock
    lock = (REPO_ROOT / "uv.lock").read_text()
    for pkg in ("dagster-k8s", "dagster-postgres"):
        assert f'name = "{pkg}"\nversion = "0.29.27"' in lock

    gpu = (DEPLOY / "Dockerfile.gpu").read_text()
    assert re.search(r"^ARG BASE$", gpu, re.MULTILINE)  # no floating default
    assert re.search(r"^FROM \$\{BASE:\?\}$", gpu, re.MULTILINE)  # unset: the build stops
    assert "--build-arg BASE=REGISTRY/saber@sha256:DIGEST" in gpu
    assert "build-essential" in gpu and "--require-hashes" in gpu
    assert "uv venv /opt/vllm/.venv" in gpu  # vLLM in its own environment
    gpu_users = re.findall(r"^USER (\S+)$", gpu.split("\nCMD")[0], re.MULTILINE)
    assert gpu_users[-1] == "saber"  # root only for the apt layer
    reqs = (DEPLOY / "gpu" / "requirements-vllm.txt").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+) \\$", reqs, re.MULTILINE)
    assert ("vllm", "0.33.0") in pins and len(pins) > 50
    blocks = re.split(r"\n(?=[A-Za-z0-9_.\-]+==)", reqs.split("\n", 2)[2])
    assert all("--hash=sha256:" in b for b in blocks if b.strip())


def _vllm_numba() -> str:
    reqs = (DEPLOY / "gpu" / "requirements-vllm.txt").read_text()
    return re.search(r"^numba==(\S+) \\$", reqs, re.MULTILINE).group(1)


@pytest.mark.e2e  # an environment with another numba, every kernel compiled afresh
@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv to layer vLLM's numba")
def test_kernels_on_the_numba_vllm_ships(tmp_path):
    """The in-process `vllm` backend installs vLLM into the project environment, which replaces
    the locked numba with vLLM's pin: the signal and tournament kernels must pass on it."""
    version = _vllm_numba()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    probe = subprocess.run(
        ["uv", "run", "--with", f"numba=={version}", "python", "-c",
         "import numba; print(numba.__version__)"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"numba {version} could not be installed here: {probe.stderr[-300:]}")
    assert probe.stdout.strip() == version
    run = subprocess.run(
        ["uv", "run", "--with", f"numba=={version}", "pytest", "-o", "addopts=", "-q",
         "-p", "no:cacheprovider", "-p", "no:logging", "-x",
         "tests/test_signals.py", "tests/test_tournament.py",
         # the kernels, not Dagster's runs of them (tests/test_kernel_bounds.py leaves the same)
         "-k", "not dagster and not threads"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) >= 20, run.stdout[-500:]


def test_config_expands_only_saber_variables(tmp_path, monkeypatch):
    base = (REPO_ROOT / "configs" / "sample.yaml").read_text()
    path = tmp_path / "c.yaml"
    monkeypatch.delenv("SABER_X_MODEL", raising=False)
    path.write_text(base + "\nllm: {backend: openai, model: '${SABER_X_MODEL:-m1}'}\n")
    assert load_config(path).llm.model == "m1"
    monkeypatch.setenv("SABER_X_MODEL", "m2")
    assert load_config(path).llm.model == "m2"
    path.write_text(base + "\nllm: {backend: openai, model: '${SABER_UNSET_THING}'}\n")
    with pytest.raises(ValueError, match="SABER_UNSET_THING.*not set and has no default"):
        load_config(path)
    # a secret pasted in by expansion would land in run metadata: refused
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    path.write_text(base + "\nllm: {backend: openai, model: '${OPENAI_API_KEY}'}\n")
    with pytest.raises(ValueError, match="only SABER_\\* variables") as err:
        load_config(path)
    assert "sk-secret" not in str(err.value)


def test_shard_pods_fit_the_measured_peak_and_follow_the_configured_stored_share():
    from saber_assets.pods import pod_size
    from saber_assets.signals.sizing import shard_pod_memory_gib

    # measured by the scale rehearsal: 70K problems in 4 shards, 11% of pairs stored, the first
    # shard's process peaked at 4.52 GB (the 5% default requested 4 GiB: an OOM kill)
    assert shard_pod_memory_gib(70_000, 17_500) * 2**30 > 4.52e9 * 1.2
    cfg = load_config(REPO_ROOT / "configs" / "cluster.yaml")
    sizes = {}
    for share in (0.05, 0.18, 0.4):
        pods = cfg.pods.model_copy(update={"stored_fraction": share})
        sizes[share] = int(
            pod_size("build_signal_shards", cfg.model_copy(update={"pods": pods})).memory[:-2]
        )
    assert sizes[0.05] < sizes[0.18] < sizes[0.4]
    assert sizes[0.18] == int(pod_size("build_signal_shards", cfg).memory[:-2])  # the default


def test_the_served_context_holds_the_longest_judge_prompt_and_its_retry_budget():
    """deploy/vllm's --max-model-len and the cluster config's llm.max_model_len agree, and hold
    the longest judge prompt the cluster corpus can make plus twice judge_max_tokens (the retry
    of a cut-off answer); the in-process default is the model's own length."""
    from saber_assets.config import LLMConfig
    from saber_assets.corpus.build import build_corpus
    from saber_assets.cost import model_len_needed
    from saber_resources.prompts import problem_text

    cfg = load_config(REPO_ROOT / "configs" / "cluster.yaml")
    corpus = build_corpus(cfg.corpus, cfg.seed).corpus
    texts = [problem_text(p, s) for p, s in corpus.select("problem", "solution").iter_rows()]
    need, detail = model_len_needed(cfg, texts)
    assert detail["answer_tokens"] == 2 * cfg.tournament.judge_max_tokens
    assert need >= detail["prompt_tokens"] + detail["answer_tokens"] > 2 * 4096
    [deploy] = [d for d in _vllm_objects() if d["kind"] == "Deployment"]
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    served = int(next(a for a in args if a.startswith("--max-model-len=")).split("=")[1])
    assert served == cfg.llm.max_model_len >= need
    assert LLMConfig().max_model_len is None
    # a direct judge needs only its prompt and two digits' budget
    direct = cfg.model_copy(
        update={"tournament": cfg.tournament.model_copy(update={"judge_prompt": "direct"})}
    )
    assert model_len_needed(direct, texts)[1]["answer_tokens"] == 4


def test_a_summaries_shard_pod_holds_a_block_of_full_rows_per_thread_not_the_shards_pairs():
    from saber_assets.pods import largest_shard_rows, pod_size
    from saber_assets.signals.sizing import shard_pod_memory_gib, summary_shard_memory_bytes

    # the pairs layout grows with the shard's rows; the summaries layout with its threads
    assert summary_shard_memory_bytes(283_000, 70_000, 2) < summary_shard_memory_bytes(
        283_000, 70_000, 4
    )
    assert shard_pod_memory_gib(283_000, 70_000, summaries_threads=2) < shard_pod_memory_gib(
        283_000, 70_000
    )
    cfg = load_config(REPO_ROOT / "configs" / "cluster.yaml")
    cfg.signals.layout = "pairs"
    pairs = pod_size("build_signal_shards", cfg)
    cfg.signals.layout = "summaries"
    summaries = pod_size("build_signal_shards", cfg)
    assert summaries.memory != pairs.memory and summaries.cpu == pairs.cpu
    want = shard_pod_memory_gib(
        cfg.pods.expected_problems,
        largest_shard_rows(cfg),
        stored_fraction=cfg.pods.stored_fraction,
        summaries_threads=cfg.signals.threads,
    )
    assert summaries.memory == f"{want}Gi"


# ---- the cluster hardened by default (#65)


def _pod(name: str, spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _values_pods() -> dict[str, dict]:
    """The pods the Helm values define, as the chart lays out their fields: the webserver, the
    daemon, the code server, and a run pod (the code server's env, secrets and volumes,
    includeConfigInLaunchedRuns, under the launcher's runK8sConfig)."""
    v, code = _values(), _user_code()
    pods = {}
    for name, block in (
        ("webserver", v["dagsterWebserver"]), ("daemon", v["dagsterDaemon"]), ("code", code),
    ):  # fmt: skip
        container = {"name": name, "image": "saber", "securityContext": block["securityContext"],
                     "resources": block["resources"], "volumeMounts": block["volumeMounts"]}  # fmt: skip
        pods[name] = _pod(
            name,
            {"securityContext": block["podSecurityContext"], "volumes": block["volumes"],
             "containers": [container]},
        )  # fmt: skip
    run = v["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]
    container = {"name": "run", "image": "saber", **run["containerConfig"],
                 "volumeMounts": code["volumeMounts"]}  # fmt: skip
    pods["run"] = _pod("run", {**run["podSpecConfig"], "volumes": code["volumes"],
                               "containers": [container]})  # fmt: skip
    pods["run"]["metadata"]["labels"] = run["podTemplateSpecMetadata"]["labels"]
    vllm = _by_kind(_vllm_objects(), "Deployment")["spec"]["template"]
    pods["vllm"] = _pod("vllm", vllm["spec"])
    init = {o["kind"]: o for o in _docs(DEPLOY / "k8s" / "storage.yaml")}["Job"]
    pods["data-init"] = _pod("data-init", init["spec"]["template"]["spec"])
    return pods


def hardening_gaps(pod: dict) -> list[str]:
    """What keeps ``pod`` from the project's hardening: non-root, read-only root with a writable
    /tmp, no capabilities, RuntimeDefault seccomp, requests and limits."""
    spec, gaps = pod["spec"], []
    pod_sc = spec.get("securityContext") or {}
    if (pod_sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        gaps.append("seccomp is not RuntimeDefault")
    empty_dirs = {v["name"] for v in spec.get("volumes") or [] if "emptyDir" in v}
    for c in spec["containers"]:
        sc = {**pod_sc, **(c.get("securityContext") or {})}
        if not sc.get("runAsNonRoot") or sc.get("runAsUser", 1) == 0:
            gaps.append(f"{c['name']}: may run as root")
        if not sc.get("readOnlyRootFilesystem"):
            gaps.append(f"{c['name']}: writable root filesystem")
        if sc.get("allowPrivilegeEscalation") is not False:
            gaps.append(f"{c['name']}: privilege escalation allowed")
        if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
            gaps.append(f"{c['name']}: capabilities not dropped")
        res = c.get("resources") or {}
        if not (res.get("requests") or {}).get("memory") or not (res.get("limits") or {}).get(
            "memory"
        ):
            gaps.append(f"{c['name']}: no memory request and limit")
        if not any(m["mountPath"] == "/tmp" and m["name"] in empty_dirs
                   for m in c.get("volumeMounts") or []):  # fmt: skip
            gaps.append(f"{c['name']}: no emptyDir at /tmp")
    return gaps


def test_every_pod_is_hardened_and_validates_against_the_kubernetes_schema():
    import kubernetes_validate

    pods = _values_pods()
    for name, pod in pods.items():
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
        gaps = hardening_gaps(pod)
        if name == "data-init":  # the one root container: a one-off chown of the shared volume
            assert gaps == ["init: may run as root", "init: no emptyDir at /tmp"], gaps
        else:
            assert gaps == [], (name, gaps)
    # the check sees what it is for: the old, unhardened webserver
    bare = copy.deepcopy(pods["webserver"])
    bare["spec"]["securityContext"] = {}
    del bare["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"]
    assert hardening_gaps(bare) == [
        "seccomp is not RuntimeDefault", "webserver: may run as root",
        "webserver: writable root filesystem",
    ]  # fmt: skip
    # no service-account token where nothing calls the Kubernetes API
    for name in ("run", "vllm", "data-init"):
        assert pods[name]["spec"]["automountServiceAccountToken"] is False, name
    # the Hub token reaches the pod that pulls a model and no other
    secrets = {s["name"] for s in _user_code()["envSecrets"]}
    hf = [
        e for c in pods["vllm"]["spec"]["containers"] for e in c["env"] if e["name"] == "HF_TOKEN"
    ]
    [ref] = [e["valueFrom"]["secretKeyRef"]["name"] for e in hf]
    assert ref not in secrets and ref == "saber-hf"
    guide = (DEPLOY / "README.md").read_text()
    assert "secret generic saber-hf --from-literal=HF_TOKEN=" in guide
    assert (
        "HF_TOKEN"
        not in guide.split("create secret generic saber-llm")[1]
        .split("\n\n")[0]
        .split("saber-hf")[0]
    )


def _selects(selector: dict, labels: dict) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        if e["operator"] == "In" and labels.get(e["key"]) not in e["values"]:
            return False
        if e["operator"] == "Exists" and e["key"] not in labels:
            return False
    return True


NAMESPACE = {"kubernetes.io/metadata.name": "saber"}


def _outside(peer) -> bool:
    """Whether ``peer`` is not a pod of the saber namespace (its own policies are not these):
    None (anything outside), ``{"namespace": labels, "pod": labels}`` or ``{"ip": address}``."""
    return peer is None or "namespace" in peer or "ip" in peer


def _peer_matches(chosen: dict, peer) -> bool:
    """Whether one ``from`` / ``to`` entry of a rule selects ``peer`` (a pod's labels in the
    namespace, or an ``_outside`` peer)."""
    import ipaddress

    if peer is None:
        return False
    if "ipBlock" in chosen:
        if "ip" not in peer:
            return False
        address = ipaddress.ip_address(peer["ip"])
        block = chosen["ipBlock"]
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(e) for e in block.get("except") or []
        )
    if "ip" in peer:
        return False
    namespace = peer.get("namespace") if "namespace" in peer else NAMESPACE
    labels = peer["pod"] if "namespace" in peer else peer
    if "namespaceSelector" in chosen:
        if not _selects(chosen["namespaceSelector"], namespace):
            return False
    elif namespace != NAMESPACE:
        return False
    return "podSelector" not in chosen or _selects(chosen["podSelector"], labels)


def _allowed(policies: list[dict], src, dst, port: int) -> bool:
    """Whether NetworkPolicy semantics let ``src`` open ``port`` on ``dst`` (each a pod's labels
    in the namespace, or an ``_outside`` peer): the destination's ingress and the source's
    egress must each allow it (a pod no policy of a direction selects is open in that
    direction)."""

    def side(direction: str, me, peer) -> bool:
        key = "ingress" if direction == "Ingress" else "egress"
        peers = "from" if direction == "Ingress" else "to"
        if _outside(me):  # its policies are not these
            return True
        mine = [p["spec"] for p in policies if direction in p["spec"]["policyTypes"]
                and _selects(p["spec"]["podSelector"], me)]  # fmt: skip
        if not mine:
            return True
        for spec in mine:
            for rule in spec.get(key) or []:
                ports = [p["port"] for p in rule.get("ports") or []]
                if ports and port not in ports:
                    continue
                chosen = rule.get(peers)
                if not chosen or any(_peer_matches(c, peer) for c in chosen):
                    return True
        return False

    return side("Ingress", dst, src) and side("Egress", src, dst)


def test_the_network_policies_allow_only_the_flows_the_deployment_needs():
    import kubernetes_validate

    policies = _docs(DEPLOY / "k8s" / "network-policy.yaml")
    for policy in policies:
        kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    pods = _values_pods()
    role = {n: {"saber/role": n} for n in ("webserver", "daemon", "code", "run")}
    role["vllm"] = (
        pods["vllm"]["metadata"].get("labels")
        or _by_kind(_vllm_objects(), "Deployment")["spec"]["template"]["metadata"]["labels"]
    )
    assert pods["run"]["metadata"]["labels"] == role["run"]
    for name in ("webserver", "daemon", "code"):
        block = (
            _values()["dagsterWebserver"]
            if name == "webserver"
            else (_values()["dagsterDaemon"] if name == "daemon" else _user_code())
        )
        assert block["labels"] == role[name]
    other = {"app": "something-else"}  # any other pod in the namespace
    web = _values()["dagsterWebserver"]  # the chart's webserver listens on its service's port
    port = {"code": _user_code()["port"], "vllm": 8000, "webserver": web["service"]["port"]}
    assert port["webserver"] > 1024  # unprivileged: uid 10001 holds no capability
    assert web["readinessProbe"]["httpGet"]["port"] == port["webserver"]
    allowed = {
        (src, dst)
        for src in [*role, "other"]
        for dst in ("code", "vllm")
        if src != dst and _allowed(policies, role.get(src, other), role[dst], port[dst])
    }
    assert allowed == {
        ("webserver", "code"), ("daemon", "code"),  # the code server: the UI and the daemon
        ("code", "vllm"), ("run", "vllm"),  # the model and its metrics: saber's own pods
    }  # fmt: skip
    # the UI from the ingress controller's namespace only: not another namespace's pods, not
    # another pod of this one; nothing else from outside
    controller = {"namespace": {"kubernetes.io/metadata.name": "ingress-nginx"}, "pod": {}}
    assert _allowed(policies, controller, role["webserver"], port["webserver"])
    elsewhere = {"namespace": {"kubernetes.io/metadata.name": "tenant-b"}, "pod": {}}
    assert not _allowed(policies, elsewhere, role["webserver"], port["webserver"])
    assert not _allowed(policies, other, role["webserver"], port["webserver"])
    assert not _allowed(policies, None, role["webserver"], port["webserver"])
    assert not _allowed(policies, controller, role["code"], 4000)
    assert not _allowed(policies, None, role["code"], 4000)
    assert not _allowed(policies, None, role["vllm"], 8000)
    # out: HTTPS to public addresses only (never the metadata endpoint or the cluster's own),
    # PostgreSQL to its pods or a private address, never the internet
    postgres = {"app.kubernetes.io/name": "postgresql"}
    for src in ("code", "run", "vllm"):
        assert _allowed(policies, role[src], {"ip": "52.216.8.1"}, 443), src
        assert not _allowed(policies, role[src], {"ip": "169.254.169.254"}, 443), src
    for src in ("code", "vllm"):  # the cluster's own addresses: the API's pods only
        for private in ("10.0.0.7", "192.168.1.1"):
            assert not _allowed(policies, role[src], {"ip": private}, 443), (src, private)
    api = {"ip": "10.96.0.1"}
    launcher = {**role["run"], "saber/launches": "steps"}  # a k8s_job run's pod (pods.py)
    assert _allowed(policies, role["daemon"], api, 443) and _allowed(policies, launcher, api, 6443)
    # a run pod parses hostile corpora: no private address on 443 or 6443, the API included
    for port in (443, 6443):
        for private in ("10.96.0.1", "10.0.0.7", "172.16.5.5", "192.168.1.1"):
            assert not _allowed(policies, role["run"], {"ip": private}, port), (private, port)
    assert not _allowed(policies, role["daemon"], {"ip": "169.254.169.254"}, 80)
    for src in ("webserver", "daemon", "code", "run"):
        assert _allowed(policies, role[src], postgres, 5432), src
        assert _allowed(policies, role[src], {"ip": "10.20.0.5"}, 5432), src
        assert not _allowed(policies, role[src], {"ip": "52.216.8.1"}, 5432), src
        assert not _allowed(policies, role[src], other, 5432), src
    assert not _allowed(policies, role["vllm"], postgres, 5432)
    # each rule matters: without the code server's own policy the default-deny still holds it
    # shut; without both, any pod reaches it
    named = {p["metadata"]["name"]: p for p in policies}
    less = [p for n, p in named.items() if n != "code-server-ingress"]
    assert not _allowed(less, None, role["code"], 4000)
    less = [p for n, p in named.items() if n not in ("code-server-ingress", "default-deny")]
    assert _allowed(less, None, role["code"], 4000)


def test_every_image_is_pinned_by_version_never_latest():
    """With IfNotPresent a node keeps whichever `latest` it pulled first: every image the
    deployment names carries a version (or a digest)."""
    import re

    images = [c["image"] for pod in _values_pods().values()
              for c in pod["spec"]["containers"] if c["image"] != "saber"]  # fmt: skip
    saber = _user_code()["image"]
    images.append(f"{saber['repository']}:{saber['tag']}")
    assert len(images) >= 3, images  # vLLM, the volume's init Job, saber's own
    for image in images:
        tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
        assert "@sha256:" in image or (tag != "latest" and re.search(r"\d", tag)), image
    # the Dagster chart's own images (webserver, daemon) default to the chart's version


def test_a_job_gets_the_pod_its_assets_declare_and_two_pods_in_one_job_are_refused(monkeypatch):
    """Pod sizes are declared with the assets (``pod=``): the tournament's job gets the LLM pod
    on an LLM backend, the default on the CPU one; a second, different pod in one job is an
    error, not a silent pick."""
    import dataclasses

    from saber_assets import pods
    from saber_assets.declarations import stage_declarations
    from saber_assets.lib.pod_sizes import runs_pod

    cluster = load_config(REPO_ROOT / "configs" / "cluster.yaml")
    sample = load_config(REPO_ROOT / "configs" / "sample.yaml")
    assert pods.pod_size("build_domains", cluster) == cluster.pods.llm
    assert pods.pod_size("build_domains", sample) == sample.pods.default
    declared = stage_declarations()
    planted = [
        dataclasses.replace(d, pod=runs_pod) if d.asset_name == "query_candidates" else d
        for d in declared
    ]
    monkeypatch.setattr(pods, "stage_declarations", lambda: planted)
    with pytest.raises(ValueError, match="build_domains: its assets declare two pods"):
        pods.pod_size("build_domains", cluster)
