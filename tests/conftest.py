import os

# One BLAS thread in every process the suite starts (read when numpy loads, so before any import
# that loads it): three workers share 2 cores, and a BLAS pool per process spins against the
# others. The joint-coverage simulation took 86 s of CPU under the suite for 29 s of work; alone
# it spends 6.3 s of CPU on 2 threads against 3.7 s on one, in the same wall time.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from saber_testing.tiny import tiny_doc, write_tiny_inputs  # noqa: E402

# Before anything imports numba: compile once into the checkout's ignored cache.
os.environ.setdefault(
    "NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".cache" / "numba")
)
os.environ.setdefault("TQDM_DISABLE", "1")
# Every process the suite starts (xdist workers, `saber` commands, Dagster's run workers and code
# servers) imports the project: with PYTHONDONTWRITEBYTECODE set (as in this project's machines)
# each compiled it from source again, 5 s of a 7 s import. Its bytecode goes to the ignored
# __pycache__ folders once; the installed packages' is compiled by `uv sync --compile-bytecode`.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture(autouse=True)
def own_home(tmp_path_factory, monkeypatch):
    """Each test's default home is its own, never the checkout's .saber/ (a person's build may
    hold it, and a test must not write beside their outputs); a test that names one keeps it."""
    if "SABER_HOME" not in os.environ:
        monkeypatch.setenv("SABER_HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def make_config(tmp_path):
    """Write a pipeline config YAML into tmp_path and return its path."""

    def _make(**cfg) -> Path:
        cfg.setdefault("name", "test")
        path = tmp_path / f"{cfg['name']}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    return _make


@pytest.fixture
def tiny_config(tmp_path, make_config, monkeypatch):
    """A 330-problem corpus (a JSONL source with a bad row + a MATH sample) through every stage."""
    monkeypatch.setenv("SABER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    write_tiny_inputs(tmp_path)

    def _make(**extra):
        return make_config(**tiny_doc(tmp_path, **extra))

    return _make


# The shared builds: a session builds each once (one worker does; the others wait on its lock)
# and a test that changes one works on its own copy (`SharedBuild.copy_to`). Build versions see
# input files by content, not path, so a copy is up to date where it lands.
SHARED_BUILDS = {
    # the tiny config through every stage
    "tiny": {},
    # one domain, short texts (a real judge on 2 CPU cores reads them: a judgment's prompt of
    # three problems and solutions ran 600-1,000 tokens at 90-190 a second on one thread under
    # the suite with solutions to 400 characters), three rounds: the cluster rehearsal's serial
    # reference and the resumed tournaments' starting point
    "algebra": {
        "ontology": {"domains": {"Algebra": "Algebra"}},
        "corpus": {"max_problem_chars": 240, "max_solution_chars": 200},
        "tournament": {"rounds": 3},
    },
}


def shared_doc(root: Path, name: str) -> dict:
    """The config of the ``SHARED_BUILDS`` build ``name``, its inputs in ``root``."""
    doc = tiny_doc(root)
    for section, value in SHARED_BUILDS[name].items():  # merged into the tiny config's section
        doc[section] = {**doc.get(section, {}), **value}
    return doc


@dataclass(frozen=True)
class SharedBuild:
    """A finished build of a ``SHARED_BUILDS`` config: its inputs and SABER_HOME in ``root``."""

    name: str
    root: Path
    log: str  # what `saber build` printed

    @property
    def config(self) -> Path:
        return self.root / "tiny.yaml"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def copy_to(self, dest: Path, monkeypatch: pytest.MonkeyPatch | None = None) -> Path:
        """Copy the inputs and outputs into ``dest`` (the config's paths pointed there); with
        ``monkeypatch``, SABER_HOME and DAGSTER_HOME set to the copy's (as `saber build` sets
        them). Returns the copy's config."""
        shutil.copytree(self.root, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.log"))
        cfg = dest / self.config.name
        cfg.write_text(self.config.read_text().replace(str(self.root), str(dest)))
        if monkeypatch is not None:
            monkeypatch.setenv("SABER_HOME", str(dest / "home"))
            monkeypatch.setenv("DAGSTER_HOME", str(dest / "home" / "dagster_home"))
        return cfg


# Secrets in every shared build's environment, where the code could read them: a test greps the
# build's outputs and log for each (tests/test_hostile.py).
PLANTED_SECRETS = {
    "SABER_PG_DSN": "postgresql://saber:planted-pg-5ecret@db.invalid:5432/saber",
    "HF_TOKEN": "hf_planted5ecretHubToken",
    "OPENAI_API_KEY": "sk-planted-5ecret-openai",
}


def _shared_root(tmp_path_factory) -> Path:
    """One folder for the whole session, every xdist worker's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def shared_build(tmp_path_factory):
    """``shared_build(name)``: the ``SHARED_BUILDS`` build, made once per session by
    `saber build` in its own process; a failed build fails every test that asks for it with
    its output."""
    from filelock import FileLock

    base = _shared_root(tmp_path_factory)

    def _get(name: str) -> SharedBuild:
        root = base / f"shared-{name}"
        log, status = root / "build.log", root / "build.status"
        with FileLock(str(root) + ".lock"):
            if not status.exists():
                shutil.rmtree(root, ignore_errors=True)
                root.mkdir()
                write_tiny_inputs(root)
                (root / "tiny.yaml").write_text(yaml.safe_dump(shared_doc(root, name)))
                env = {**os.environ, **PLANTED_SECRETS, "SABER_HOME": str(root / "home")}
                env.pop("DAGSTER_HOME", None)
                with open(log, "w") as out:
                    proc = subprocess.run(
                        [sys.executable, "-m", "saber_assets.cli", "build", "--config",
                         str(root / "tiny.yaml")],
                        cwd=Path(__file__).resolve().parent.parent, env=env, stdout=out,
                        stderr=subprocess.STDOUT, timeout=1200,
                    )  # fmt: skip
                status.write_text(str(proc.returncode))
        if status.read_text() != "0":
            pytest.fail(f"the shared build {name!r} failed:\n{log.read_text()[-4000:]}")
        return SharedBuild(name, root, log.read_text())

    return _get


def _pg_bin(name: str) -> str | None:
    import glob
    import shutil

    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


@pytest.fixture(scope="session")
def postgres_dsn():
    """A throw-away PostgreSQL server on 127.0.0.1 (own data dir, a free port), stopped at the end.
    As root the server runs as ``nobody`` (postgres refuses root)."""
    import shutil
    import socket
    import subprocess
    import tempfile

    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL is not installed (.ci/run installs Debian's postgresql)")
    base = Path(tempfile.mkdtemp(prefix="saber-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "nobody")
        as_user = ["runuser", "-u", "nobody", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = base / "data"
    subprocess.run(
        [*as_user, initdb, "-D", str(data), "-U", "saber", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_user,
            pg_ctl,
            "-D",
            str(data),
            "-o",
            f"-p {port} -k {base} -h 127.0.0.1 -c max_connections=200",
            "-l",
            str(base / "log"),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://saber@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def browser(tmp_path):
    """Headless Debian chromium on a fresh profile, driven by Selenium (tests/chromium.py); the
    test is skipped, naming the Debian package, where the browser or its driver is absent."""
    from . import chromium

    reason = chromium.missing()
    if reason:
        pytest.skip(reason)
    driver = chromium.start(tmp_path / "chromium-profile")
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def llama_parts():
    """(llama-server binary, SmolLM2 GGUF), or the test is skipped with the reason (built by
    .ci/run: `deploy/llama-server/build.sh`; the model comes with `uv sync`)."""
    from saber_resources.llama_server import ServerUnavailable, bundled_model, server_binary

    try:
        return server_binary(), bundled_model()
    except ServerUnavailable as exc:
        pytest.skip(str(exc))


# llama.cpp's threads spin while they wait: beside another busy xdist worker on 2 cores, two of
# them ran the every-task test in 240 s against 63 s for one (41 s alone with two)
LLAMA_THREADS = 1 if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 else 2


def _llama_server(parts, embeddings: bool):
    """A real llama.cpp server with the bundled SmolLM2-135M-Instruct on 127.0.0.1, started once
    per session."""
    from saber_resources.llama_server import LlamaServer

    # 4 slots, as a user's 2-core machine runs it (`saber llm-server`)
    with LlamaServer(*parts, embeddings=embeddings, threads=LLAMA_THREADS) as srv:
        yield srv


@pytest.fixture(scope="session")
def llama_chat(llama_parts):
    yield from _llama_server(llama_parts, embeddings=False)


@pytest.fixture(scope="session")
def llama_embed(llama_parts):
    yield from _llama_server(llama_parts, embeddings=True)


# ---------------------------------------------------------------- tiers and workers
# `uv run pytest -m "not e2e"` is the inner loop: everything but the end-to-end builds, the real
# servers and the environments made for one check. A test is e2e by the fixtures it asks for,
# or by its own mark.
# a server started once per session: its tests run on one xdist worker (`--dist loadgroup`)
# (and the faults rehearsal's clean build, made once for the tests that compare with it)
# (`llama_parts` is the binary and the model, no server: a test that starts its own server from
# them runs on either worker, beside the shared ones)
SERVER_GROUPS = {"llama_chat": "llama", "llama_embed": "llama", "postgres_dsn": "postgres",
                 "clean_rehearsal": "faults"}  # fmt: skip
E2E_FIXTURES = {"shared_build", "label_studio_db", "llama_parts", "browser", *SERVER_GROUPS}


# the longest first, so that two workers finish together (xdist hands work out in this order;
# a server's group goes where its first test is)
LONGEST_FIRST = ["test_cluster", "test_real_llm_build", "test_real_llm", "test_sample_quota",
                 "test_joint_intervals", "test_ui", "test_faults", "test_scale", "test_build",
                 "test_significance", "test_retrievers", "test_label_studio", "test_discovery",
                 "test_resume"]  # fmt: skip


def pytest_xdist_auto_num_workers(config) -> int:
    """One worker more than cores (`-n auto`; `--maxprocesses` caps it): a third of a 2-core
    box's time sat idle under two workers (vmstat: 16-20% idle; the tests wait on servers,
    polls and subprocesses), 4.5% under three, and the suite took 614 s against 668 s."""
    return (os.cpu_count() or 1) + 1


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__.rsplit(".", 1)[-1], len(rank)))
    for item in items:
        names = set(item.fixturenames)
        if names & E2E_FIXTURES:
            item.add_marker(pytest.mark.e2e)
        groups = {g for f, g in SERVER_GROUPS.items() if f in names}
        if groups:
            item.add_marker(pytest.mark.xdist_group("+".join(sorted(groups))))


def copy_source(dest: Path) -> Path:
    """A copy of the project's packages under ``dest``, to edit and read a ``CodeGraph`` of."""
    from saber_assets.code_graph import PACKAGES, ROOT

    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return dest
