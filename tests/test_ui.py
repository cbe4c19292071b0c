"""The Dagster UI, as a user sees it: after a build, headless Chromium opens the asset graph and
the leaderboard's page and reads the rendered DOM (Selenium, tests/chromium.py). Then the UI knows
what is stale: a changed `tournament.rounds` in the config the code location reads marks exactly
the tournament and what reads it unsynced (Dagster's stale status, and the pages that show it),
`saber build` launches exactly that and brings everything back to synced, and a changed registry
entry marks only its own partitions."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request

from saber_assets.cli import main
from saber_assets.config import REPO_ROOT

from .chromium import click_after, click_text, open_until, screenshot, text
from .dagster_dev import dagster_dev

# docs/ui.md shows these screens: `SABER_UPDATE_SCREENS=1 uv run pytest tests/test_ui.py -n 0`
# captures them again into docs/images/ui/ (otherwise they go to the ignored .saber/)
SCREENSHOTS = (
    REPO_ROOT / "docs" / "images" / "ui"
    if os.environ.get("SABER_UPDATE_SCREENS") == "1"
    else REPO_ROOT / ".saber" / "screenshots"
)


NODES = """
query Nodes {
  assetNodes { assetKey { path } isPartitioned isObservable partitionKeys staleStatus }
}
"""
BY_PARTITION = """
query ByPartition($key: AssetKeyInput!, $partitions: [String!]) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode { staleStatusByPartition(partitions: $partitions) }
  }
}
"""


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    req = urllib.request.Request(
        url + "/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        out = json.loads(urllib.request.urlopen(req, timeout=120).read())
    except urllib.error.HTTPError as err:
        raise AssertionError(f"{query[:60]}: {err.read().decode()[:2000]}") from None
    assert "errors" not in out, out["errors"]
    return out["data"]


def stale_assets(url: str) -> dict[str, set[str]]:
    """Asset -> its unsynced or missing partitions ("" for an unpartitioned asset)."""
    out: dict[str, set[str]] = {}
    for node in graphql(url, NODES)["assetNodes"]:
        if node["isObservable"]:
            continue
        name = node["assetKey"]["path"][-1]
        if node["isPartitioned"]:
            keys = node["partitionKeys"]
            got = graphql(url, BY_PARTITION, {"key": {"path": [name]}, "partitions": keys})
            status = got["assetNodeOrError"]["staleStatusByPartition"]
            bad = {k for k, s in zip(keys, status, strict=True) if s != "FRESH"}
        else:
            bad = {""} if node["staleStatus"] != "FRESH" else set()
        if bad:
            out[name] = bad
    return out


def reload(url: str) -> None:
    graphql(
        url,
        'mutation { reloadRepositoryLocation(repositoryLocationName: "saber") { __typename } }',
    )


# what reads the tournament, all partitions of each (not the published benchmark's recall, which
# reads the corpus alone)
ROUNDS_MOVE = {
    "tournament_judgments", "relevance_ratings", "benchmark_export", "evaluation_benchmark", "own_candidate_matches",
    "retriever_index", "retriever_runs", "leaderboard", "benchmark_composition",
    "tournament_convergence", "signal_group_curves", "judge_human_agreement", "judging_regimes",
    "math_vs_words", "mteb_correlation", "leaderboard_robustness", "full_corpus_fill",
    "published_grade_agreement", "benchmark_explorer",
    "benchmark_report", "benchmark_verification",
}  # fmt: skip


def wait_for_run(url: str, job: str) -> None:
    from saber_assets.orchestration.remote import Deployment

    dep = Deployment(url)
    run_id = dep.submit(job, None, {})
    deadline = time.monotonic() + 300
    while (status := dep.status(run_id)) not in ("SUCCESS", "FAILURE", "CANCELED"):
        assert time.monotonic() < deadline, f"{job} run {run_id} still {status}"
        time.sleep(1)
    assert status == "SUCCESS", dep.failure(run_id)


def test_ui_shows_the_asset_graph_the_leaderboard_and_what_is_unsynced(
    shared_build, browser, tmp_path, monkeypatch, capsys
):
    """On a copy of the session's one-domain build (a rounds change rebuilds one tournament and
    its two runs, not five and ten). The rounds change is also the incremental build's case:
    its build runs the tournament and what reads it, never the annotations or the shards."""
    cfg = shared_build("algebra").copy_to(tmp_path, monkeypatch)
    home = tmp_path / "home"
    served = tmp_path / "served" / "tiny.yaml"  # the copy the code location reads; same name
    served.parent.mkdir()
    shutil.copyfile(cfg, served)
    env = {**os.environ, "DAGSTER_HOME": str(home / "dagster_home"), "SABER_CONFIG": str(served)}
    with dagster_dev(env, tmp_path / "dagster_dev.log") as url:
        assert stale_assets(url) == {}, "the build and the UI disagree on what is up to date"
        # the global lineage: one box per package (each asset's group is its package)
        groups = ["corpus", "ontology", "annotations", "signals", "candidates",
                  "tournament", "ratings", "benchmark", "retrievers", "contamination",
                  "leaderboard", "site", "analyses"]  # fmt: skip
        graph = open_until(browser, f"{url}/asset-groups", groups)
        assert "Global asset lineage" in graph
        time.sleep(2)
        if "Join the Dagster community" in text(browser):  # Dagster's first-visit modal
            click_text(browser, "Skip")
            time.sleep(1)
        screenshot(browser, SCREENSHOTS / "asset-graph.png")
        # the leaderboard's page: its latest materialization's table and chart metadata
        board = f"{url}/assets/leaderboard"
        page = open_until(
            browser, board, ["judge_backend", "table", "chart", "ndcg@10", "bm25", "jaccard-no-tok"]
        )
        assert "Unsynced" not in page
        screenshot(browser, SCREENSHOTS / "leaderboard.png")

        served.write_text(served.read_text().replace("rounds: 3", "rounds: 4"))
        reload(url)
        stale = stale_assets(url)
        assert set(stale) == ROUNDS_MOVE, sorted(set(stale) ^ ROUNDS_MOVE)
        assert stale["tournament_judgments"] == {"Algebra"}
        assert stale["retriever_runs"] == {"Algebra|bm25", "Algebra|jaccard-no-tok"}
        open_until(browser, board, ["leaderboard", "Unsynced"])
        screenshot(browser, SCREENSHOTS / "unsynced-after-rounds.png")
        # the UI's own "Materialize unsynced" offers the unsynced assets it can launch at
        # once: the unpartitioned ones (Dagster 1.13 leaves partitioned assets out there;
        # `saber build`, locally or `--on` the deployment, launches all of them)
        open_until(browser, f"{url}/asset-groups", ["Global asset lineage"])
        time.sleep(3)
        click_after(browser, "Materialize all")
        time.sleep(1)
        click_text(browser, "Materialize unsynced")
        unpartitioned = {a for a in ROUNDS_MOVE if stale[a] == {""}}
        launch = f"Materialize {len(unpartitioned)} assets"
        dialog = open_until(browser, None, ["Materialize unsynced assets", launch])
        screenshot(browser, SCREENSHOTS / "materialize-unsynced-dialog.png")
        listed = dialog.split("Materialize unsynced assets")[1]
        # the dialog's count is every one of them ("Materialize N assets"); its list scrolls, so
        # the names it shows are some of them, and none is another
        shown = {line.strip() for line in listed.splitlines()} & (set(stale) | set(ROUNDS_MOVE))
        assert len(shown) >= min(10, len(unpartitioned)) and shown <= unpartitioned, shown

        # the build asks the same instance the same question: it runs exactly that
        capsys.readouterr()
        assert main(["build", "--config", str(served)]) == 0
        out = capsys.readouterr().out
        assert "tournament_judgments" in out and "benchmark_export" in out
        assert "topic_annotations" not in out and "pair_signal_shards" not in out
        assert stale_assets(url) == {}
        open_until(browser, board, ["leaderboard", "Latest materialization"])
        time.sleep(5)
        assert "Unsynced" not in text(browser)
        screenshot(browser, SCREENSHOTS / "synced-after-build.png")
        # one changed registry entry: only its own partitions and what reads every entry
        registry = tmp_path / "retrievers.yaml"
        registry.write_text(
            registry.read_text().replace(
                "{name: bm25, kind: bm25}", "{name: bm25, kind: bm25, params: {k1: 1.2}}"
            )
        )
        wait_for_run(url, "observe_registry")
        stale = stale_assets(url)
        assert stale.pop("retriever_index") == {"bm25"}
        assert stale.pop("retriever_runs") == {"Algebra|bm25"}
        assert set(stale) <= {"leaderboard", "mteb_correlation", "leaderboard_robustness",
                              "benchmark_report"} and "leaderboard" in stale  # fmt: skip
    for shot in ("leaderboard", "unsynced-after-rounds", "synced-after-build"):
        png = (SCREENSHOTS / f"{shot}.png").read_bytes()
        assert len(png) > 10_000 and png[:4] == b"\x89PNG"
