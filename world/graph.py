"""The associative graph: int-indexed nodes and typed, weighted directed edges in numpy arrays.

Nodes are named (memory ids, cue nodes) and carry a kind ("episodic", "semantic", "cue"). There is
at most one edge per ordered pair (networkx DiGraph semantics), with a relation name and a weight.
Node and edge slots are recycled through free lists.

For Personalized PageRank the graph keeps a cached transition matrix (scipy CSR) that is rebuilt,
vectorised, from the edge arrays only after the graph changed. Its rows are in a canonical order
(node names sorted), so two graphs with the same nodes and edges give bit-identical PPR scores
whatever order they were built in (this is what makes a saved-and-loaded store answer exactly as the
original). `to_networkx()` builds a read-only networkx view on demand.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator

import networkx as nx
import numpy as np

from world.ppr import TransitionMatrix, _seeded_pagerank, transition_from_edges

__all__ = ["AssocGraph"]


def _edge_weight(weight: float) -> float:
    """``weight`` as a float, or ValueError: an edge weight is finite and >= 0 (PageRank's transition
    probabilities are weight / out-weight)."""
    if not 0.0 <= weight < math.inf:  # (NaN fails too)
        raise ValueError(f"edge weight must be finite and >= 0, got {weight!r}")
    return float(weight)


class AssocGraph:
    def __init__(self) -> None:
        self._idx: dict[str, int] = {}
        # node names in sorted order and their indices, kept by add_node / remove_node (bisect): the
        # canonical row order of the transition matrix without sorting every name at each rebuild
        self._sorted: list[str] = []
        self._sorted_idx: list[int] = []
        self._names: list[str | None] = []
        self._kinds: list[str | None] = []
        self._free_nodes: list[int] = []
        # per node: neighbour index -> edge slot
        self._out: list[dict[int, int]] = []
        self._in: list[dict[int, int]] = []
        cap = 64
        self._esrc = np.zeros(cap, dtype=np.int64)
        self._edst = np.zeros(cap, dtype=np.int64)
        self._ew = np.zeros(cap, dtype=np.float64)
        self._erel = np.zeros(cap, dtype=np.int16)
        self._ealive = np.zeros(cap, dtype=bool)
        self._ehi = 0
        self._free_edges: list[int] = []
        self._rels: list[str] = []
        self._rel_code: dict[str, int] = {}
        self._n_edges = 0
        self.version = 0
        self._cache: tuple[int, TransitionMatrix, np.ndarray] | None = None

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "_sorted" not in state:  # pickled before the sorted name lists existed
            self._sorted = sorted(self._idx)
            self._sorted_idx = [self._idx[n] for n in self._sorted]

    # ------------------------------------------------------------------ nodes
    def __contains__(self, name: object) -> bool:
        return name in self._idx

    has_node = __contains__

    def __len__(self) -> int:
        return len(self._idx)

    def number_of_nodes(self) -> int:
        return len(self._idx)

    def number_of_edges(self) -> int:
        return self._n_edges

    def index(self, name: str) -> int:
        return self._idx[name]

    def kind(self, name: str) -> str:
        return self._kinds[self._idx[name]]  # type: ignore[return-value]

    def nodes(self, kind: str | None = None) -> list[str]:
        return [n for n, i in self._idx.items() if kind is None or self._kinds[i] == kind]

    def add_node(self, name: str, kind: str) -> int:
        i = self._idx.get(name)
        if i is not None:
            self._kinds[i] = kind
            return i
        if self._free_nodes:
            i = self._free_nodes.pop()
            self._names[i] = name
            self._kinds[i] = kind
        else:
            i = len(self._names)
            self._names.append(name)
            self._kinds.append(kind)
            self._out.append({})
            self._in.append({})
        self._idx[name] = i
        p = bisect_left(self._sorted, name)
        self._sorted.insert(p, name)
        self._sorted_idx.insert(p, i)
        self.version += 1
        return i

    def remove_node(self, name: str) -> int:
        """Remove a node and all its edges; returns the number of edges removed."""
        i = self._idx.pop(name, None)
        if i is None:
            return 0
        # (each edge slot freed in place, in the order out-edges then in-edges: the free list's order
        # decides which slot a later edge takes)
        ealive, free_edges = self._ealive, self._free_edges
        out_i, in_i = self._out[i], self._in[i]
        ins = self._in
        for j, slot in out_i.items():
            ealive[slot] = False
            free_edges.append(slot)
            ins[j].pop(i, None)  # (a self-loop leaves in_i here, so the loop below does not see it)
        removed = len(out_i)
        outs = self._out
        for j, slot in in_i.items():
            if j == i:
                continue
            ealive[slot] = False
            free_edges.append(slot)
            outs[j].pop(i, None)
            removed += 1
        self._n_edges -= removed
        out_i.clear()  # (the node's own dicts: no other node holds them)
        in_i.clear()
        self._release_node(i, name)
        return removed

    def _release_node(self, i: int, name: str) -> None:
        """Free index ``i`` of the edgeless node ``name`` (already out of ``_idx``) for a later node."""
        p = bisect_left(self._sorted, name)
        del self._sorted[p]
        del self._sorted_idx[p]
        self._names[i] = None
        self._kinds[i] = None
        self._free_nodes.append(i)
        self.version += 1

    def remove_hub(self, name: str, leaf_rel: str) -> tuple[int, list[str]]:
        """Remove the node ``name`` and its edges (as :meth:`remove_node`), then each node it pointed to
        through a ``leaf_rel`` edge that is left without any edge (a memory's cue nodes that no other
        memory shares), in the order of its out-edges. Returns (edges removed with ``name``, the names
        of the nodes removed after it). An unknown ``name`` removes nothing: (0, [])."""
        i = self._idx.get(name)
        if i is None:
            return 0, []
        code = self._rel_code.get(leaf_rel)
        erel = self._erel
        leaves = [] if code is None else [j for j, slot in self._out[i].items() if j != i and erel[slot] == code]
        removed = self.remove_node(name)
        orphans = []
        outs, ins, names = self._out, self._in, self._names
        for j in leaves:
            if not outs[j] and not ins[j]:  # (degree 0; every leaf is still a node: none was removed yet)
                # remove_node of an isolated node: no edge to free, its edge dicts empty already
                leaf = names[j]
                del self._idx[leaf]  # type: ignore[arg-type]
                self._release_node(j, leaf)  # type: ignore[arg-type]
                orphans.append(leaf)
        return removed, orphans  # type: ignore[return-value]

    def predecessors(self, name: str, rels: Iterable[str] | None = None) -> list[str]:
        """Names of the nodes with an edge to ``name`` (whose relation is in ``rels`` when given), in
        :meth:`in_edges` order."""
        i = self._idx[name]
        names = self._names
        if rels is None:
            return [names[j] for j in self._in[i]]  # type: ignore[misc]
        codes = {self._rel_code[r] for r in rels if r in self._rel_code}
        if not codes:
            return []
        erel = self._erel
        return [names[j] for j, slot in self._in[i].items() if erel[slot] in codes]  # type: ignore[misc]

    def degree(self, name: str) -> int:
        i = self._idx[name]
        return len(self._out[i]) + len(self._in[i])

    # ------------------------------------------------------------------ edges
    def _drop_edge_slot(self, slot: int) -> None:
        self._ealive[slot] = False
        self._free_edges.append(slot)
        self._n_edges -= 1

    def _grow_edges(self) -> None:
        cap = len(self._esrc) * 2
        for attr in ("_esrc", "_edst", "_ew", "_erel", "_ealive"):
            old = getattr(self, attr)
            new = np.zeros(cap, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, attr, new)

    def _rel_code_of(self, rel: str) -> int:
        code = self._rel_code.get(rel)
        if code is None:
            code = len(self._rels)
            self._rels.append(rel)
            self._rel_code[rel] = code
        return code

    def _put_edge(self, s: int, d: int, code: int, weight: float) -> None:
        """Set the edge s -> d (node indices) to relation ``code`` and ``weight`` (a checked float),
        taking a slot for it if it is new."""
        slot = self._out[s].get(d)
        if slot is None:
            if self._free_edges:
                slot = self._free_edges.pop()
            else:
                if self._ehi == len(self._esrc):
                    self._grow_edges()
                slot = self._ehi
                self._ehi += 1
            self._out[s][d] = slot
            self._in[d][s] = slot
            self._esrc[slot] = s
            self._edst[slot] = d
            self._ealive[slot] = True
            self._n_edges += 1
        self._ew[slot] = weight
        self._erel[slot] = code

    def add_edge(self, src: str, dst: str, rel: str, weight: float = 1.0) -> None:
        """Add (or overwrite the relation / weight of) the edge src -> dst. Both nodes must exist; the
        weight is finite and >= 0 (PageRank's transition probabilities are weight / out-weight)."""
        s, d = self._idx[src], self._idx[dst]
        self._put_edge(s, d, self._rel_code_of(rel), _edge_weight(weight))
        self.version += 1

    def add_star(self, center: str, kind: str, leaves: Iterable[str], leaf_kind: str, out_rel: str, in_rel: str,
                 weight: float = 1.0) -> int:
        """Add the node ``center`` (as ``add_node(center, kind)``) and, for each name of ``leaves`` in
        order, the node (of ``leaf_kind``, unless it exists) with the edges center -> leaf (``out_rel``)
        and leaf -> center (``in_rel``), both of ``weight``: the graph that these add_node / add_edge
        calls give, in fewer Python calls (a memory and its cue nodes). Returns center's index."""
        weight = _edge_weight(weight)
        i = self.add_node(center, kind)
        out_code, in_code = self._rel_code_of(out_rel), self._rel_code_of(in_rel)
        idx, put = self._idx, self._put_edge
        for leaf in leaves:
            j = idx.get(leaf)
            if j is None:
                j = self.add_node(leaf, leaf_kind)
            put(i, j, out_code, weight)
            put(j, i, in_code, weight)
        self.version += 1
        return i

    def remove_edge(self, src: str, dst: str) -> bool:
        s, d = self._idx.get(src), self._idx.get(dst)
        if s is None or d is None or d not in self._out[s]:
            return False
        slot = self._out[s].pop(d)
        self._in[d].pop(s, None)
        self._drop_edge_slot(slot)
        self.version += 1
        return True

    def edge(self, src: str, dst: str) -> tuple[str, float] | None:
        s, d = self._idx.get(src), self._idx.get(dst)
        if s is None or d is None:
            return None
        slot = self._out[s].get(d)
        if slot is None:
            return None
        return self._rels[self._erel[slot]], float(self._ew[slot])

    def has_edge(self, src: str, dst: str) -> bool:
        return self.edge(src, dst) is not None

    def out_edges(self, name: str) -> list[tuple[str, str, float]]:
        """[(dst, rel, weight)] of a node's outgoing edges."""
        i = self._idx[name]
        return [(self._names[j], self._rels[self._erel[s]], float(self._ew[s])) for j, s in self._out[i].items()]  # type: ignore[misc]

    def in_edges(self, name: str) -> list[tuple[str, str, float]]:
        """[(src, rel, weight)] of a node's incoming edges."""
        i = self._idx[name]
        return [(self._names[j], self._rels[self._erel[s]], float(self._ew[s])) for j, s in self._in[i].items()]  # type: ignore[misc]

    def edges(self) -> Iterator[tuple[str, str, str, float]]:
        """All edges as (src, dst, rel, weight), in canonical (sorted) order."""
        for name in sorted(self._idx):
            i = self._idx[name]
            rows = [(self._names[j], self._rels[self._erel[s]], float(self._ew[s])) for j, s in self._out[i].items()]
            for dst, rel, w in sorted(rows):
                yield name, dst, rel, w  # type: ignore[misc]

    # ------------------------------------------------------------------ PPR
    def present(self, names: Iterable[str]) -> list[str]:
        """The ``names`` that are nodes of the graph, in their order (PPR seeds: :meth:`ppr` needs one)."""
        idx = self._idx
        return [name for name in names if name in idx]

    def transition(self) -> tuple[TransitionMatrix, np.ndarray]:
        """Cached (TransitionMatrix, pos) with pos[node index] = row in the matrix (-1 if dead)."""
        if self._cache is not None and self._cache[0] == self.version:
            return self._cache[1], self._cache[2]
        order = np.array(self._sorted_idx, dtype=np.int64)  # node indices by sorted name
        pos = np.empty(len(self._names), dtype=np.int64)
        if self._free_nodes:  # (without a free index every entry is written below)
            pos.fill(-1)  # (np.full adds a Python wrapper to every rebuild)
        pos[order] = np.arange(len(order), dtype=np.int64)
        hi = self._ehi
        if self._n_edges == hi:  # every slot below the high-water mark holds an edge: no selection
            rows, cols, data = pos.take(self._esrc[:hi]), pos.take(self._edst[:hi]), self._ew[:hi]
        else:
            live = self._ealive[:hi].nonzero()[0]
            rows, cols, data = pos.take(self._esrc.take(live)), pos.take(self._edst.take(live)), self._ew.take(live)
        tm = transition_from_edges(len(order), rows, cols, data)
        self._cache = (self.version, tm, pos)
        return tm, pos

    def ppr(
        self,
        seeds: Iterable[str],
        alpha: float = 0.85,
        max_iter: int = 100,
        tol: float = 1.0e-6,
        fallback: str = "solve",
    ) -> tuple[np.ndarray, np.ndarray, str]:
        """PPR with uniform personalisation over `seeds` (existing node names).

        Returns (scores by matrix row, pos, method). Raises ValueError if no seed is in the graph.
        """
        tm, pos = self.transition()
        node_idx = self._idx
        # each seed node once (a dict keeps the first-seen order; the personalisation does not depend on it)
        idx = list(dict.fromkeys([node_idx[s] for s in seeds if s in node_idx]))
        if not idx:
            raise ValueError("personalized PageRank needs at least one seed node present in the graph")
        x, method = _seeded_pagerank(tm, pos[idx], alpha=alpha, max_iter=max_iter, tol=tol, fallback=fallback)
        return x, pos, method

    # ------------------------------------------------------------------ views
    def to_networkx(self, graph: nx.DiGraph | None = None) -> nx.DiGraph:
        g = graph if graph is not None else nx.DiGraph()
        for name in sorted(self._idx):
            g.add_node(name, kind=self._kinds[self._idx[name]])
        for src, dst, rel, w in self.edges():
            g.add_edge(src, dst, rel=rel, weight=w)
        return g
