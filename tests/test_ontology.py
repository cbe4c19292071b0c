import gzip
import json
import math

import networkx as nx
import numpy as np
import pytest
from dagster import MultiPartitionsDefinition, StaticPartitionsDefinition

from saber_assets.config import BUNDLED_ONTOLOGIES, DATA_DIR, OntologyConfig
from saber_assets.ontology.domains import (
    DomainError,
    check_domain_name,
    domain_names,
    domain_spec,
    keys_for,
    resolve_domains,
)
from saber_assets.ontology.similarity import (
    LCAIndex,
    information_content,
    lin,
    lin_table,
    subtree_counts,
)
from saber_assets.ontology.tree import (
    OntologyError,
    TopicTree,
    dag_from_nested_tree,
    dag_from_nodes_edges,
    expand_to_tree,
    first_level_nodes,
    load_dag,
)


def _diamond(tmp_path):
    # R -> A, R -> B, A -> D, B -> D, D -> E  (D and its child E have two root paths)
    doc = {
        "nodes": [{"id": k, "title": k} for k in "RABDE"],
        "edges": [["R", "A"], ["R", "B"], ["A", "D"], ["B", "D"], ["D", "E"]],
    }
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(doc))
    return path


def test_diamond_dag_expands_to_tree(tmp_path):
    tree = expand_to_tree(dag_from_nodes_edges(_diamond(tmp_path)))
    assert tree.paths == [
        "R",
        "R › A",
        "R › A › D",
        "R › A › D › E",
        "R › B",
        "R › B › D",
        "R › B › D › E",
    ]
    assert tree.parent.tolist() == [-1, 0, 1, 2, 0, 4, 5]
    # Both copies of D (and of E) point at the same DAG topic.
    assert tree.topic[2] == tree.topic[5] and tree.topic[3] == tree.topic[6]


def test_csv_nodes_edges_and_url_merge(tmp_path):
    (tmp_path / "n.csv").write_text(
        "id,title,url\n1,Root,r\n2,Left,l\n3,Right,r2\n4,Shared,s\n5,SharedAgain,s2\n"
    )
    (tmp_path / "e.csv").write_text("parent,child\n1,2\n1,3\n2,4\n3,4\n")
    tree = expand_to_tree(dag_from_nodes_edges(tmp_path / "n.csv", tmp_path / "e.csv"))
    # Node 5 is a second root: a synthetic root joins them.
    assert tree.paths[0] == "ROOT" and "ROOT › SharedAgain" in tree.paths
    assert tree.paths.count("ROOT › Root › Left › Shared") == 1 and tree.n_nodes == 7


def test_cycle_and_unknown_node_are_clear_errors(tmp_path):
    cyc = tmp_path / "cyc.json"
    cyc.write_text(
        json.dumps(
            {
                "nodes": [{"id": k, "title": k} for k in "RAB"],
                "edges": [["R", "A"], ["A", "B"], ["B", "A"]],
            }
        )
    )
    with pytest.raises(
        OntologyError, match=r"cyc.json: the ontology has a cycle: (A -> B -> A|B -> A -> B)"
    ):
        dag_from_nodes_edges(cyc)
    unk = tmp_path / "unk.json"
    unk.write_text(json.dumps({"nodes": [{"id": "R", "title": "R"}], "edges": [["R", "X"]]}))
    with pytest.raises(OntologyError, match=r"unk.json:1: edge R -> X names unknown node 'X'"):
        dag_from_nodes_edges(unk)


def test_mathworld_round_trip():
    path = DATA_DIR / BUNDLED_ONTOLOGIES["mathworld"]
    with gzip.open(path, "rt") as f:
        raw = json.load(f)

    def count(n):
        return 1 + sum(count(c) for c in n["links"])

    assert count(raw) == 17_113  # the file, including the repeated AlgebraicSurfaces sibling
    dag = dag_from_nested_tree(path)
    assert dag.n_topics == 10_586
    assert dag.warnings == [
        "'AlgebraicSurfaces' is listed more than once under Mathematics › Geometry › Surfaces (kept once)"
    ]
    domain_of, domains = resolve_domains(dag, domain_spec(OntologyConfig()))
    assert domains == [
        "Algebra",
        "Geometry",
        "Number Theory",
        "Combinatorics",
        "Calculus and Analysis",
    ]
    tree = expand_to_tree(dag, domain_of)
    assert tree.n_nodes == 17_022  # 17,113 minus the repeated 91-node subtree
    assert int(tree.depth.max()) == 5
    first_level = {
        tree.titles[i]: tree.domains[i] for i in range(tree.n_nodes) if tree.depth[i] == 1
    }
    assert first_level["DiscreteMathematics"] == "Combinatorics" and first_level["Topology"] is None
    # Domains are inherited from the first level.
    assert all(
        tree.domains[i] == tree.domains[tree.parent[i]]
        for i in range(tree.n_nodes)
        if tree.depth[i] > 1
    )


def test_lca_matches_networkx_on_random_pairs():
    rng = np.random.default_rng(7)
    n = 400
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)], dtype=np.int32)
    depth = np.zeros(n, dtype=np.int16)
    for i in range(1, n):
        depth[i] = depth[parent[i]] + 1
    g = nx.DiGraph([(int(parent[i]), i) for i in range(1, n)])
    idx = LCAIndex(parent, depth)
    u, v = rng.integers(0, n, 300), rng.integers(0, n, 300)
    got = idx.lca(u, v)
    for a, b, c in zip(u, v, got, strict=True):
        assert c == nx.lowest_common_ancestor(g, int(a), int(b))
    assert idx.lca(5, 5) == 5


def test_ic_and_lin_hand_computed():
    # root(0) -> a(1) -> {c(2), d(3)}; root -> b(4)
    parent = np.array([-1, 0, 1, 1, 0])
    depth = np.array([0, 1, 2, 2, 1])
    counts = np.array([0, 1, 2, 1, 4])  # 8 annotations in all
    assert subtree_counts(parent, counts).tolist() == [8, 4, 2, 1, 4]
    ic = information_content(parent, counts)
    assert (
        ic[0] == 0
        and math.isclose(ic[1], math.log(2))
        and math.isclose(ic[2], math.log(4))
        and math.isclose(ic[3], math.log(8))
    )
    idx = LCAIndex(parent, depth)
    # Lin(c, d) = 2 IC(a) / (IC(c) + IC(d)) = 2 ln 2 / (ln 4 + ln 8) = 2/5
    assert math.isclose(lin(ic, idx, 2, 3), 0.4, rel_tol=1e-9)
    assert math.isclose(lin(ic, idx, 2, 2), 1.0, rel_tol=1e-9)
    assert lin(ic, idx, 2, 4) == 0.0  # LCA is the root
    table = lin_table(ic, idx, np.array([2, 3, 4]))
    assert (
        table.shape == (3, 3)
        and math.isclose(table[0, 1], 0.4, rel_tol=1e-6)
        and table[1, 0] == table[0, 1]
    )


def _msc_like(tmp_path):
    """A subject classification given as two CSV files, with a DAG node under two subjects."""
    (tmp_path / "nodes.csv").write_text(
        "id,title,url\n"
        "0,Mathematics,\n"
        "11,Number theory,https://example.org/11\n"
        "05,Combinatorics,https://example.org/05\n"
        "51,Geometry,https://example.org/51\n"
        "26,Real functions,https://example.org/26\n"
        "11A,Elementary number theory,\n"
        "05A,Enumerative combinatorics,\n"
        "05X,Counting lattice points,\n"
    )
    (tmp_path / "edges.csv").write_text(
        "parent,child\n0,11\n0,05\n0,51\n0,26\n11,11A\n05,05A\n11A,05X\n05A,05X\n"
    )
    return tmp_path / "nodes.csv", tmp_path / "edges.csv"


def test_domains_from_a_foreign_ontology(tmp_path):
    nodes, edges = _msc_like(tmp_path)
    dag = dag_from_nodes_edges(nodes, edges)
    cfg = OntologyConfig(nodes=str(nodes), edges=str(edges))
    assert domain_spec(cfg) == "first_level"  # the default for any ontology but MathWorld
    domain_of, domains = resolve_domains(dag, "first_level")
    assert domains == ["Number theory", "Combinatorics", "Geometry", "Real functions"]
    assert domain_names(cfg) == domains
    tree = expand_to_tree(dag, domain_of)
    # the node under two subjects is copied once per path, each copy in its subject's domain
    copies = {
        tree.paths[i]: tree.domains[i]
        for i in range(tree.n_nodes)
        if tree.titles[i] == "Counting lattice points"
    }
    assert copies == {
        "Mathematics › Number theory › Elementary number theory › Counting lattice points": "Number theory",
        "Mathematics › Combinatorics › Enumerative combinatorics › Counting lattice points": "Combinatorics",
    }
    # a mapping by id, url or title; two nodes may share a domain, unmapped ones have none
    spec = {"11": "Arithmetic", "https://example.org/05": "Discrete", "Geometry": "Discrete"}
    domain_of, domains = resolve_domains(dag, spec)
    assert domains == ["Arithmetic", "Discrete"]
    tree = expand_to_tree(dag, domain_of)
    first = {tree.titles[i]: tree.domains[i] for i in range(tree.n_nodes) if tree.depth[i] == 1}
    assert first == {
        "Number theory": "Arithmetic",
        "Combinatorics": "Discrete",
        "Geometry": "Discrete",
        "Real functions": None,
    }
    with pytest.raises(
        DomainError, match=r"names \['Topology'\] but the ontology's first level has no such node"
    ):
        resolve_domains(dag, {"Topology": "T"})
    with pytest.raises(DomainError, match="must be non-empty"):
        resolve_domains(dag, {"11": " Numbers"})
    # a title no partition key could hold is still the domain's name; its key is a slug
    assert resolve_domains(dag, {"11": "Numbers|Primes"})[1] == ["Numbers|Primes"]


@pytest.mark.parametrize("name", ["", " Algebra", "Algebra ", "two\nlines"])
def test_each_bad_domain_name_alone_is_refused(name):
    with pytest.raises(DomainError, match="must be non-empty"):
        check_domain_name(name, "test")


def test_partition_keys_are_the_titles_where_safe_else_unique_stable_slugs():
    safe = ["Number Theory", "Calculus and Analysis", "A.B", "x-y_z (2)"]
    assert keys_for(safe) == {t: t for t in safe}  # existing builds keep their keys
    titles = [
        "Order, lattices, ordered algebraic structures",
        "Numbers|Primes",
        "a/b",
        "a\\b",
        "Sets [finite]",
        "a...b",
        "Геометрия, плоская",
        "Topology",
    ]
    keys = keys_for(titles)
    assert keys["Order, lattices, ordered algebraic structures"] == (
        "Order-lattices-ordered-algebraic-structures"
    )
    assert keys["Numbers|Primes"] == "Numbers-Primes" and keys["Sets [finite]"] == "Sets-finite"
    assert keys["Topology"] == "Topology" and keys_for(["Геометрия"]) == {"Геометрия": "Геометрия"}
    assert keys["Геометрия, плоская"].startswith("domain-")
    # "a/b", "a\\b" and "a...b" share the slug "a-b": each gets its own title's hash
    shared = [keys[t] for t in ("a/b", "a\\b", "a...b")]
    assert len(set(shared)) == 3 and all(k.startswith("a-b-") for k in shared)
    assert keys_for(["a/b", "a\\b"])["a/b"] == keys["a/b"]  # stable, whatever else is there
    assert len(set(keys.values())) == len(titles)
    for key in keys.values():
        StaticPartitionsDefinition([key])  # Dagster takes it
        MultiPartitionsDefinition(
            {"d": StaticPartitionsDefinition([key]), "r": StaticPartitionsDefinition(["x"])}
        )
        assert "/" not in key and "\\" not in key


def test_good_domain_names_pass_and_a_parsed_first_level_spec_works(tmp_path):
    for name in ("Number Theory", "Calculus and Analysis", "A.B", "x-y_z (2)", "a, b / c"):
        assert check_domain_name(name, "test") == name
    nodes, edges = _msc_like(tmp_path)
    dag = dag_from_nodes_edges(nodes, edges)
    # a spec read from a config file is an equal string, not the same object as the literal
    parsed = json.loads('"first_level"')
    assert resolve_domains(dag, parsed)[1] == resolve_domains(dag, "first_level")[1]


def test_an_unknown_mapping_key_lists_the_first_twenty_titles(tmp_path):
    titles = [f"Subject {i:02d}" for i in range(25)]
    (tmp_path / "n.csv").write_text(
        "id,title,url\nroot,Root,\n" + "".join(f"s{i},{t},\n" for i, t in enumerate(titles))
    )
    (tmp_path / "e.csv").write_text("parent,child\n" + "".join(f"root,s{i}\n" for i in range(25)))
    dag = dag_from_nodes_edges(tmp_path / "n.csv", tmp_path / "e.csv")
    with pytest.raises(DomainError) as err:
        resolve_domains(dag, {"Topology": "T"})
    listing = str(err.value).split("first-level titles: ")[1]
    assert listing == ", ".join(repr(t) for t in titles[:20])


def test_nodes_sharing_a_url_merge_into_one_topic(tmp_path):
    (tmp_path / "n.csv").write_text(
        "id,title,url\n1,Root,r\n2,Algebra,a\n3,Geometry,g\n"
        "4,Quadratics,https://x/quad\n5,Quadratics,https://x/quad\n6,Vieta,v\n"
    )
    # 4 and 5 are the same topic listed under two parents; 5 has a child of its own
    (tmp_path / "e.csv").write_text("parent,child\n1,2\n1,3\n2,4\n3,5\n5,6\n")
    dag = dag_from_nodes_edges(tmp_path / "n.csv", tmp_path / "e.csv")
    assert dag.n_topics == 5
    assert dag.graph.nodes["https://x/quad"]["ids"] == ["4", "5"]
    assert sorted(dag.graph.predecessors("https://x/quad")) == ["a", "g"]
    tree = expand_to_tree(dag)
    # one DAG topic, copied under both parents, each copy with the merged children
    assert tree.paths == [
        "Root",
        "Root › Algebra",
        "Root › Algebra › Quadratics",
        "Root › Algebra › Quadratics › Vieta",
        "Root › Geometry",
        "Root › Geometry › Quadratics",
        "Root › Geometry › Quadratics › Vieta",
    ]
    assert tree.topic[2] == tree.topic[5]


def _write(path, text):
    path.write_text(text)
    return path


def _nested(path, doc):
    return _write(path, json.dumps(doc))


def test_nested_tree_errors_name_the_place(tmp_path):
    with pytest.raises(OntologyError, match=r"bad.json: not a valid JSON tree"):
        dag_from_nested_tree(_write(tmp_path / "bad.json", "{not json"))
    with pytest.raises(OntologyError, match=r"latin.json: not a valid JSON tree"):
        (tmp_path / "latin.json").write_bytes(b'{"title": "\xe9"}')
        dag_from_nested_tree(tmp_path / "latin.json")
    with pytest.raises(OntologyError, match=r"node under the root has no 'title'"):
        dag_from_nested_tree(_nested(tmp_path / "t.json", {"url": "r", "links": []}))
    deep = {"title": "R", "links": [{"title": "A", "links": [{"url": "x"}]}]}
    with pytest.raises(OntologyError, match=r"node under R › A has no 'title'"):
        dag_from_nested_tree(_nested(tmp_path / "t.json", deep))
    # a child that is not an object at all (a bare string) is named the same way
    with pytest.raises(OntologyError, match=r"node under R has no 'title'"):
        dag_from_nested_tree(_nested(tmp_path / "t.json", {"title": "R", "links": ["A"]}))
    # one url with two titles is refused whichever title comes first
    for first, second in (("Alpha", "Zeta"), ("Zeta", "Alpha")):
        doc = {
            "title": "R",
            "links": [{"url": "u", "title": first}, {"url": "u", "title": second}],
        }
        with pytest.raises(
            OntologyError, match=f"url 'u' has two titles: '{first}' and '{second}'"
        ):
            dag_from_nested_tree(_nested(tmp_path / "t.json", doc))


def test_nested_tree_warns_only_for_a_repeated_sibling(tmp_path):
    # siblings without urls are told apart by title: no warning
    doc = {"title": "R", "links": [{"title": "A"}, {"title": "B"}]}
    dag = dag_from_nested_tree(_nested(tmp_path / "t.json", doc))
    assert dag.warnings == [] and sorted(dag.graph.successors("R")) == ["A", "B"]
    doc = {"title": "R", "links": [{"title": "A"}, {"title": "B"}, {"title": "A"}]}
    dag = dag_from_nested_tree(_nested(tmp_path / "t.json", doc))
    assert dag.warnings == ["'A' is listed more than once under R (kept once)"]
    assert dag.n_topics == 3


def test_nodes_edges_errors_give_file_and_line(tmp_path):
    nodes = _write(tmp_path / "n.csv", "id,title\n1,Root\n2,A\n3,\n")
    edges = _write(tmp_path / "e.csv", "parent,child\n1,2\n")
    # CSV: line numbers of the file, header = line 1
    with pytest.raises(OntologyError, match=r"n.csv:4: node needs 'id' and 'title'"):
        dag_from_nodes_edges(nodes, edges)
    _write(nodes, "id,title\n1,Root\n,A\n")
    with pytest.raises(OntologyError, match=r"n.csv:3: node needs 'id' and 'title'"):
        dag_from_nodes_edges(nodes, edges)
    _write(nodes, "id,title\n1,Root\n2,A\n")
    _write(edges, "parent,child\n1,2\n2,9\n")
    with pytest.raises(OntologyError, match=r"e.csv:3: edge 2 -> 9 names unknown node '9'"):
        dag_from_nodes_edges(nodes, edges)
    with pytest.raises(OntologyError, match=r"n.csv: CSV nodes need an edges file"):
        dag_from_nodes_edges(nodes)
    # JSON: 1-based item numbers in 'nodes' / 'edges'
    doc = {"nodes": [{"id": "R", "title": "R"}, {"id": "A", "title": "A"}, {"id": "B"}]}
    with pytest.raises(OntologyError, match=r"d.json:3: node needs 'id' and 'title'"):
        dag_from_nodes_edges(_nested(tmp_path / "d.json", {**doc, "edges": []}))
    doc["nodes"][2] = "B"
    with pytest.raises(OntologyError, match=r"d.json:3: node needs 'id' and 'title'"):
        dag_from_nodes_edges(_nested(tmp_path / "d.json", {**doc, "edges": []}))
    doc["nodes"][2] = {"id": "B", "title": "B"}
    for bad in (["R"], ["R", "A", "B"], 7):
        doc["edges"] = [["R", "A"], bad]
        with pytest.raises(OntologyError, match=r"d.json:2: an edge is a \[parent, child\] pair"):
            dag_from_nodes_edges(_nested(tmp_path / "d.json", doc))
    with pytest.raises(OntologyError, match=r"a JSON nodes file carries its own 'edges'"):
        dag_from_nodes_edges(tmp_path / "d.json", edges)
    with pytest.raises(OntologyError, match=r"d.json: not a valid JSON \{nodes, edges\} document"):
        dag_from_nodes_edges(_write(tmp_path / "d.json", "[1, 2"))
    with pytest.raises(OntologyError, match=r"d.json: expected a JSON object"):
        dag_from_nodes_edges(_write(tmp_path / "d.json", "[1, 2]"))
    with pytest.raises(ValueError, match="a JSON 'nodes' file carries its own edges"):
        OntologyConfig(nodes="d.json", edges="e.csv")
    with pytest.raises(ValueError, match="a CSV 'nodes' file needs an 'edges' file"):
        OntologyConfig(nodes="n.csv")


def _tree_fields(tree):
    return (
        tree.parent.tolist(),
        tree.depth.tolist(),
        tree.topic.tolist(),
        tree.titles,
        tree.urls,
        tree.paths,
        tree.domains,
    )


def test_tree_roots_children_and_frame_round_trip(tmp_path):
    dag = dag_from_nodes_edges(_diamond(tmp_path))
    assert first_level_nodes(dag) == ["A", "B"]
    tree = expand_to_tree(dag, {"A": "Left", "B": "Right"})
    keys = list(dag.graph.nodes)
    assert tree.depth.tolist() == [0, 1, 2, 3, 1, 2, 3]
    assert tree.topic.tolist() == [keys.index(k) for k in "RADEBDE"]
    assert tree.urls == list("RADEBDE") and tree.titles == list("RADEBDE")
    assert tree.domains == [None, "Left", "Left", "Left", "Right", "Right", "Right"]
    assert tree.children() == [[1, 4], [2], [3], [], [5], [6], []]
    frame = tree.to_frame()
    assert frame["n_children"].to_list() == [2, 1, 1, 0, 1, 1, 0]
    assert frame["node"].to_list() == list(range(7))
    back = TopicTree.from_frame(frame.reverse())  # row order does not matter
    assert _tree_fields(back) == _tree_fields(tree)
    assert back.parent.dtype == np.int32 and back.depth.dtype == np.int16

    # two roots: a synthetic root above them, with no DAG topic and no url
    (tmp_path / "n.csv").write_text("id,title\n1,P\n2,Q\n3,C\n")
    (tmp_path / "e.csv").write_text("parent,child\n1,3\n")
    dag = dag_from_nodes_edges(tmp_path / "n.csv", tmp_path / "e.csv")
    assert first_level_nodes(dag) == ["1", "2"]
    tree = expand_to_tree(dag, {"2": "Second"}, root_title="Everything")
    assert _tree_fields(tree) == (
        [-1, 0, 1, 0],
        [0, 1, 2, 1],
        [-1, 0, 2, 1],
        ["Everything", "P", "C", "Q"],
        ["", "1", "3", "2"],
        ["Everything", "Everything › P", "Everything › P › C", "Everything › Q"],
        [None, None, None, "Second"],
    )
    assert tree.children() == [[1, 3], [2], [], []]


def test_load_dag_resolves_bundled_relative_and_absolute_paths(tmp_path, monkeypatch):
    assert load_dag(OntologyConfig()).n_topics == 10_586
    _diamond(tmp_path)
    absolute = load_dag(OntologyConfig(nodes=str(tmp_path / "dag.json")))
    assert absolute.n_topics == 5
    # a relative path is read from the repository root, wherever the process runs
    monkeypatch.chdir(tmp_path)
    relative = load_dag(
        OntologyConfig(nodes="tests/data/msc_nodes.csv", edges="tests/data/msc_edges.csv")
    )
    assert relative.n_topics > 5
    tree_path = tmp_path / "tree.json"
    _nested(tree_path, {"title": "R", "links": [{"title": "A"}]})
    assert load_dag(OntologyConfig(path=str(tree_path))).n_topics == 2


def _preorder_trees(n):
    """Every parent array of n nodes in preorder (parent[i] < i): (n-1)! trees."""
    if n == 1:
        yield [-1]
        return
    for smaller in _preorder_trees(n - 1):
        for p in range(n - 1):
            yield [*smaller, p]


def _naive_lca(parent, u, v):
    ancestors = set()
    while u != -1:
        ancestors.add(u)
        u = parent[u]
    while v not in ancestors:
        v = parent[v]
    return v


def test_lca_on_every_small_tree_and_every_pair():
    checked = 0
    for n in range(1, 7):
        for parent in _preorder_trees(n):
            depth = [0] * n
            for i in range(1, n):
                depth[i] = depth[parent[i]] + 1
            idx = LCAIndex(np.array(parent), np.array(depth))
            u, v = np.divmod(np.arange(n * n), n)
            want = [_naive_lca(parent, int(a), int(b)) for a, b in zip(u, v, strict=True)]
            assert idx.lca(u, v).tolist() == want, parent
            one = idx.lca(n - 1, 0)
            assert type(one) is int and one == 0
            checked += 1
    assert checked == 1 + 1 + 2 + 6 + 24 + 120


def test_lca_with_a_node_of_many_children():
    # 300 children of the root, each with one child: small-int identity tricks do not hold above 256
    parent = [-1] + [0] * 300 + list(range(1, 301))
    depth = [0] + [1] * 300 + [2] * 300
    idx = LCAIndex(np.array(parent), np.array(depth))
    grandkids = np.arange(301, 601)
    assert idx.lca(grandkids, grandkids - 300).tolist() == list(range(1, 301))
    assert idx.lca(np.array([301, 600]), np.array([600, 302])).tolist() == [0, 0]


@pytest.mark.parametrize(
    ("parent", "node"),
    [([-1, 0, -1], 2), ([-1, 2, 0], 1), ([-1, 1], 1), ([-1, 0, 5], 2), ([-1, 2, -1], 1)],
)
def test_lca_refuses_a_parent_array_that_is_not_one_preorder_tree(parent, node):
    with pytest.raises(ValueError, match=f"not one tree in preorder: node {node} has parent"):
        LCAIndex(np.array(parent), np.zeros(len(parent), dtype=np.int16))
    with pytest.raises(ValueError, match="at least the root"):
        LCAIndex(np.array([], dtype=np.int32), np.array([], dtype=np.int16))


def test_information_content_edges():
    parent = np.array([-1, 0, 0, 2])
    with pytest.raises(ValueError, match="at least one annotation"):
        information_content(parent, np.zeros(4))
    # one annotation is enough; an unannotated branch has infinite IC and Lin 0 with anything
    ic = information_content(parent, np.array([0, 0, 0, 1]))
    assert ic.tolist() == [0.0, math.inf, 0.0, 0.0]
    idx = LCAIndex(parent, np.array([0, 1, 1, 2]))
    assert lin(ic, idx, 1, 3) == 0.0
    ic = information_content(parent, np.array([0, 1, 0, 0]))
    assert ic[1] == 0.0 and ic[2] == math.inf and ic[3] == math.inf


def test_lin_table_is_the_same_whatever_the_block_size():
    rng = np.random.default_rng(3)
    n = 60
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    depth = np.zeros(n, dtype=np.int16)
    for i in range(1, n):
        depth[i] = depth[parent[i]] + 1
    ic = information_content(parent, rng.integers(1, 5, n))
    idx = LCAIndex(parent, depth)
    nodes = rng.choice(n, 17, replace=False)
    full = lin_table(ic, idx, nodes)
    u, v = np.meshgrid(nodes, nodes, indexing="ij")
    assert np.allclose(full, lin(ic, idx, u.ravel(), v.ravel()).reshape(17, 17), rtol=1e-6)
    for chunk in (1, 4, 16, 17, 100):
        assert np.array_equal(lin_table(ic, idx, nodes, chunk=chunk), full)
    assert np.allclose(np.diag(full)[ic[nodes] > 0], 1.0)


def test_build_selects_a_domain_by_its_title_or_its_key():
    from saber_assets.orchestration.launch import domain_selection

    keys = keys_for(["Algebra", "Order, lattices, ordered algebraic structures"])
    got = domain_selection(
        ["domains", "domain=Order, lattices, ordered algebraic structures", "domain=Algebra"], keys
    )
    assert got == [
        "domains",
        "domain=Order-lattices-ordered-algebraic-structures",
        "domain=Algebra",
    ]
    assert domain_selection(["domain=Order-lattices-ordered-algebraic-structures"], keys) == [
        "domain=Order-lattices-ordered-algebraic-structures"
    ]
    with pytest.raises(
        ValueError, match=r"domain=Topology: no such domain; the domains: 'Algebra'"
    ):
        domain_selection(["domain=Topology"], keys)


def test_ic_counts_most_specific_topics_or_every_accepted_node():
    """`signals.ic_counts`: on root(0) -> A(1) -> {A1(2), A2(3)}, B(4), problems with topics
    [A1, A2] and [B]: most specific counts A1, A2, B once each; all accepted adds A once for the
    first problem (not twice: its two paths share it), never the root."""
    from saber_assets.ontology.similarity import annotation_counts

    parent = np.array([-1, 0, 1, 1, 0])
    topics = [[2, 3], [4]]
    assert annotation_counts(topics, parent).tolist() == [0, 0, 1, 1, 1]
    assert annotation_counts(topics, parent, "all_accepted").tolist() == [0, 1, 1, 1, 1]
    ic_specific = information_content(parent, annotation_counts(topics, parent))
    ic_all = information_content(parent, annotation_counts(topics, parent, "all_accepted"))
    # A's subtree holds 2 of 3 annotations one way, 3 of 4 the other
    assert ic_specific[1] == pytest.approx(-np.log(2 / 3))
    assert ic_all[1] == pytest.approx(-np.log(3 / 4))
    with pytest.raises(ValueError, match="unknown IC counting"):
        annotation_counts(topics, parent, "paths")
