"""Topic ontology: load a DAG (or an expanded tree), merge by url, expand DAG -> tree.

Every DAG node with several root paths becomes one tree node per path (the paper's DAG->tree
step); a tree node's identity is its path of titles from the root.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from saber_assets.config import (
    BUNDLED_ONTOLOGIES,
    DATA_DIR,
    MAX_TREE_NODES,
    OntologyConfig,
    is_json_nodes,
    resolve_path,
)

if TYPE_CHECKING:
    import networkx as nx  # imported where a DAG is built: 0.55 s of every process's start

PATH_SEP = " › "
SEP_BYTES = len(PATH_SEP.encode("utf-8"))


class OntologyError(ValueError):
    """The ontology input is malformed; the message names the file and the offending node/edge."""


@dataclass
class TopicDag:
    """Topics keyed by url (or id), with titles and parent->child edges."""

    graph: nx.DiGraph
    warnings: list[str] = field(default_factory=list)

    @property
    def n_topics(self) -> int:
        return self.graph.number_of_nodes()


def _open_text(path: Path):
    return (
        gzip.open(path, "rt", encoding="utf-8")
        if path.suffix == ".gz"
        else open(path, encoding="utf-8")
    )


MAX_ONTOLOGY_BYTES = 512 * 2**20  # of the file as read (decompressed): MathWorld's is ~2 MB


def read_capped(path: Path, what: str) -> str:
    """An ontology file's text (decompressed where it is ``.gz``), refused past
    ``MAX_ONTOLOGY_BYTES`` having read no more than that."""
    try:
        with _open_text(path) as f:
            text = f.read(MAX_ONTOLOGY_BYTES + 1)  # characters: at least as many bytes
    except (UnicodeDecodeError, EOFError, OSError) as exc:
        raise OntologyError(f"{path}: not a valid {what}: {exc}") from None
    if len(text.encode("utf-8", errors="surrogatepass")) > MAX_ONTOLOGY_BYTES:
        raise OntologyError(
            f"{path}: over {MAX_ONTOLOGY_BYTES:,} bytes: not read (a topic DAG is a few MB)"
        )
    return text


def read_csv_rows(path: Path) -> list[dict]:
    """The rows of an ontology CSV file (``read_capped``); a malformed one refused by name."""
    try:
        return list(csv.DictReader(io.StringIO(read_capped(path, "CSV file"))))
    except csv.Error as exc:
        raise OntologyError(f"{path}: not a valid CSV file: {exc}") from None


def _read_json(path: Path, what: str):
    text = read_capped(path, f"JSON {what}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OntologyError(f"{path}: not a valid JSON {what}: {exc}") from None
    except RecursionError:
        raise OntologyError(
            f"{path}: the {what} is nested deeper than its reader can follow (a topic tree is "
            f"a few levels deep, at most {MAX_TREE_DEPTH}): refused"
        ) from None


def dag_from_nested_tree(path: Path) -> TopicDag:
    """Read a nested {url, title, links:[...]} tree and merge its nodes by url into a DAG."""
    import networkx as nx

    root = _read_json(path, "tree")
    g = nx.DiGraph()
    warnings: list[str] = []
    stack = [(root, None, ())]
    while stack:
        node, parent, titles = stack.pop()
        if not isinstance(node, dict) or "title" not in node:
            raise OntologyError(
                f"{path}: node under {PATH_SEP.join(titles) or 'the root'} has no 'title'"
            )
        key = node.get("url") or node["title"]
        title = node["title"]
        if key in g and g.nodes[key]["title"] != title:
            raise OntologyError(
                f"{path}: url {key!r} has two titles: {g.nodes[key]['title']!r} and {title!r}"
            )
        g.add_node(key, title=title)
        here = (*titles, title)
        if parent is not None:
            g.add_edge(parent, key)
        links = node.get("links") or []
        seen: set[str] = set()
        for child in links:
            ckey = child.get("url") or child.get("title") if isinstance(child, dict) else None
            if ckey in seen:
                warnings.append(
                    f"{child.get('title')!r} is listed more than once under {PATH_SEP.join(here)} (kept once)"
                )
            seen.add(ckey)
        for child in reversed(links):
            stack.append((child, key, here))
    return _checked(TopicDag(g, sorted(set(warnings))), path)


def dag_from_nodes_edges(nodes_path: Path, edges_path: Path | None = None) -> TopicDag:
    """Read a DAG given as nodes + edges: two CSV files (id,title[,url] / parent,child) or one JSON
    file {"nodes": [{"id", "title", "url"?}], "edges": [[parent, child], ...]}. Nodes sharing a url merge."""
    if is_json_nodes(nodes_path.name):
        if edges_path is not None:
            raise OntologyError(
                f"{nodes_path}: a JSON nodes file carries its own 'edges'; "
                f"drop the separate edges file {edges_path}"
            )
        doc = _read_json(nodes_path, "{nodes, edges} document")
        if not isinstance(doc, dict):
            raise OntologyError(f"{nodes_path}: expected a JSON object with 'nodes' and 'edges'")
        # JSON locations are 1-based item numbers in the 'nodes' / 'edges' lists
        nodes = [(i + 1, n) for i, n in enumerate(doc.get("nodes", []))]
        edges = [(i + 1, e) for i, e in enumerate(doc.get("edges", []))]
        edges_path = nodes_path
    elif edges_path is None:
        raise OntologyError(f"{nodes_path}: CSV nodes need an edges file (parent,child)")
    else:
        # CSV locations are file line numbers (the header is line 1)
        nodes = [(i + 2, n) for i, n in enumerate(read_csv_rows(nodes_path))]
        edges = [
            (i + 2, (r.get("parent"), r.get("child")))
            for i, r in enumerate(read_csv_rows(edges_path))
        ]
    import networkx as nx

    g = nx.DiGraph()
    key_of: dict[str, str] = {}
    for line, n in nodes:
        if not isinstance(n, dict) or not n.get("id") or not n.get("title"):
            raise OntologyError(f"{nodes_path}:{line}: node needs 'id' and 'title' (got {n})")
        key = n.get("url") or str(n["id"])
        key_of[str(n["id"])] = key
        ids = [*g.nodes[key].get("ids", ()), str(n["id"])] if key in g else [str(n["id"])]
        g.add_node(key, title=n["title"], ids=ids)
    for line, e in edges:
        if not isinstance(e, (list, tuple)) or len(e) != 2:
            raise OntologyError(f"{edges_path}:{line}: an edge is a [parent, child] pair (got {e})")
        p, c = (str(x) for x in e)
        for end in (p, c):
            if end not in key_of:
                raise OntologyError(
                    f"{edges_path}:{line}: edge {p} -> {c} names unknown node {end!r}"
                )
        g.add_edge(key_of[p], key_of[c])
    return _checked(TopicDag(g), edges_path)


def _checked(dag: TopicDag, path: Path) -> TopicDag:
    import networkx as nx

    try:
        cycle = nx.find_cycle(dag.graph)
    except nx.NetworkXNoCycle:
        return dag
    names = (
        " -> ".join(dag.graph.nodes[u]["title"] for u, _ in cycle)
        + " -> "
        + dag.graph.nodes[cycle[0][0]]["title"]
    )
    raise OntologyError(f"{path}: the ontology has a cycle: {names}")


@dataclass
class TopicTree:
    """An expanded tree in preorder: node i's parent has a smaller index (root = 0, parent -1)."""

    parent: np.ndarray  # int32
    depth: np.ndarray  # int16
    topic: np.ndarray  # int32: index of the DAG node (merged url) this tree node copies
    titles: list[str]
    urls: list[str]
    paths: list[str]
    domains: list[str | None]

    @property
    def n_nodes(self) -> int:
        return len(self.parent)

    def children(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in range(self.n_nodes)]
        for i in range(1, self.n_nodes):
            kids[self.parent[i]].append(i)
        return kids

    def to_frame(self) -> pl.DataFrame:
        n_children = np.bincount(self.parent[1:], minlength=self.n_nodes)
        return pl.DataFrame(
            {
                "node": np.arange(self.n_nodes, dtype=np.int32),
                "parent": self.parent,
                "depth": self.depth,
                "topic": self.topic,
                "title": self.titles,
                "url": self.urls,
                "path": self.paths,
                "domain": self.domains,
                "n_children": n_children.astype(np.int32),
            }
        )

    @classmethod
    def from_frame(cls, df: pl.DataFrame) -> TopicTree:
        df = df.sort("node")
        return cls(
            parent=df["parent"].to_numpy().astype(np.int32),
            depth=df["depth"].to_numpy().astype(np.int16),
            topic=df["topic"].to_numpy().astype(np.int32),
            titles=df["title"].to_list(),
            urls=df["url"].to_list(),
            paths=df["path"].to_list(),
            domains=df["domain"].to_list(),
        )


def _roots(dag: TopicDag) -> list[str]:
    roots = [k for k in dag.graph.nodes if dag.graph.in_degree(k) == 0]
    if not roots:
        raise OntologyError("the ontology has no root (every node has a parent)")
    return roots


def first_level_nodes(dag: TopicDag) -> list[str]:
    """The DAG keys of the tree's depth-1 nodes: the root's children, or the roots themselves when
    there are several (they hang under a synthetic root)."""
    roots = _roots(dag)
    return list(dag.graph.successors(roots[0])) if len(roots) == 1 else roots


# what an expanded tree may reach besides its node count: every node stores its whole path, so
# a plain chain of long titles grows quadratically (8,000 titles of 64 characters, a 0.9 MB
# file, filled the memory), and depth is stored as int16. The paths are counted in UTF-8
# bytes, not characters: an astral character is four bytes in a string too (255 titles of 6,000
# of them took 1.97 GB under a cap of characters)
MAX_TREE_DEPTH = 256
MAX_PATH_BYTES = 200_000_000


@dataclass(frozen=True)
class TreeExtent:
    nodes: int  # one per root path of each DAG node, plus a synthetic root for several roots
    depth: int  # the deepest node's depth (the root's is 0)
    path_bytes: int  # the UTF-8 bytes of every node's path together


def tree_extent(dag: TopicDag) -> TreeExtent:
    """What the expanded tree would hold, counted without building it: paths multiply at every
    diamond (a few kilobytes of DAG can expand to billions of nodes), and each copy stores its
    path from the root."""
    import networkx as nx

    g = dag.graph
    several = len(_roots(dag)) > 1
    paths: dict[str, int] = {}  # root paths that reach the node
    chars: dict[str, int] = {}  # their UTF-8 bytes together
    depth: dict[str, int] = {}
    for key in nx.topological_sort(g):
        parents = list(g.predecessors(key))
        title = len(g.nodes[key]["title"].encode("utf-8", errors="replace"))
        if parents:
            paths[key] = sum(paths[p] for p in parents)
            chars[key] = sum(chars[p] + paths[p] * (SEP_BYTES + title) for p in parents)
            depth[key] = 1 + max(depth[p] for p in parents)
        else:
            paths[key], depth[key] = 1, int(several)
            chars[key] = title + (len("ROOT") + SEP_BYTES if several else 0)
    return TreeExtent(
        nodes=sum(paths.values()) + several,
        depth=max(depth.values(), default=0),
        path_bytes=sum(chars.values()),
    )


def tree_size(dag: TopicDag) -> int:
    """How many nodes the expanded tree has (``tree_extent``)."""
    return tree_extent(dag).nodes


def expand_to_tree(
    dag: TopicDag,
    domain_of: dict[str, str] | None = None,
    root_title: str = "ROOT",
    max_nodes: int = MAX_TREE_NODES,
) -> TopicTree:
    """Duplicate each DAG node once per root path. Several DAG roots get a synthetic common root.

    ``domain_of`` maps first-level DAG keys to domains (``ontology.domains``); every node inherits
    its first-level ancestor's domain on its path (a node reached under two domains is copied once
    per path, so each copy has one domain). A DAG whose tree would pass ``max_nodes`` is refused
    with the size it would reach."""
    g = dag.graph
    extent = tree_extent(dag)
    if extent.nodes > max_nodes:
        raise OntologyError(
            f"the ontology's {g.number_of_nodes():,} topics expand to a tree of {extent.nodes:,} "
            f"nodes (one per root path), past ontology.max_tree_nodes = {max_nodes:,}: its "
            "diamonds multiply the paths; raise the cap if that is meant"
        )
    if extent.depth > MAX_TREE_DEPTH:
        raise OntologyError(
            f"the ontology's {g.number_of_nodes():,} topics are {extent.depth:,} levels deep, past "
            f"{MAX_TREE_DEPTH}: a topic tree is a few levels deep; is it a chain?"
        )
    if extent.path_bytes > MAX_PATH_BYTES:
        raise OntologyError(
            f"the ontology's {g.number_of_nodes():,} topics expand to paths of "
            f"{extent.path_bytes:,} bytes together (UTF-8), past {MAX_PATH_BYTES:,}: each node "
            "stores its path from the root; long titles on deep branches multiply them"
        )
    keys = list(g.nodes)
    index = {k: i for i, k in enumerate(keys)}
    roots = _roots(dag)
    domain_of = domain_of or {}
    parent, depth, topic, titles, urls, paths, domains = [], [], [], [], [], [], []

    def add(key: str | None, par: int, dep: int, path: str, domain: str | None) -> int:
        parent.append(par)
        depth.append(dep)
        topic.append(index[key] if key is not None else -1)
        titles.append(g.nodes[key]["title"] if key is not None else root_title)
        urls.append(key if key is not None else "")
        paths.append(path)
        domains.append(domain)
        return len(parent) - 1

    if len(roots) == 1:
        top = add(roots[0], -1, 0, g.nodes[roots[0]]["title"], None)
        first = [(c, top) for c in g.successors(roots[0])]
    else:
        top = add(None, -1, 0, root_title, None)
        first = [(r, top) for r in roots]
    # Iterative DFS (preorder, children in input order) so deep DAGs do not hit the recursion limit.
    stack = [(k, p, 1, None) for k, p in reversed(first)]
    while stack:
        key, par, dep, domain = stack.pop()
        title = g.nodes[key]["title"]
        if dep == 1:
            domain = domain_of.get(key)
        me = add(key, par, dep, paths[par] + PATH_SEP + title, domain)
        for child in reversed(list(g.successors(key))):
            stack.append((child, me, dep + 1, domain))
    return TopicTree(
        parent=np.asarray(parent, dtype=np.int32),
        depth=np.asarray(depth, dtype=np.int16),
        topic=np.asarray(topic, dtype=np.int32),
        titles=titles,
        urls=urls,
        paths=paths,
        domains=domains,
    )


def load_dag(cfg: OntologyConfig) -> TopicDag:
    """The configured ontology: bundled, a nested tree file, or nodes + edges."""
    if cfg.bundled:
        return dag_from_nested_tree(DATA_DIR / BUNDLED_ONTOLOGIES[cfg.bundled])
    if cfg.path:
        return dag_from_nested_tree(resolve_path(cfg.path))
    return dag_from_nodes_edges(
        resolve_path(cfg.nodes), resolve_path(cfg.edges) if cfg.edges else None
    )
