"""The registry sensor requests runs only for a new retriever; the daily backstop fills gaps."""

from collections.abc import Sequence

import dagster as dg
import polars as pl
from dagster._core.definitions.data_version import extract_data_version_from_entry

from saber_assets.definitions import make_definitions
from saber_assets.study.human_study import store_labels

DOMAINS = ["Algebra", "Geometry", "Number Theory", "Combinatorics", "Calculus and Analysis"]


def _defs(tmp_path, names):
    reg = tmp_path / "retrievers.yaml"
    reg.write_text("retrievers:\n" + "".join(f"  - {{name: {n}, kind: bm25}}\n" for n in names))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"name: t\ncorpus: {{sources: [{{name: math, bundled: math}}]}}\nretrievers: {{registry: {reg}}}\n"
    )
    bench = tmp_path / "home" / "t" / "evaluation_benchmark"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "queries.parquet").write_bytes(b"")  # the sensor only asks whether it exists
    return make_definitions(cfg, tmp_path / "home")


def _evaluate(sensor, instance, defs):
    with dg.build_sensor_context(
        instance=instance, definitions=defs, resources={"pipeline": defs.resources["pipeline"]}
    ) as ctx:
        return sensor(ctx)


def test_sensor_requests_runs_only_for_the_new_model(tmp_path):
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("retriever", ["bm25", "tfidf"])
        defs = _defs(tmp_path, ["bm25", "tfidf", "my-new-embedder"])
        sensor = defs.resolve_sensor_def("retriever_registry_sensor")
        result = _evaluate(sensor, instance, defs)
        assert [r.partition_key.keys_by_dimension["retriever"] for r in result.run_requests] == [
            "my-new-embedder"
        ] * len(DOMAINS)
        assert sorted(
            r.partition_key.keys_by_dimension["domain"] for r in result.run_requests
        ) == sorted(DOMAINS)
        [add] = result.dynamic_partitions_requests
        assert add.partition_keys == ["my-new-embedder"]
        # once the partition exists, nothing more is requested
        instance.add_dynamic_partitions("retriever", ["my-new-embedder"])
        again = _evaluate(sensor, instance, defs)
        assert isinstance(again, dg.SkipReason)


def test_removing_an_entry_deletes_nothing(tmp_path):
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("retriever", ["bm25", "old-model"])
        defs = _defs(tmp_path, ["bm25"])
        out = _evaluate(defs.resolve_sensor_def("retriever_registry_sensor"), instance, defs)
        assert isinstance(out, dg.SkipReason)
        assert set(instance.get_dynamic_partitions("retriever")) == {"bm25", "old-model"}


def test_daily_backstop_requests_missing_runs(tmp_path):
    with dg.instance_for_test() as instance:
        defs = _defs(tmp_path, ["bm25"])
        schedule = defs.resolve_schedule_def("retriever_runs_backstop")
        with dg.build_schedule_context(
            instance=instance, resources={"pipeline": defs.resources["pipeline"]}
        ) as ctx:
            requests = schedule(ctx)
        assert len(requests) == len(DOMAINS)
        assert instance.get_dynamic_partitions("retriever") == ["bm25"]


def test_backstop_requests_only_the_runs_still_missing(tmp_path):
    with dg.instance_for_test() as instance:
        defs = _defs(tmp_path, ["bm25", "tfidf"])
        instance.add_dynamic_partitions("retriever", ["bm25", "tfidf"])
        done = [("bm25", d) for d in DOMAINS] + [("tfidf", "Geometry")]
        for name, domain in done:
            instance.report_runless_asset_event(
                dg.AssetMaterialization(
                    asset_key="retriever_runs",
                    partition=str(dg.MultiPartitionKey({"retriever": name, "domain": domain})),
                )
            )
        schedule = defs.resolve_schedule_def("retriever_runs_backstop")
        with dg.build_schedule_context(
            instance=instance, resources={"pipeline": defs.resources["pipeline"]}
        ) as ctx:
            requests = schedule(ctx)
        wanted = sorted(
            (
                r.partition_key.keys_by_dimension["retriever"],
                r.partition_key.keys_by_dimension["domain"],
            )
            for r in requests
        )
        assert wanted == sorted(("tfidf", d) for d in DOMAINS if d != "Geometry")


def test_sensor_adds_partitions_but_requests_nothing_before_a_benchmark_exists(tmp_path):
    with dg.instance_for_test() as instance:
        defs = _defs(tmp_path, ["bm25"])
        (tmp_path / "home" / "t" / "evaluation_benchmark" / "queries.parquet").unlink()
        result = _evaluate(defs.resolve_sensor_def("retriever_registry_sensor"), instance, defs)
        assert not result.run_requests
        [add] = result.dynamic_partitions_requests
        assert add.partition_keys == ["bm25"]


def observe_versions(
    instance: dg.DagsterInstance, asset: str, partitions: Sequence[str | None] = (None,)
) -> dict[str | None, str | None]:
    """The latest observed data version of a source asset, per partition (None: never)."""
    out = {}
    for p in partitions:
        rec = instance.get_latest_data_version_record(dg.AssetKey(asset), True, p)
        version = extract_data_version_from_entry(rec.event_log_entry) if rec else None
        out[p] = version.value if version else None
    return out


def test_input_files_sensor_observes_what_moved_and_the_observations_mark_the_readers(tmp_path):
    """A tick observes the inputs and the registry once; an unchanged tick skips; a changed
    registry entry is observed again, and its data version moves for its partition only."""
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("retriever", ["bm25", "tfidf"])
        defs = _defs(tmp_path, ["bm25", "tfidf"])
        sensor = defs.resolve_sensor_def("input_files_sensor")
        resources = {"pipeline": defs.resources["pipeline"], "stores": defs.resources["stores"]}
        with dg.build_sensor_context(
            instance=instance, definitions=defs, resources=resources
        ) as ctx:
            first = sensor(ctx)
            # the training corpora too (none declared here: their first stamp)
            assert sorted(r.job_name for r in first) == [
                "observe_inputs",
                "observe_registry",
                "observe_training",
            ]
            assert isinstance(sensor(ctx), dg.SkipReason)
            reg = tmp_path / "retrievers.yaml"
            reg.write_text(
                reg.read_text().replace("{name: tfidf, kind: bm25}", "{name: tfidf, kind: tfidf}")
            )
            assert [r.job_name for r in sensor(ctx)] == ["observe_registry"]
            # a label pulled into the stores is observed (it marks the agreement unsynced)
            label = pl.DataFrame(
                [{"task_id": "s:1", "annotator": "ls:1", "query": "q", "shown_first": "a",
                  "shown_second": "b", "label": "first", "study": "s"}],
            )  # fmt: skip
            assert store_labels(defs.resources["stores"].db(), label) == (1, 0)
            assert [r.job_name for r in sensor(ctx)] == ["observe_inputs"]
            assert isinstance(sensor(ctx), dg.SkipReason)
        for job in ("observe_inputs", "observe_registry"):
            assert defs.resolve_job_def(job).execute_in_process(instance=instance).success
        before = observe_versions(instance, "retriever_registry", ["bm25", "tfidf"])
        reg.write_text(
            reg.read_text().replace("{name: tfidf, kind: tfidf}", "{name: tfidf, kind: bm25}")
        )
        assert (
            defs.resolve_job_def("observe_registry").execute_in_process(instance=instance).success
        )
        after = observe_versions(instance, "retriever_registry", ["bm25", "tfidf"])
        assert after["bm25"] == before["bm25"] and after["tfidf"] != before["tfidf"]


def test_sync_sensor_requests_what_the_build_would_run_next_stage_by_stage(tiny_config):
    """Stopped by default; on, it asks for the earliest stage's unsynced steps (the build's
    own `stage_steps`), waits while a run is in progress, does not ask again for a step that
    failed with the same reasons and code, and asks again once the config moves its version."""
    from dagster._core.test_utils import create_run_for_test

    from saber_assets.orchestration.plan import stage_steps
    from saber_assets.stages import BY_JOB

    cfg = tiny_config()
    with dg.instance_for_test() as instance:
        defs = make_definitions(cfg)
        sensor = defs.resolve_sensor_def("sync_sensor")
        assert sensor.default_status == dg.DefaultSensorStatus.STOPPED

        def tick(defs=defs, cursor=None):
            with dg.build_sensor_context(
                instance=instance,
                definitions=defs,
                cursor=cursor,
                resources={"pipeline": defs.resources["pipeline"]},
            ) as ctx:
                return defs.resolve_sensor_def("sync_sensor")(ctx)

        first = tick()
        assert [(r.job_name, r.partition_key) for r in first.run_requests] == [
            ("build_sources", None)
        ]
        # its run failed: the same reasons and code are not asked again
        create_run_for_test(instance, job_name="build_sources", status=dg.DagsterRunStatus.FAILURE)
        held = tick(cursor=first.cursor)
        assert (
            isinstance(held, dg.SkipReason) and "failed with the same reasons" in held.skip_message
        )
        # a config change that moves the corpus' code version asks again
        text = cfg.read_text()
        cfg.write_text(text.replace("name: math", "name: math\n    priority: 3", 1))
        moved = make_definitions(cfg)
        again = tick(moved, cursor=first.cursor)
        assert [r.job_name for r in again.run_requests] == ["build_sources"]
        cfg.write_text(text)
        # a run in progress: it waits
        queued = create_run_for_test(
            instance, job_name="build_sources", status=dg.DagsterRunStatus.STARTED
        )
        waiting = tick(cursor=first.cursor)
        assert isinstance(waiting, dg.SkipReason) and queued.run_id in waiting.skip_message
        instance.report_run_canceled(queued)
        # sources built: the next stage, every chunk, exactly what the build would run
        assert defs.resolve_job_def("build_sources").execute_in_process(instance=instance).success
        nxt = tick(cursor=first.cursor)
        stage = BY_JOB["build_annotations"]
        want = [s.partition for s in stage_steps(defs.get_repository_def(), instance, stage)]
        assert sorted(r.partition_key for r in nxt.run_requests) == sorted(want)
        assert {r.job_name for r in nxt.run_requests} == {"build_annotations"} and len(want) > 1


def test_a_declared_training_corpus_gets_its_partition_and_a_changed_file_moves_only_it(tmp_path):
    """The registry sensor adds a `training_corpus` partition for a corpus an entry declares with
    text; the input sensor observes the corpora again when one's file changes."""
    corpus = tmp_path / "mine.jsonl"
    corpus.write_text('{"id": "a", "p": "Find $x$."}\n')
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("retriever", ["bm25"])
        defs = _defs(tmp_path, ["bm25"])
        reg = tmp_path / "retrievers.yaml"
        reg.write_text(
            "retrievers:\n  - {name: bm25, kind: bm25, meta: {training_data: [by-name-only, "
            f"{{name: mine, path: '{corpus}', fields: {{id: id, problem: p}}}}]}}}}\n"
        )
        sensor = defs.resolve_sensor_def("retriever_registry_sensor")
        result = _evaluate(sensor, instance, defs)
        assert not result.run_requests  # no new retriever: no runs
        [add] = result.dynamic_partitions_requests
        assert add.partitions_def_name == "training_corpus" and add.partition_keys == ["mine"]
        instance.add_dynamic_partitions("training_corpus", ["mine"])
        assert isinstance(_evaluate(sensor, instance, defs), dg.SkipReason)
        watch = defs.resolve_sensor_def("input_files_sensor")

        def observe():
            with dg.build_sensor_context(
                instance=instance, definitions=defs, cursor=cursor[0],
                resources={k: defs.resources[k] for k in ("pipeline", "stores")},
            ) as ctx:  # fmt: skip
                out = watch(ctx)
                cursor[0] = ctx.cursor
            return [] if isinstance(out, dg.SkipReason) else [r.job_name for r in out]

        cursor = [None]
        assert "observe_training" in observe()
        assert observe() == []
        corpus.write_text('{"id": "a", "p": "Find $y$."}\n')
        assert observe() == ["observe_training"]
        # the observation gives the partition the new content's data version
        res = defs.resolve_job_def("observe_training").execute_in_process(instance=instance)
        assert res.success
        [obs] = [
            e.event_specific_data.asset_observation
            for e in res.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
        ]
        assert obs.partition == "mine" and obs.tags.get("dagster/data_version")
