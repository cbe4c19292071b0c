"""`saber build --on`: a failed run is reported with the error its step raised, read through the
same GraphQL query the command sends, against Dagster's own schema and event log."""

import pytest
from dagster import DagsterInstance, job, op
from dagster_graphql.test.utils import execute_dagster_graphql

from saber_assets.orchestration.remote import (
    RUN_ERRORS,
    RUNS_QUERY,
    RemoteBuildError,
    failure_summary,
    run_statuses,
    runs_variables,
)


class _Context:
    """What the ``logsForRun`` resolver reads from a request context: the instance."""

    records_for_run_default_limit = None

    def __init__(self, instance: DagsterInstance) -> None:
        self.instance = instance

    class loaders:
        @staticmethod
        def clear() -> None:
            pass


@op
def annotate():
    raise ValueError('duplicate key value violates unique constraint "pg_type_typname_nsp_index"')


@op
def fine():
    return 1


@job
def broken():
    annotate()
    fine()


def test_a_failed_run_is_reported_with_its_root_cause():
    instance = DagsterInstance.ephemeral()
    run = broken.execute_in_process(instance=instance, raise_on_error=False)
    data = execute_dagster_graphql(_Context(instance), RUN_ERRORS, {"runId": run.run_id}).data
    why = failure_summary(data)
    # the step that failed and the exception it raised, not Dagster's wrapper around it
    assert why == (
        'annotate: ValueError: duplicate key value violates unique constraint "pg_type_typname_nsp_index"'
    )
    assert failure_summary(data, limit=20) == why[:20] + " …"


@job
def works():
    fine()


def test_the_runs_a_stage_waits_on_are_read_in_one_query():
    instance = DagsterInstance.ephemeral()
    ok = works.execute_in_process(instance=instance).run_id
    bad = broken.execute_in_process(instance=instance, raise_on_error=False).run_id
    works.execute_in_process(instance=instance)  # a run the build does not wait on

    def ask(ids):
        return execute_dagster_graphql(_Context(instance), RUNS_QUERY, runs_variables(ids)).data

    assert run_statuses(ask([ok, bad]), [ok, bad]) == {ok: "SUCCESS", bad: "FAILURE"}
    with pytest.raises(RemoteBuildError, match="no run 0000"):
        run_statuses(ask([ok, "0000"]), [ok, "0000"])


def test_an_unreadable_log_or_a_run_without_step_failures_says_so():
    assert "could not be read" in failure_summary(
        {"logsForRun": {"__typename": "RunNotFoundError", "message": "run x not found"}}
    )
    run_only = {
        "logsForRun": {
            "__typename": "EventConnection",
            "events": [{"__typename": "RunFailureEvent", "message": "the run worker died"}],
        }
    }
    assert failure_summary(run_only) == "the run worker died"
    empty = {"logsForRun": {"__typename": "EventConnection", "events": []}}
    assert failure_summary(empty) == "(no failure event in its log)"


def test_a_remote_build_sees_a_changed_partition_past_the_fan_in_threshold_as_a_local_one():
    """On a ≥ 100-partition edge Dagster's stale status says nothing; the local build and the
    remote one (through the deployment's GraphQL, here Dagster's own schema in process) both
    find the one upstream partition whose data version moved, and not one re-written with the
    same version."""
    import dagster as dg
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    from saber_assets.orchestration.plan import fan_in_parents, fan_in_updates
    from saber_assets.orchestration.remote import Deployment
    from tests import fan_in_defs

    def report(key, partition=None, version="v1"):
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key=key, partition=partition, tags={"dagster/data_version": version}
            )
        )

    graph = fan_in_defs.defs.resolve_asset_graph()
    index, keys = dg.AssetKey("index"), fan_in_defs.SHARDS.get_partition_keys()
    with dg.instance_for_test() as instance:
        [(parent, ups)] = fan_in_parents(instance, graph, index, None)
        assert parent == dg.AssetKey("shards") and len(ups) == 100
        for pk in keys:
            report("shards", pk)
        report("index")
        report("shards", "s007", "v2")  # moved
        report("shards", "s042", "v1")  # written again, same version
        local = fan_in_updates(instance, graph, index, None)
        assert local == [
            "index: has a new dependency data version (shards [s007], one of 100 partitions)"
        ]
        with define_out_of_process_context(fan_in_defs.__file__, None, instance) as context:
            dep = Deployment("http://unused:3000")
            dep._query = lambda q, v: execute_dagster_graphql(context, q, v).data
            assert dep.fan_in_updates("index", None, "shards", list(ups)) == ["s007"]
            report("index")  # rebuilt: nothing moved since
            assert dep.fan_in_updates("index", None, "shards", list(ups)) == []
        assert fan_in_updates(instance, graph, index, None) == []
