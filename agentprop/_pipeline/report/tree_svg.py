"""The decision tree of a run report drawn as SVG: a layered layout, left to right.

The layout is a pure function of the tree (columns by longest distance, barycentre ordering,
loop branches as arcs), with no layout library. Every branch and node is a ``<g>`` with stable
classes and ids; every text is escaped, so the SVG can go into an HTML page as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from markupsafe import Markup, escape

from agentprop._pipeline.report.model import CaseReport, DecisionTree, TreeBranch

CHAR_W = 7.4
"""Width of a character of the node labels (12px monospace)."""
NODE_H = 30
DUMMY_H = 6
PORT_GAP = 11
"""Vertical room per branch entering or leaving a node (a node grows with its branches)."""
ROW_GAP = 14
COL_GAP = 90
PAD = 24
LOOP_DROP = 26
"""How far below the lowest node a loop branch's arc runs, per loop."""


@dataclass
class _Box:
    id: str
    layer: int
    order: float
    h: float = NODE_H
    dummy: bool = False
    """A waypoint of a branch that spans several columns (it takes a thin slot in each)."""
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0


def _layers(tree: DecisionTree) -> dict[str, int]:
    """Longest distance from the root over forward branches (a branch to a node on the current
    depth-first path is a back edge, whatever the report calls it)."""
    succ: dict[str, list[str]] = {
        n.id: [b.next for b in n.branches if not b.loop] for n in tree.nodes
    }
    for targets in list(succ.values()):
        for t in targets:
            succ.setdefault(t, [])
    on_path: set[str] = set()
    done: set[str] = set()
    order: list[str] = []
    forward: dict[str, list[str]] = {n: [] for n in succ}

    def visit(n: str) -> None:
        on_path.add(n)
        for t in succ[n]:
            if t in on_path:
                continue  # a cycle the report does not mark as a loop: still a back edge
            forward[n].append(t)
            if t not in done:
                visit(t)
        on_path.discard(n)
        done.add(n)
        order.append(n)

    roots = [tree.root] if tree.root in succ else []
    for start in roots + [n for n in succ if n not in roots]:
        if start not in done:
            visit(start)
    layer = {n: 0 for n in succ}
    for n in reversed(order):  # reverse post-order is a topological order of the forward edges
        for t in forward[n]:
            layer[t] = max(layer[t], layer[n] + 1)
    return layer


@dataclass
class _Layout:
    boxes: dict[str, _Box]
    routes: dict[str, list[str]]
    """Forward branch id -> the boxes it passes: source, waypoints, target."""
    width: float
    height: float


def _place(tree: DecisionTree) -> _Layout:
    layer = _layers(tree)
    boxes = {n: _Box(n, layer[n], float(i)) for i, n in enumerate(layer)}
    ports_out: dict[str, int] = {}
    ports_in: dict[str, int] = {}
    routes: dict[str, list[str]] = {}
    for node in tree.nodes:
        for br in node.branches:
            if br.loop or layer[br.next] <= layer[node.id]:
                continue
            ports_out[node.id] = ports_out.get(node.id, 0) + 1
            ports_in[br.next] = ports_in.get(br.next, 0) + 1
            route = [node.id]
            for k in range(layer[node.id] + 1, layer[br.next]):
                dummy = f"\0{br.id}\0{k}"
                boxes[dummy] = _Box(dummy, k, boxes[node.id].order, h=DUMMY_H, dummy=True)
                route.append(dummy)
            routes[br.id] = [*route, br.next]
    for box in boxes.values():
        if not box.dummy:
            box.h = max(
                NODE_H, PORT_GAP * (max(ports_out.get(box.id, 0), ports_in.get(box.id, 0)) + 1)
            )
    preds: dict[str, list[str]] = {n: [] for n in boxes}
    succs: dict[str, list[str]] = {n: [] for n in boxes}
    for route in routes.values():
        for a, z in pairwise(route):
            preds[z].append(a)
            succs[a].append(z)
    columns: dict[int, list[_Box]] = {}
    for box in boxes.values():
        columns.setdefault(box.layer, []).append(box)
    for col in columns.values():
        col.sort(key=lambda b: b.order)
        for i, b in enumerate(col):
            b.order = float(i)

    def sweep(neighbours: dict[str, list[str]], layers: Iterable[int]) -> None:
        for k in layers:
            col = columns[k]
            for b in col:
                near = [boxes[m].order for m in neighbours[b.id]]
                if near:
                    b.order = sum(near) / len(near)
            col.sort(key=lambda b: b.order)
            for i, b in enumerate(col):
                b.order = float(i)

    depth = max(columns) if columns else 0
    for _ in range(6):
        sweep(preds, range(1, depth + 1))
        sweep(succs, range(depth - 1, -1, -1))

    def column_height(col: list[_Box]) -> float:
        return sum(b.h for b in col) + ROW_GAP * max(0, len(col) - 1)

    height = max((column_height(c) for c in columns.values()), default=NODE_H)
    x = float(PAD)
    for k in range(depth + 1):
        col = columns.get(k, [])
        w = max((len(b.id) * CHAR_W + 22 for b in col if not b.dummy), default=40.0)
        y = PAD + (height - column_height(col)) / 2
        for b in col:
            b.x, b.w, b.y = x, w, y
            y += b.h + ROW_GAP
        x += w + COL_GAP
    return _Layout(boxes, routes, x - COL_GAP + PAD, height + 2 * PAD)


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def branch_counts(cases: list[CaseReport]) -> dict[str, tuple[int, int]]:
    """``NODE#k -> (cases taking it, of which not passing)`` (NOT APPLICABLE counts as neither)."""
    out: dict[str, list[int]] = {}
    for c in cases:
        for b in set(c.branches):
            slot = out.setdefault(b, [0, 0])
            slot[0] += 1
            slot[1] += c.verdict in ("FAIL", "UNSTABLE", "INCONCLUSIVE")
    return {k: (v[0], v[1]) for k, v in out.items()}


def _curve(points: list[tuple[float, float]]) -> str:
    """A smooth path through ``points``, leaving and entering each one horizontally."""
    (x, y), rest = points[0], points[1:]
    d = [f"M{_fmt(x)},{_fmt(y)}"]
    for nx, ny in rest:
        if ny == y:
            d.append(f"L{_fmt(nx)},{_fmt(ny)}")
        else:
            mid = (x + nx) / 2
            d.append(f"C{_fmt(mid)},{_fmt(y)} {_fmt(mid)},{_fmt(ny)} {_fmt(nx)},{_fmt(ny)}")
        x, y = nx, ny
    return " ".join(d)


def render_tree_svg(tree: DecisionTree, cases: list[CaseReport]) -> Markup:
    """The tree as one ``<svg>`` element (escaped text, no script, no external reference)."""
    if not tree.nodes:
        return Markup("")
    layout = _place(tree)
    boxes, routes = layout.boxes, layout.routes
    counts = branch_counts(cases)
    node_cases: dict[str, list[int]] = {}
    for c in cases:
        for n in set(c.path) | {c.node}:
            slot = node_cases.setdefault(n, [0, 0])
            slot[0] += 1
            slot[1] += c.verdict in ("FAIL", "UNSTABLE", "INCONCLUSIVE")
    real = [b for b in boxes.values() if not b.dummy]
    bottom = max((b.y + b.h for b in real), default=0.0)
    back = [(n, b) for n in tree.nodes for b in n.branches if b.id not in routes and b.next != n.id]
    height = layout.height + LOOP_DROP * len(back)
    # ports: a node's forward branches leave (and enter) spread over its side, ordered by
    # where they go (come from), so that they do not cross at the node
    out_y: dict[str, float] = {}
    in_y: dict[str, float] = {}
    by_source: dict[str, list[tuple[float, str]]] = {}
    by_target: dict[str, list[tuple[float, str]]] = {}
    for bid, route in routes.items():
        by_source.setdefault(route[0], []).append((boxes[route[1]].y + boxes[route[1]].h / 2, bid))
        by_target.setdefault(route[-1], []).append(
            (boxes[route[-2]].y + boxes[route[-2]].h / 2, bid)
        )
    for table, target in ((by_source, out_y), (by_target, in_y)):
        for node_id, items in table.items():
            items.sort()
            box = boxes[node_id]
            for k, (_, bid) in enumerate(items):
                target[bid] = box.y + box.h * (k + 1) / (len(items) + 1)
    parts: list[str] = [
        (
            '<svg xmlns="http://www.w3.org/2000/svg" class="tree" viewBox="0 0 '
            f'{_fmt(layout.width)} {_fmt(height)}" width="{_fmt(layout.width)}" '
            f'height="{_fmt(height)}" role="img" aria-label="decision tree">'
        ),
        "<defs>",
        *(
            (
                f'<marker id="ap-arrow-{s}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
                f'class="arrow {s}"/></marker>'
            )
            for s in ("taken", "failing", "untaken", "unrealisable")
        ),
        "</defs>",
    ]
    drop = 0
    for node in tree.nodes:
        src = boxes[node.id]
        for b in node.branches:
            total, failing = counts.get(b.id, (0, 0))
            is_loop = b.id not in routes
            look = "failing" if failing and b.status == "taken" else b.status
            classes = (
                ["branch", b.status]
                + (["loop"] if is_loop else [])
                + (["failing"] if failing else [])
            )
            if b.next == node.id:
                x0, x1, y = src.x + src.w * 0.3, src.x + src.w * 0.7, src.y
                d = (
                    f"M{_fmt(x0)},{_fmt(y)} C{_fmt(x0)},{_fmt(y - 30)} {_fmt(x1)},{_fmt(y - 30)} "
                    f"{_fmt(x1)},{_fmt(y)}"
                )
                lx, ly = (x0 + x1) / 2 - 10, y - 26
            elif is_loop:
                dst = boxes[b.next]
                drop += 1
                x0, x1 = src.x + src.w / 2, dst.x + dst.w / 2
                y0, y1, low = src.y + src.h, dst.y + dst.h, bottom + LOOP_DROP * drop
                d = (
                    f"M{_fmt(x0)},{_fmt(y0)} C{_fmt(x0)},{_fmt(low)} {_fmt(x1)},{_fmt(low)} "
                    f"{_fmt(x1)},{_fmt(y1)}"
                )
                lx, ly = (x0 + x1) / 2, low - 0.25 * (low - max(y0, y1)) - 2
            else:
                route = routes[b.id]
                points = [(src.x + src.w, out_y[b.id])]
                for way in route[1:-1]:
                    w = boxes[way]
                    points += [(w.x, w.y + w.h / 2), (w.x + w.w, w.y + w.h / 2)]
                points.append((boxes[route[-1]].x, in_y[b.id]))
                d = _curve(points)
                lx, ly = points[0][0] + 5, points[0][1] - 2
            title = _branch_title(b, total, failing, is_loop)
            label = ("\u21ba " if is_loop else "") + f"#{b.index}"
            parts.append(
                f'<g class="{" ".join(classes)}" data-branch="{escape(b.id)}" '
                f'data-status="{escape(b.status)}" tabindex="0">'
                f"<title>{escape(title)}</title>"
                f'<path class="hit" d="{d}"/>'
                f'<path class="edge {look}" d="{d}" marker-end="url(#ap-arrow-{look})"/>'
                f'<text class="edge-label" x="{_fmt(lx)}" y="{_fmt(ly)}">{escape(label)}</text></g>'
            )
    described = {n.id: n for n in tree.nodes}
    for box in real:
        described_node = described.get(box.id)
        total, failing = node_cases.get(box.id, (0, 0))
        terminal = described_node is None or described_node.terminal
        classes = (
            ["node", "terminal" if terminal else "decision"]
            + (["failing"] if failing else [])
            + (["root"] if box.id == tree.root else [])
        )
        desc = (described_node.description if described_node is not None else "") or ""
        title = (
            f"{box.id}"
            + (f": {desc}" if desc else "")
            + f"\n{total} case(s) reach it"
            + (f", {failing} not passing" if failing else "")
        )
        rx = min(box.h, NODE_H) / 2 if terminal else 5
        parts.append(
            f'<g class="{" ".join(classes)}" data-node="{escape(box.id)}" '
            f'tabindex="0"><title>{escape(title)}</title><rect x="{_fmt(box.x)}" '
            f'y="{_fmt(box.y)}" width="{_fmt(box.w)}" height="{_fmt(box.h)}" '
            f'rx="{_fmt(rx)}"/><text x="{_fmt(box.x + box.w / 2)}" '
            f'y="{_fmt(box.y + box.h / 2 + 4)}">{escape(box.id)}</text></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _branch_title(b: TreeBranch, total: int, failing: int, loop: bool) -> str:
    status = {
        "taken": f"taken by {total} case(s)" + (f", {failing} not passing" if failing else ""),
        "untaken": "not taken: no case that ran takes it (left out with --case?)",
        "unrealisable": "unrealisable: no scenario can take it (see the problems)",
    }[b.status]
    loop_text = "; a loop branch (unrolled once)" if loop else ""
    return (
        f"{b.id}: when {b.when} -> {b.next}"
        + (f" ({b.description})" if b.description else "")
        + f"\n{status}{loop_text}"
    )
