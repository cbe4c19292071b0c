"""O(1) lowest common ancestor (Euler tour + sparse table), information content and Lin similarity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class LCAIndex:
    """LCA queries in O(1) after O(n log n) preprocessing over a preorder parent array."""

    def __init__(self, parent: np.ndarray, depth: np.ndarray) -> None:
        n = len(parent)
        if n == 0:
            raise ValueError("LCAIndex needs at least the root")
        above = np.asarray(parent[1:], dtype=np.int64)
        bad = np.flatnonzero((above < 0) | (above >= np.arange(1, n)))
        if len(bad):
            i = int(bad[0]) + 1
            # a second root, or a parent after its child: the tour below would miss nodes
            raise ValueError(
                f"parent array is not one tree in preorder: node {i} has parent {int(parent[i])}"
            )
        children: list[list[int]] = [[] for _ in range(n)]
        for i in range(1, n):
            children[int(parent[i])].append(i)
        tour = np.empty(2 * n - 1, dtype=np.int32)
        first = np.empty(n, dtype=np.int64)
        pos = 0
        stack: list[tuple[int, int]] = [(0, 0)]  # (node, next child position)
        while stack:
            node, k = stack[-1]
            if k == 0:
                first[node] = pos
            tour[pos] = node
            pos += 1
            if k < len(children[node]):
                stack[-1] = (node, k + 1)
                stack.append((children[node][k], 0))
            else:
                stack.pop()
        self.first = first
        self.tour = tour
        tour_depth = np.asarray(depth, dtype=np.int32)[tour]
        # table[j][i] = tour position of the shallowest node in tour[i : i + 2**j]
        levels = [np.arange(len(tour), dtype=np.int32)]
        span = 1
        while 2 * span <= len(tour):
            prev = levels[-1]
            a, b = prev[: len(prev) - span], prev[span:]
            levels.append(np.where(tour_depth[a] <= tour_depth[b], a, b).astype(np.int32))
            span *= 2
        self._levels = levels
        self._tour_depth = tour_depth

    def lca(self, u, v):
        """LCA of tree nodes u and v (ints or equal-shaped int arrays)."""
        fu, fv = self.first[np.asarray(u)], self.first[np.asarray(v)]
        lo, hi = np.minimum(fu, fv), np.maximum(fu, fv)
        j = np.floor(np.log2(hi - lo + 1)).astype(np.int64)
        out = np.empty(np.shape(lo), dtype=np.int32)
        for level in np.unique(j):
            m = j == level
            a = self._levels[level][lo[m]]
            b = self._levels[level][hi[m] - (1 << int(level)) + 1]
            out[m] = self.tour[np.where(self._tour_depth[a] <= self._tour_depth[b], a, b)]
        return int(out) if out.ndim == 0 else out


def annotation_counts(
    topics: Sequence[Sequence[int]], parent: np.ndarray, how: str = "most_specific"
) -> np.ndarray:
    """Annotations per tree node, from each problem's most specific topics: ``most_specific``
    counts those (the paper's wording), ``all_accepted`` every node the traversal accepted on
    the way down, ancestors included, once per problem (the reference code's counting, with
    which the published thresholds were computed). The root is never accepted."""
    if how not in ("most_specific", "all_accepted"):
        raise ValueError(f"unknown IC counting {how!r}: most_specific or all_accepted")
    counts = np.zeros(len(parent), dtype=np.int64)
    for ts in topics:
        nodes = set(int(t) for t in ts)
        if how == "all_accepted":
            for t in list(nodes):
                p = int(parent[t])
                while p > 0 and p not in nodes:
                    nodes.add(p)
                    p = int(parent[p])
        for n in nodes:
            counts[n] += 1
    return counts


def subtree_counts(parent: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """c(t) = annotations of t or any descendant (parent array in preorder)."""
    c = np.asarray(counts, dtype=np.float64).copy()
    for i in range(len(parent) - 1, 0, -1):
        c[parent[i]] += c[i]
    return c


def information_content(parent: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """IC(t) = -ln(c(t) / N) with N = c(root), the total number of annotations.

    Taking N as the root's count makes p(root) = 1 and IC(root) = 0. A node nobody annotated (nor any
    descendant) has p = 0 and IC = +inf; Lin never needs it, as annotated topics and their
    ancestors all have c >= 1.
    """
    c = subtree_counts(parent, counts)
    if c[0] <= 0:
        raise ValueError("information content needs at least one annotation")
    with np.errstate(divide="ignore"):
        return -np.log(c / c[0])


def lin(ic: np.ndarray, lca_index: LCAIndex, t1, t2):
    """Lin(t1, t2) = 2 IC(LCA) / (IC(t1) + IC(t2) + 1e-12)."""
    a = lca_index.lca(t1, t2)
    return 2.0 * ic[a] / (ic[t1] + ic[t2] + 1e-12)


def lin_table(
    ic: np.ndarray, lca_index: LCAIndex, nodes: np.ndarray, chunk: int = 256
) -> np.ndarray:
    """Dense Lin matrix among the given tree nodes (the distinct topics actually used), float32.

    Computed a block of rows at a time so a 10K-topic table needs no more than the table itself.
    """
    nodes = np.asarray(nodes, dtype=np.int64)
    out = np.empty((len(nodes), len(nodes)), dtype=np.float32)
    for start in range(0, len(nodes), chunk):
        rows = nodes[start : start + chunk]
        u = np.repeat(rows, len(nodes))
        v = np.tile(nodes, len(rows))
        out[start : start + len(rows)] = lin(ic, lca_index, u, v).reshape(len(rows), len(nodes))
    return out
