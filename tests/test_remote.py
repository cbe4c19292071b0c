"""`saber build --on`: a failed run is reported with the error its step raised, read through the
same GraphQL query the command sends, against Dagster's own schema and event log."""

from dagster import DagsterInstance, job, op
from dagster_graphql.test.utils import execute_dagster_graphql

from saber_assets.remote import RUN_ERRORS, failure_summary


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
