"""The human study through a real Label Studio: a small benchmark is built, `saber study
export` samples its pairs, `push` creates the project in Label Studio (started here, SQLite, a
fresh folder, nothing fetched), two annotators label through its API with their own tokens,
`pull` brings the labels into the stores, and the agreement asset reads them: labels that copy
the judge agree 1.0, labels that reverse it 0.0. Chromium opens one task and the formulas are
drawn as MathML."""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import polars as pl
import pytest
import yaml

from saber_assets.cli import main
from saber_assets.config import REPO_ROOT

from . import chromium
from .chromium import open_until
from .label_studio_server import LabelStudioServer, label_studio_bin, migrated_template

pytestmark = pytest.mark.skipif(
    label_studio_bin() is None,
    reason="needs Label Studio in its own environment (.ci/run makes .cache/label-studio)",
)
SCREENSHOT = REPO_ROOT / ".saber" / "screenshots" / "label-studio-task.png"


def judge_picks(cfg_path, home, study: pl.DataFrame) -> dict[str, str]:
    """task id -> the candidate the pipeline's pairwise judge prefers, asked as the asset asks
    it (once, in the order people saw)."""
    from saber_assets.definitions import make_definitions
    from saber_assets.lib.tasks import prepared_tasks
    from saber_assets.study.human_agreement import judge_choices

    res = make_definitions(str(cfg_path)).resources
    out = home / "tiny" / "parquet"
    corpus = pl.read_parquet(out / "corpus.parquet")
    ratings = pl.read_parquet(out / "relevance_ratings")
    tasks, text = prepared_tasks(res["pipeline"], res["llm"], res["stores"], corpus, ratings)
    pairs = list(study.select("query", "a", "b").iter_rows())
    shown = {
        (q, a, b): f for q, a, b, f in study.select("query", "a", "b", "shown_first").iter_rows()
    }
    seed = res["pipeline"].load().seed
    choices = judge_choices(tasks.pair_judge, text, pairs, shown, seed)
    return {
        t: (a if choices[(q, a, b)] == "a" else b)
        for t, q, a, b in study.select("task_id", "query", "a", "b").iter_rows()
    }


def annotate(
    ls: LabelStudioServer, project: int, token: str, picks, reverse: bool, overlap_only: bool
):
    """Label every task (or those asking for two annotators) as the annotator with ``token``:
    the judge's pick, or the other candidate."""
    web = httpx.Client(base_url=ls.url, headers={"Authorization": f"Token {token}"}, timeout=30)
    tasks = web.get("/api/tasks", params={"project": project, "page_size": 1000}).json()["tasks"]
    n = 0
    for t in tasks:
        if overlap_only and t["overlap"] < 2:
            continue
        d = t["data"]
        pick = picks[d["saber_task"]]
        if reverse:
            pick = d["second_id"] if pick == d["first_id"] else d["first_id"]
        choice = "1" if pick == d["first_id"] else "2"
        r = web.post(f"/api/tasks/{t['id']}/annotations/", json={
            "result": [{"from_name": "closer", "to_name": "query", "type": "choices",
                        "value": {"choices": [choice]}}], "lead_time": 12.5,
        })  # fmt: skip
        assert r.status_code == 201, r.text
        n += 1
    return n


def agreement(home) -> dict[tuple[str, int], tuple[int, float]]:
    table = pl.read_parquet(home / "tiny" / "parquet" / "judge_human_agreement.parquet")
    rows = table.select("predictor", "delta_r_at_least", "annotations", "agreement").iter_rows()
    return {(p, d): (n, a) for p, d, n, a in rows}


def observe_labels(cfg_path) -> dict[str, list[str]]:
    """Observe the inputs (as every build does first; the input sensor does it when they move)
    and say why each of a few assets would run: [] when it is up to date."""
    from dagster import DagsterInstance

    from saber_assets.definitions import make_definitions
    from saber_assets.orchestration.plan import stale_resolver, why_run

    defs = make_definitions(str(cfg_path))
    with DagsterInstance.get() as instance:
        assert defs.resolve_job_def("observe_inputs").execute_in_process(instance=instance).success
        graph = defs.resolve_asset_graph()
        resolver = stale_resolver(instance, graph)
        return {
            a: why_run(resolver, instance, graph, a, None)
            for a in ("judge_human_agreement", "corpus", "benchmark_export")
        }


def materialize_agreement(cfg_path) -> None:
    from dagster import AssetKey, DagsterInstance

    from saber_assets.definitions import make_definitions

    observe_labels(cfg_path)
    defs = make_definitions(str(cfg_path))
    job = defs.resolve_job_def("build_analyses")
    with DagsterInstance.get() as instance:
        result = job.execute_in_process(
            instance=instance, asset_selection=[AssetKey("judge_human_agreement")]
        )
    assert result.success


def _study(cfg, name: str) -> None:
    doc = yaml.safe_load(cfg.read_text())
    doc["analyses"] = {**doc.get("analyses", {}), "human_study": name}
    cfg.write_text(yaml.safe_dump(doc))


@pytest.fixture(scope="session")
def label_studio_db():
    return migrated_template()


def test_human_study_through_label_studio(
    shared_build, label_studio_db, tmp_path, monkeypatch, capsys
):
    """On a copy of the session's tiny build."""
    home = tmp_path / "home"
    with ThreadPoolExecutor(1) as pool:  # Label Studio starts while the build is copied
        starting = pool.submit(
            LabelStudioServer, tmp_path / "label-studio", template=label_studio_db
        )
        cfg = shared_build("tiny").copy_to(tmp_path, monkeypatch)
        _study(cfg, "copy")
        ls = starting.result()
    browser_missing = chromium.missing()
    try:
        monkeypatch.setenv("LABEL_STUDIO_URL", ls.url)
        monkeypatch.setenv("LABEL_STUDIO_API_KEY", ls.TOKEN)
        version = httpx.get(
            f"{ls.url}/api/version", headers={"Authorization": f"Token {ls.TOKEN}"}
        ).json()["release"]
        print(f"Label Studio {version} started in {ls.start_s:.1f}s")
        capsys.readouterr()

        # export and push, twice: the second push adds nothing
        base = ["--config", str(cfg)]
        assert main(["study", "export", *base, "--pairs", "12", "--double-share", "0.25",
                     "--name", "copy"]) == 0  # fmt: skip
        folder = home / "tiny" / "human_study"
        study = pl.read_parquet(folder / "pairs.parquet")
        assert study.height == 12 and int((study["annotators"] == 2).sum()) == 3
        assert main(["study", "push", *base]) == 0
        out = capsys.readouterr().out
        assert "(created)" in out and "12 tasks added, 0 already there" in out
        assert ls.TOKEN not in out  # the key is never printed
        assert main(["study", "push", *base]) == 0
        assert "0 tasks added, 12 already there" in capsys.readouterr().out
        project = json.loads((folder / "project.json").read_text())["id"]

        # two annotators: the lead labels all, an invited annotator the three overlap tasks
        second = ls.invite("second@example.com", "second-password-1")
        picks = judge_picks(cfg, home, study)
        assert annotate(ls, project, ls.TOKEN, picks, reverse=False, overlap_only=False) == 12
        assert annotate(ls, project, second, picks, reverse=False, overlap_only=True) == 3

        materialize_agreement(cfg)  # before any label: empty, and says why
        assert agreement(home) == {}
        assert main(["study", "pull", *base]) == 0
        assert "15 labels read: 15 new, 0 already stored; 2 annotators" in capsys.readouterr().out
        # the new labels mark the agreement unsynced, and nothing upstream
        why = observe_labels(cfg)
        assert any("human_labels" in w for w in why["judge_human_agreement"]), why
        assert why["corpus"] == [] and why["benchmark_export"] == []
        assert main(["study", "pull", *base]) == 0
        assert "15 labels read: 0 new, 15 already stored" in capsys.readouterr().out
        exports = sorted((folder / "exports").glob("export-*.json"))
        assert exports  # every pull kept as pulled

        # an export with a task from elsewhere: refused with the reason, the rest kept
        raw = json.loads(exports[-1].read_text())
        raw[0]["data"]["saber_task"] = "copy:from-another-study"
        bad = tmp_path / "edited-export.json"
        bad.write_text(json.dumps(raw))
        assert main(["annotate", "import", *base, str(bad)]) == 1  # the old name still works
        captured = capsys.readouterr()
        assert "unknown task copy:from-another-study: not in this study" in captured.err
        assert "0 new" in captured.out

        materialize_agreement(cfg)
        assert observe_labels(cfg)["judge_human_agreement"] == []
        print(pl.read_parquet(home / "tiny" / "parquet" / "judge_human_agreement.parquet"))
        got = agreement(home)
        assert got[("pairwise_judge", 0)] == (15, 1.0)
        assert got[("inter_annotator", 0)] == (3, 1.0)

        # a second study whose labels reverse the judge
        rev = tmp_path / "reverse-study"
        assert main(["study", "export", *base, "--pairs", "8", "--double-share", "0.25",
                     "--name", "reverse", "--seed", "5", "--study-dir", str(rev)]) == 0  # fmt: skip
        assert main(["study", "push", *base, "--study-dir", str(rev)]) == 0
        rstudy = pl.read_parquet(rev / "pairs.parquet")
        rproject = json.loads((rev / "project.json").read_text())["id"]
        assert rproject != project
        rpicks = judge_picks(cfg, home, rstudy)
        annotate(ls, rproject, ls.TOKEN, rpicks, reverse=True, overlap_only=False)
        annotate(ls, rproject, second, rpicks, reverse=True, overlap_only=True)
        assert main(["study", "pull", *base, "--study-dir", str(rev)]) == 0
        _study(cfg, "reverse")
        materialize_agreement(cfg)
        got = agreement(home)
        assert got[("pairwise_judge", 0)] == (10, 0.0)
        assert got[("inter_annotator", 0)] == (2, 1.0)
        print(pl.read_parquet(home / "tiny" / "parquet" / "judge_human_agreement.parquet"))

        if browser_missing is None:
            screenshot_of_a_task(ls, project, study)
        assert ls.outbound_requests() == []  # nothing fetched
    finally:
        ls.stop()
    if browser_missing is not None:  # all but the browser's part passed: say what did not run
        pytest.skip(f"the task in the browser: {browser_missing}")


def screenshot_of_a_task(ls: LabelStudioServer, project: int, study: pl.DataFrame) -> None:
    """Log in as the lead, open a task in the labelling view: its formulas are MathML the
    browser lays out (each with a width), none left as source."""
    tasks = httpx.get(f"{ls.url}/api/tasks", params={"project": project},
                      headers={"Authorization": f"Token {ls.TOKEN}"}).json()["tasks"]  # fmt: skip
    task = max(tasks, key=lambda t: t["data"]["first_html"].count("<math"))
    browser = chromium.start(ls.data_dir / "chromium-profile")
    try:
        open_until(browser, f"{ls.url}/user/login/", ["Log in"], 120)
        browser.execute_script(
            "document.querySelector('input[name=email]').value = arguments[0];"
            " document.querySelector('input[name=password]').value = arguments[1];"
            " document.querySelector('form').submit();",
            ls.ADMIN,
            ls.PASSWORD,
        )
        time.sleep(3)
        text = open_until(
            browser,
            f"{ls.url}/projects/{project}/data?task={task['id']}",
            ["Which candidate is closer to the query in method?", "Candidate 1", "Candidate 2"],
            120,
        )
        assert "Query" in text
        time.sleep(2)
        widths = browser.execute_script(
            "return [...document.querySelectorAll('.saber-text math')]"
            ".map(m => m.getBoundingClientRect().width)"
        )
        assert widths and all(w > 0 for w in widths), widths
        # a token element (mi, mn, mo) holding elements: a row swallowed, drawn one per line
        swallowed = browser.execute_script(
            "return document.querySelectorAll('.saber-text :is(mi, mn, mo, mtext) > *').length"
        )
        assert swallowed == 0
        chromium.screenshot(browser, SCREENSHOT)
    finally:
        browser.quit()
    shutil.copyfile(SCREENSHOT, ls.data_dir / SCREENSHOT.name)
