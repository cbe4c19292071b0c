"""`saber registry`: the effective registry — the file's entries and the embedding models found on
the inference servers of ``discovery.endpoints``.

    saber registry list              every entry with its origin and status
    saber registry discover          one discovery tick now (what the sensor does on its own)
    saber registry adopt NAME        write a discovered entry into the registry file
"""

from __future__ import annotations

import argparse

import polars as pl

from saber_assets.config import data_home, load_config
from saber_assets.home_lock import holding_home


def add_parser(sub) -> None:
    p = sub.add_parser("registry", help="the retriever registry: the file and discovered models")
    verbs = p.add_subparsers(dest="verb", required=True)
    for verb, text in (
        ("list", "every entry with its origin (file or endpoint) and status"),
        ("discover", "list each endpoint's models and probe the new ones, now"),
        ("adopt", "append a discovered entry to the registry file"),
    ):
        v = verbs.add_parser(verb, help=text)
        v.add_argument("--config", help="pipeline config YAML")
        if verb == "adopt":
            v.add_argument("name", help="the discovered entry's name (`saber registry list`)")


def table(cfg, db) -> pl.DataFrame:
    """The file's entries and every discovered row (in the registry or not), one line each."""
    from saber_assets.retrievers.discovery import discovered
    from saber_assets.retrievers.registry import load_registry

    rows = [
        {"name": e.name, "origin": "file", "status": "registered", "kind": e.kind,
         "model": str(e.params.get("model") or ""), "last_seen": "", "probe": ""}
        for e in load_registry(cfg.retrievers.registry_path())
    ]  # fmt: skip
    for r in discovered(db).iter_rows(named=True):
        rows.append({
            "name": r["name"], "origin": f"endpoint {r['endpoint']}", "status": r["status"],
            "kind": "dense" if r["entry"] is not None else "-", "model": r["model_id"],
            "last_seen": str(r["last_seen"])[:19], "probe": r["probe"] or "",
        })  # fmt: skip
    return pl.DataFrame(rows)


def run(args: argparse.Namespace) -> int:
    from saber_assets.pipeline import open_stores
    from saber_assets.retrievers.discovery import adopt, tick
    from saber_assets.retrievers.registry import load_registry

    cfg = load_config(args.config)
    db = open_stores(cfg)
    if args.verb == "list":
        with pl.Config(tbl_rows=-1, tbl_width_chars=160, fmt_str_lengths=60):
            print(table(cfg, db))
        return 0
    if args.verb == "discover":
        if not cfg.discovery.endpoints:
            print("saber registry discover: no discovery.endpoints in the config")
            return 0
        names = {e.name for e in load_registry(cfg.retrievers.registry_path())}
        t = tick(db, cfg.discovery.endpoints, names)
        print(f"saber registry discover: {t.summary()}")
        return 1 if t.skipped and len(t.skipped) == len(cfg.discovery.endpoints) else 0
    with holding_home(data_home(), f"saber registry adopt {args.name}"):
        entry = adopt(db, args.name, cfg.retrievers.registry_path())
    print(f"saber registry adopt: {entry['name']} written to {cfg.retrievers.registry_path()}")
    return 0
