"""Embedding models found on an inference server: a fake OpenAI-compatible one whose model list
changes between sensor evaluations."""

from __future__ import annotations

import hashlib
import logging
import re

import dagster as dg
import polars as pl
import pytest
import yaml

from saber_assets.cli import main
from saber_assets.config import load_config
from saber_assets.definitions import make_definitions
from saber_assets.retrievers.discovery import discovered, discovered_name, registry_for, tick
from saber_assets.retrievers.registry import runnable
from saber_testing.fake_openai import FakeOpenAI

DOMAINS = ["Algebra", "Geometry", "Number Theory", "Combinatorics", "Calculus and Analysis"]
KEY = "sk-test-never-printed-4242"


def embed_or_refuse(body):
    """``emb-*`` models embed (a hashed bag of words, 16 dimensions); the others are chat-only
    and answer the embeddings route as vLLM does for a generative model."""
    if "input" not in body:
        return 400, {"error": "unknown task"}
    if not body["model"].startswith("emb-"):
        return 400, {"error": {"message": "The model does not support Embeddings API"}}
    data = []
    for i, text in enumerate(body["input"]):
        v = [0.0] * 16
        for w in re.findall(r"\w+", text.lower()):
            v[hashlib.blake2b(w.encode(), digest_size=1).digest()[0] % 16] += 1.0
        data.append({"index": i, "embedding": v or [1.0]})
    return 200, {"object": "list", "data": data}


def config(tmp_path, url: str, registry_extra: str = "", timeout_s: float = 5.0):
    reg = tmp_path / "retrievers.yaml"
    reg.write_text("retrievers:\n  - {name: bm25, kind: bm25}\n" + registry_extra)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"name: t\ncorpus: {{sources: [{{name: math, bundled: math}}]}}\n"
        f"retrievers: {{registry: {reg}}}\n"
        f"discovery:\n  endpoints:\n    - {{name: local, base_url: '{url}', "
        f"api_key_env: SABER_TEST_KEY, timeout_s: {timeout_s}, exclude: ['*-draft'], "
        "template: {settings: [statement-statement], full_corpus: false, long_text: truncate}}\n"
    )
    bench = tmp_path / "home" / "t" / "evaluation_benchmark"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "queries.parquet").write_bytes(b"")  # the sensor only asks whether it exists
    return cfg


def evaluate(defs, instance, cursor=None):
    sensor = defs.resolve_sensor_def("discovery_sensor")
    with dg.build_sensor_context(
        instance=instance, definitions=defs, cursor=cursor,
        resources={k: defs.resources[k] for k in ("pipeline", "stores")},
    ) as ctx:  # fmt: skip
        out = sensor(ctx)
        return out, ctx.cursor


def statuses(defs) -> dict[str, str]:
    rows = discovered(defs.resources["stores"].db())
    return dict(zip(rows["model_id"], rows["status"], strict=True))


def test_the_sensor_proposes_a_new_embedding_model_and_requests_only_its_runs(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("SABER_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    models = [{"id": "emb-a", "max_model_len": 512}, "chat-b", "emb-x-draft"]
    with FakeOpenAI(answer=embed_or_refuse, models=models) as srv, dg.instance_for_test() as inst:
        defs = make_definitions(config(tmp_path, srv.url), tmp_path / "home")
        out, cursor = evaluate(defs, inst)
        name = discovered_name("local", "emb-a")
        assert name == "local--emb-a"
        # one proposal; its partition and one run per domain, nothing else
        [add] = out.dynamic_partitions_requests
        assert add.partition_keys == [name]
        assert sorted(r.partition_key.keys_by_dimension["domain"] for r in out.run_requests) == (
            sorted(DOMAINS)
        )
        assert {r.partition_key.keys_by_dimension["retriever"] for r in out.run_requests} == {name}
        # the chat model recorded, never proposed; the excluded one never probed
        assert statuses(defs) == {"emb-a": "proposed", "chat-b": "chat"}
        probed = [r["body"]["model"] for r in srv.requests if r["path"].endswith("/embeddings")]
        assert probed == ["chat-b", "emb-a"]  # in id order
        assert all(r["auth"] == f"Bearer {KEY}" for r in srv.requests)
        cfg = load_config(tmp_path / "c.yaml")
        [entry] = [e for e in registry_for(cfg, defs.resources["stores"].db()) if e.discovered]
        assert entry.params["model"] == "emb-a" and entry.params["backend"] == "openai"
        assert entry.params["embedder"] == {
            "base_url": srv.url, "api_key_env": "SABER_TEST_KEY", "max_input_tokens": 512
        }  # fmt: skip
        assert entry.settings == ["statement-statement"] and entry.params["long_text"] == "truncate"
        definition = entry.definition()
        # the next tick: nothing new, the chat model not probed again
        inst.add_dynamic_partitions("retriever", [name])
        again, cursor = evaluate(defs, inst, cursor)
        assert isinstance(again, dg.SkipReason)
        assert len([r for r in srv.requests if r["path"].endswith("/embeddings")]) == 2
        # the model leaves its server: marked gone, kept in the registry, not runnable
        srv.models = ["chat-b"]
        gone, cursor = evaluate(defs, inst, cursor)
        assert isinstance(gone, dg.SkipReason) and statuses(defs)["emb-a"] == "gone"
        entries = registry_for(cfg, defs.resources["stores"].db())
        [kept] = [e for e in entries if e.name == name]
        assert kept.discovered.status == "gone"
        assert dict(runnable(entries)[1])[name].startswith("gone from local (last seen ")
        # it comes back: the same entry (no new partition, no new request, same definition)
        srv.models = models
        back, cursor = evaluate(defs, inst, cursor)
        assert isinstance(back, dg.SkipReason) and statuses(defs)["emb-a"] == "proposed"
        [same] = [e for e in registry_for(cfg, defs.resources["stores"].db()) if e.discovered]
        assert same.definition() == definition
        assert len(discovered(defs.resources["stores"].db())) == 2
    assert KEY not in caplog.text and KEY not in (cursor or "")


@pytest.mark.parametrize(
    "fault, reason",
    [
        ("500", r"GET .*/models: HTTP 500"),
        ("401", r"HTTP 401 \(the key is refused\)"),
        ("malformed", r"malformed model list"),
        ("timeout", r"no answer within the timeout"),
        ("down", r"ConnectError"),
    ],
)
def test_a_bad_server_is_skipped_with_its_reason_and_nothing_is_dropped(
    tmp_path, monkeypatch, caplog, fault, reason
):
    monkeypatch.setenv("SABER_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    with FakeOpenAI(answer=embed_or_refuse, models=["emb-a", "chat-b"], delay_s=1.5) as srv:
        url = srv.url
        defs = make_definitions(config(tmp_path, url, timeout_s=0.5), tmp_path / "home")
        db = defs.resources["stores"].db()
        endpoints = load_config(tmp_path / "c.yaml").discovery.endpoints
        tick(db, endpoints, {"bm25"})
        before = discovered(db).select("name", "status", "last_seen")
        srv.faults = [None if fault == "down" else fault]
        if fault == "down":
            srv.__exit__()
        with dg.instance_for_test() as inst:
            inst.add_dynamic_partitions("retriever", ["local--emb-a"])
            out, cursor = evaluate(defs, inst)
        assert isinstance(out, dg.SkipReason)
        assert re.search(reason, cursor) and re.search(reason, out.skip_message)
        assert discovered(db).select("name", "status", "last_seen").equals(before)
    assert KEY not in caplog.text and KEY not in cursor and KEY not in out.skip_message


def test_an_unset_key_skips_the_endpoint_and_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("SABER_TEST_KEY", raising=False)
    with FakeOpenAI(answer=embed_or_refuse, models=["emb-a"]) as srv:
        defs = make_definitions(config(tmp_path, srv.url), tmp_path / "home")
        t = tick(
            defs.resources["stores"].db(),
            load_config(tmp_path / "c.yaml").discovery.endpoints,
            set(),
        )
        assert t.skipped == {"local": "$SABER_TEST_KEY is not set"} and not srv.requests


def test_a_name_clash_with_the_file_shadows_the_discovered_entry_and_adopt_writes_it(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("SABER_TEST_KEY", KEY)
    monkeypatch.setenv("SABER_HOME", str(tmp_path / "home"))
    with FakeOpenAI(answer=embed_or_refuse, models=["emb-a", "emb-c"]) as srv:
        cfg = config(tmp_path, srv.url, "  - {name: local--emb-c, kind: tfidf}\n")
        assert main(["registry", "discover", "--config", str(cfg)]) == 0
        assert "proposed: local--emb-a" in capsys.readouterr().out
        defs = make_definitions(cfg, tmp_path / "home")
        assert statuses(defs) == {"emb-a": "proposed", "emb-c": "shadowed"}
        entries = registry_for(load_config(cfg), defs.resources["stores"].db())
        # the file wins: one local--emb-c, the file's
        assert [(e.name, e.kind) for e in entries] == [
            ("bm25", "bm25"), ("local--emb-c", "tfidf"), ("local--emb-a", "dense")
        ]  # fmt: skip
        assert main(["registry", "list", "--config", str(cfg)]) == 0
        listing = capsys.readouterr().out
        assert re.search(r"local--emb-a\s+┆ endpoint local\s+┆ proposed", listing)
        assert re.search(r"local--emb-c\s+┆ endpoint local\s+┆ shadowed", listing)
        assert KEY not in listing
        # adopt: the entry goes into the file, the discovered row steps aside
        assert main(["registry", "adopt", "local--emb-a", "--config", str(cfg)]) == 0
        text = (tmp_path / "retrievers.yaml").read_text()
        assert "name: local--emb-a" in text and "emb-a" in text and KEY not in text
        entries = registry_for(load_config(cfg), defs.resources["stores"].db())
        assert [e.name for e in entries if e.discovered] == []
        assert [e.name for e in entries].count("local--emb-a") == 1
        assert main(["registry", "adopt", "local--nope", "--config", str(cfg)]) == 2
        assert "no discovered embedding model named 'local--nope'" in capsys.readouterr().err


def test_a_discovered_model_runs_only_its_own_work_and_reuses_its_embeddings(
    shared_build, tmp_path, monkeypatch, capsys
):
    """The build with discovery on: a model that appears on the server gets its index, its runs,
    the leaderboard and the analyses, nothing else; gone, its rows stay flagged; back, its
    embeddings come from the cache."""
    monkeypatch.setenv("SABER_TEST_KEY", KEY)
    cfg = shared_build("tiny").copy_to(tmp_path, monkeypatch)
    with FakeOpenAI(answer=embed_or_refuse, models=["chat-b"]) as srv:
        doc = yaml.safe_load(cfg.read_text())
        doc["discovery"] = {"endpoints": [{
            "name": "local", "base_url": srv.url, "api_key_env": "SABER_TEST_KEY",
            "template": {"settings": ["statement-statement"], "full_corpus": False},
        }]}  # fmt: skip
        cfg.write_text(yaml.safe_dump(doc))
        assert main(["build", "--config", str(cfg)]) == 0
        capsys.readouterr()
        srv.models = ["chat-b", {"id": "emb-a", "max_model_len": 256}]
        assert main(["registry", "discover", "--config", str(cfg)]) == 0
        assert main(["build", "--config", str(cfg), "--steps"]) == 0  # a line per partition
        out = capsys.readouterr().out
        n_domains = len(re.findall(r"retriever_runs \[[^|\]]+\|local--emb-a\]", out))
        assert n_domains >= 1
        assert re.findall(r"retriever_runs \[[^|\]]+\|(\S+)\]", out) == ["local--emb-a"] * n_domains
        assert re.findall(r"retriever_index \[(\S+)\]", out) == ["local--emb-a"]
        assert re.search(r"^\s+leaderboard\s+rows=", out, re.M)
        assert not re.search(
            r"^\s+(corpus|topic_annotations|tournament_judgments|benchmark_export)\b", out, re.M
        )
        home = tmp_path / "home" / "tiny"
        board = pl.read_csv(home / "leaderboard" / "leaderboard.csv")
        row = board.filter(pl.col("retriever") == "local--emb-a")
        assert row.height == 1 and row["origin"][0] == "discovered on local"
        assert row["gone_last_seen"].is_null().all()
        # gone: not built again, its rows stay on the leaderboard with the date last seen
        srv.models = ["chat-b"]
        assert main(["registry", "discover", "--config", str(cfg)]) == 0
        assert main(["build", "--config", str(cfg), "--select", "leaderboard", "--force"]) == 0
        out = capsys.readouterr().out
        assert "retriever local--emb-a not built: gone from local (last seen" in out
        board = pl.read_csv(home / "leaderboard" / "leaderboard.csv")
        row = board.filter(pl.col("retriever") == "local--emb-a")
        assert row.height == 1 and row["gone_last_seen"][0] is not None
        # back: the same entry, nothing to build, and scoring it asks the server for nothing
        srv.models = ["chat-b", {"id": "emb-a", "max_model_len": 256}]
        assert main(["registry", "discover", "--config", str(cfg)]) == 0
        assert main(["build", "--config", str(cfg)]) == 0
        assert "steps:  0 run" in re.sub(r"steps:\s+", "steps:  ", capsys.readouterr().out)
        asked = len(srv.requests)
        assert main(["evaluate", "local--emb-a", "--config", str(cfg), "--resamples", "10"]) == 0
        assert len(srv.requests) == asked  # every vector from the embedding cache


def test_a_bad_template_skips_the_endpoint_with_the_reason(tmp_path):
    from saber_assets.config import DiscoveryEndpoint

    with FakeOpenAI(answer=embed_or_refuse, models=["emb-a"]) as srv:
        defs = make_definitions(config(tmp_path, srv.url), tmp_path / "home")
        db = defs.resources["stores"].db()
        bad = DiscoveryEndpoint(name="x", base_url=srv.url, template={"kind": "bm25"})
        t = tick(db, [bad], set())
        assert "template: unknown keys ['kind']" in t.skipped["x"]
        assert discovered(db).height == 0  # nothing half-written
        odd = DiscoveryEndpoint(name="y", base_url=srv.url, template={"long_text": "sideways"})
        assert "y" in tick(db, [odd], set()).skipped
