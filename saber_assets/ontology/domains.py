"""Benchmark domains come from the ontology's first level, through the config.

``ontology.domains`` is either a mapping from first-level nodes (named by id, url or title) to a
domain name — several nodes may share a domain, unmapped nodes have none — or ``first_level``:
each first-level node is its own domain, named by its title. Without the key, the bundled
MathWorld uses the paper's five-domain mapping and any other ontology uses ``first_level``.

The domain list (in mapping order, or the ontology's first-level order) drives the ``domain``
partitions, candidate quotas, the exchange format and the leaderboard columns: no other list of
domains exists in the code.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..settings import OntologyConfig
from .tree import TopicDag, first_level_nodes, load_dag

# The paper's five domains over MathWorld's first level (DESIGN.md §2).
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

# A domain is a Dagster partition key (also inside retriever|domain keys) and a file name.
_BAD_NAME = re.compile(r"[|/\\,\x00-\x1f]|\.\.\.")


class DomainError(ValueError):
    """The domain configuration does not fit the ontology; the message says what to change."""


def domain_spec(cfg: OntologyConfig) -> dict[str, str] | str:
    if cfg.domains is not None:
        return cfg.domains
    if cfg.bundled in BUNDLED_DOMAINS:
        return BUNDLED_DOMAINS[cfg.bundled]
    return "first_level"


def check_domain_name(name: str, origin: str) -> str:
    if not name or name != name.strip() or _BAD_NAME.search(name):
        raise DomainError(
            f"domain name {name!r} ({origin}) cannot be a partition key: it must be non-empty, "
            "without surrounding spaces, '|', '/', '\\', ',', '...' or control characters; "
            "name the domains with an ontology.domains mapping"
        )
    return name


def resolve_domains(dag: TopicDag, spec: dict[str, str] | str) -> tuple[dict[str, str], list[str]]:
    """(first-level DAG key -> domain, the ordered domain list) for this ontology."""
    first = first_level_nodes(dag)
    if spec == "first_level":
        of = {
            k: check_domain_name(dag.graph.nodes[k]["title"], "a first-level title") for k in first
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
    """The configured domains, in order (``first_level`` reads the ontology's first level)."""
    return list(dict.fromkeys(_names_for(cfg.model_dump_json())))
