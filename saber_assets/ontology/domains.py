"""Benchmark domains come from the ontology's first level, through the config.

``ontology.domains`` is either a mapping from first-level nodes (named by id, url or title) to a
domain name — several nodes may share a domain, unmapped nodes have none — or ``first_level``:
each first-level node is its own domain, named by its title. Without the key, the bundled
MathWorld uses the paper's five-domain mapping and any other ontology uses ``first_level``.

The domain list (in mapping order, or the ontology's first-level order) drives the ``domain``
partitions, candidate quotas, the exchange format and the leaderboard columns: no other list of
domains exists in the code. Everything a person reads names a domain by its title, whatever it
holds (MSC2020's "Order, lattices, ordered algebraic structures"); a partition key (and a file
name) is the title where Dagster and file systems take it as it is, else a slug of it, made
unique (``domain_keys``). First-level nodes with the same title are one domain.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from functools import lru_cache

from saber_assets.config import OntologyConfig
from saber_assets.ontology.tree import TopicDag, first_level_nodes, load_dag

# The paper's five domains over MathWorld's first level (DESIGN.md, ontology).
# Order matters: it is the domain order of partitions, quotas and leaderboard columns.
MATHWORLD_DOMAINS = {
    "Algebra": "Algebra",
    "Geometry": "Geometry",
    "NumberTheory": "Number Theory",
    "DiscreteMathematics": "Combinatorics",
    "ProbabilityandStatistics": "Combinatorics",
    "RecreationalMathematics": "Combinatorics",
    "CalculusandAnalysis": "Calculus and Analysis",
}
BUNDLED_DOMAINS = {"mathworld": MATHWORLD_DOMAINS}

# What a partition key (also inside retriever|domain keys) and a file name cannot hold: Dagster's
# multi-partition delimiters and reserved substrings, path separators, control characters.
_BAD_KEY = re.compile(r"[|,\[\]/\\:*?\"<>\x00-\x1f]|\.\.\.|^\.")
_SLUG_DROP = re.compile(r"[^A-Za-z0-9]+")


class DomainError(ValueError):
    """The domain configuration does not fit the ontology; the message says what to change."""


def domain_spec(cfg: OntologyConfig) -> dict[str, str] | str:
    if cfg.domains is not None:
        return cfg.domains
    if cfg.bundled in BUNDLED_DOMAINS:
        return BUNDLED_DOMAINS[cfg.bundled]
    return "first_level"


def check_domain_name(name: str, origin: str) -> str:
    """A domain title: any text a person can read, non-empty, without surrounding spaces."""
    if not isinstance(name, str) or not name or name != name.strip() or "\n" in name:
        raise DomainError(
            f"domain name {name!r} ({origin}) must be non-empty, on one line, without "
            "surrounding spaces"
        )
    return name


def partition_key(title: str) -> str:
    """The title where it is a safe partition key and file name, else its ASCII slug (a title
    with no ASCII letter or digit: ``domain-`` and a hash of it)."""
    if not _BAD_KEY.search(title) and len(title) <= 120:
        return title
    slug = _SLUG_DROP.sub("-", title).strip("-")[:80].strip("-")
    return slug or f"domain-{_short_hash(title)}"


def _short_hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def keys_for(titles: list[str]) -> dict[str, str]:
    """title -> partition key, unique: a slug two titles share gets each title's hash (stable:
    the same title always gets the same key, whatever the other domains are)."""
    first = {t: partition_key(t) for t in titles}
    count = Counter(key.casefold() for key in first.values())
    return {t: k if count[k.casefold()] == 1 else f"{k}-{_short_hash(t)}" for t, k in first.items()}


def resolve_domains(dag: TopicDag, spec: dict[str, str] | str) -> tuple[dict[str, str], list[str]]:
    """(first-level DAG key -> domain, the ordered domain list) for this ontology."""
    first = first_level_nodes(dag)
    if spec == "first_level":
        of = {
            k: check_domain_name(str(dag.graph.nodes[k]["title"]).strip(), "a first-level title")
            for k in first
        }
        return of, list(dict.fromkeys(of.values()))
    if not isinstance(spec, dict):
        raise DomainError(f"ontology.domains must be a mapping or 'first_level', not {spec!r}")
    names = {}
    for k in first:
        node = dag.graph.nodes[k]
        for alias in (k, node["title"], *node.get("ids", ())):
            names.setdefault(str(alias), k)
    unknown = [key for key in spec if key not in names]
    if unknown:
        listing = ", ".join(repr(dag.graph.nodes[k]["title"]) for k in first[:20])
        raise DomainError(
            f"ontology.domains names {unknown} but the ontology's first level has no such node "
            f"(by id, url or title); its first-level titles: {listing}"
        )
    of = {names[key]: check_domain_name(d, f"ontology.domains[{key!r}]") for key, d in spec.items()}
    return of, list(dict.fromkeys(spec.values()))


@lru_cache(maxsize=8)
def _names_for(cfg_json: str) -> tuple[str, ...]:
    cfg = OntologyConfig.model_validate_json(cfg_json)
    spec = domain_spec(cfg)
    if isinstance(spec, dict):
        return tuple(check_domain_name(d, f"ontology.domains[{k!r}]") for k, d in spec.items())
    return tuple(resolve_domains(load_dag(cfg), spec)[1])


def domain_names(cfg: OntologyConfig) -> list[str]:
    """The configured domains' titles, in order (``first_level`` reads the ontology's first
    level): what every table, report and leaderboard column shows."""
    return list(dict.fromkeys(_names_for(cfg.model_dump_json())))


def domain_keys(cfg: OntologyConfig) -> dict[str, str]:
    """Domain title -> its partition key (and file name), in domain order."""
    return keys_for(domain_names(cfg))


def domain_title(cfg: OntologyConfig, key: str) -> str:
    """The title of the domain whose partition key is ``key``."""
    for title, k in domain_keys(cfg).items():
        if k == key:
            return title
    raise DomainError(f"no configured domain has the partition key {key!r}")
