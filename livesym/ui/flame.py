"""The flame graph: the call tree as an icicle of terminal cells.

The root (the whole tree, or the frame zoomed into) spans the width on the first line;
each line below holds the children of the blocks above it, left to right hottest first,
each as wide as its share of its parent's samples (a parent's self time is the space
its children leave on the right). Frames narrower than a cell are not dropped: the
children of one parent that are too narrow are merged into one block, ``+N`` (``+`` in
a single cell), at least a cell wide. Names are cut with ``…``; every block starts with
an edge mark (``▏``), so blocks stay apart without colour (NO_COLOR); the cursor is drawn
reversed and search matches bold and underlined, both independent of colour. Colour only
says the module.

With a baseline pinned (the dashboard's ``b``) the graph is differential: laid out by the
view as ever, each block coloured by its path's change of own (self) share against the
baseline, red grew and blue shrank, the stronger the larger (flamegraph.pl's difffolded
convention, as ``diff --svg``). Only changes larger than sampling noise are coloured and
marked (``▲`` ``▼`` after the edge, for NO_COLOR): each block drawn is tested as
``profile.diff`` tests a function, Holm's correction over the blocks on the screen. The
baseline is a view of the same session, so a path is followed in its tree frame by frame.

The layout is worked out from the tree's nodes as far down as the screen goes, making
only the children that get a cell (``StackNode.hottest``): a million-sample profile's
graph costs the few hundred nodes on the screen, not the whole tree.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from livesym.profile import ProfileView, StackNode
from livesym.profile.diff import ALPHA, p_values, rejected_of, share_pct
from livesym.records import KIND_KERNEL, KIND_PYTHON, KIND_ROOT, Frame
from livesym.ui.footer import KeysFooter
from livesym.ui.format import frame_name
from livesym.ui.functions import MAX_FILTER as MAX_SEARCH
from livesym.ui.functions import Baseline, Haystacks, edited
from livesym.ui.header import header_lines

if TYPE_CHECKING:
    from livesym.engine import EngineSnapshot

EDGE = "▏"
# Stands in a path for the merged block of a parent's narrowest children.
MERGED_FRAME = Frame("\x00merged", None, None, kind=KIND_ROOT)
PALETTE = (
    "#8f4b32", "#8f6e32", "#6e8f32", "#328f55", "#328f8f", "#32648f", "#55328f", "#8f3272",
    "#a35a2c", "#5a8f2c",
)  # fmt: skip
KERNEL_COLOUR = "#5f5f7a"
PYTHON_COLOUR = "#2c6ea3"
OTHER_COLOUR = "#4a4a4a"
SAME_COLOUR = "#5a5a5a"  # differential: no change larger than noise
GREW, SHRANK = "▲", "▼"
TEXT_COLOUR = "#f0f0f0"
BLANK = Style()  # a segment without a style breaks Textual's NO_COLOR filter

Path = tuple[Frame, ...]
# A differential graph's other side: the baseline's tree at the same zoom, the baseline's
# samples and the view's.
Against = tuple[StackNode | None, int, int]
# For the help: the keys the flame graph's bindings do not show.
FLAME_KEYS = (("↑ ↓ ← →", "move: to the caller, the hottest callee, the frame left or right"),)


@dataclass(frozen=True, slots=True, eq=False)
class Block:
    """One drawn block: a node, or (``node`` None) ``merged`` children too narrow to draw."""

    x: int
    width: int
    depth: int
    node: StackNode | None
    samples: int
    path: Path  # the frames from the zoomed root down: the cursor follows it
    parent: Block | None
    merged: int = 0


def layout(root: StackNode, width: int, rows: int) -> list[list[Block]]:
    """The blocks of each line, left to right, from ``root`` down ``rows`` lines.

    Positions are worked out in samples from the root's left edge, then scaled: each
    block is within a cell of its exact share, however deep (widths scaled from their
    parents' rounded widths would lose a cell a level)."""
    if width < 1 or rows < 1 or root.total_samples <= 0:
        return []
    scale = width / root.total_samples
    top = Block(0, width, 0, root, root.total_samples, (root.frame,), None)
    levels = [[top]]
    starts = {id(top): 0}  # block -> its first sample's offset from the left edge
    for depth in range(1, rows):
        line: list[Block] = []
        for parent in levels[-1]:
            if parent.node is not None and parent.node.has_children:
                line += _children(parent, depth, scale, starts)
        if not line:
            break
        levels.append(line)
    return levels


def _children(parent: Block, depth: int, scale: float, starts: dict[int, int]) -> list[Block]:
    node = parent.node
    assert node is not None
    kids, rest, rest_samples = node.hottest(parent.width + 1)
    blocks: list[Block] = []
    offset = starts[id(parent)]
    for i, child in enumerate(kids):
        if child.total_samples * scale < 1:
            rest += len(kids) - i
            rest_samples += sum(c.total_samples for c in kids[i:])
            break
        x0, x1 = int(offset * scale), int((offset + child.total_samples) * scale)
        path = (*parent.path, child.frame)
        block = Block(x0, x1 - x0, depth, child, child.total_samples, path, parent)
        starts[id(block)] = offset
        offset += child.total_samples
        blocks.append(block)
    if rest:
        end = parent.x + parent.width
        x0 = int(offset * scale)
        if x0 >= end and blocks and blocks[-1].width >= 2:
            last = blocks[-1]  # no cell left: the last block gives one up
            blocks[-1] = Block(last.x, last.width - 1, depth, last.node, last.samples,
                               last.path, parent)  # fmt: skip
            starts[id(blocks[-1])] = starts[id(last)]
            x0 = end - 1
        if x0 < end:
            size = min(end - x0, max(1, round(rest_samples * scale)))
            blocks.append(Block(x0, size, depth, None, rest_samples, (*parent.path, MERGED_FRAME),
                                parent, rest))  # fmt: skip
    return blocks


@dataclass(frozen=True, slots=True)
class Change:
    """A block's path against the baseline: own share on both sides (0..100), and
    whether the move is larger than sampling noise."""

    base_self_pct: float
    new_self_pct: float
    significant: bool

    @property
    def delta_pp(self) -> float:
        return self.new_self_pct - self.base_self_pct


@dataclass(frozen=True, slots=True)
class Differential:
    """The drawn blocks' changes (by the block's ``id``), and the largest significant
    move among them (the colours' scale)."""

    changes: dict[int, Change]
    biggest: float

    def of(self, block: Block) -> Change | None:
        return self.changes.get(id(block))


def differential(
    levels: list[list[Block]], base_root: StackNode | None, base_samples: int,
    new_samples: int, alpha: float = ALPHA,
) -> Differential:  # fmt: skip
    """Each drawn block's ``Change`` (by ``id``) against the baseline tree ``base_root``
    (the same orientation and zoom), its own samples on both sides tested, Holm's
    correction over the blocks drawn. A merged block has none."""
    base = _base_nodes(levels, base_root)
    made = [(block, node.self_samples if (node := base.get(id(block))) is not None else 0,
             block.node.self_samples)
            for line in levels for block in line if block.node is not None]  # fmt: skip
    bases = np.array([b for _, b, _ in made], dtype=np.int64)
    news = np.array([n for _, _, n in made], dtype=np.int64)
    significant = rejected_of(p_values(bases, news, base_samples, new_samples), alpha)
    out: dict[int, Change] = {}
    for i, (block, before, now) in enumerate(made):
        out[id(block)] = Change(share_pct(before, base_samples), share_pct(now, new_samples),
                                bool(significant[i]))  # fmt: skip
    biggest = max((abs(c.delta_pp) for c in out.values() if c.significant), default=0.0)
    return Differential(out, biggest)


def _base_nodes(levels: list[list[Block]], base_root: StackNode | None) -> dict[int, StackNode]:
    """The baseline's node of each drawn block (by ``id``) that the baseline has: its
    path followed down frame by frame, one pass over the baseline's stacks under each
    parent block for all of that block's drawn children."""
    found: dict[int, StackNode] = {}
    if levels and base_root is not None:
        found[id(levels[0][0])] = base_root
    for line in levels[1:]:
        under: dict[int, list[tuple[Block, Frame]]] = {}  # a parent block's id -> its kids
        for block in line:
            if block.node is not None and block.parent is not None:
                under.setdefault(id(block.parent), []).append((block, block.node.frame))
        for parent_id, kids in under.items():
            above = found.get(parent_id)
            if above is None:
                continue  # (a path the baseline does not have: nor anything under it)
            have = above.children_of(frame for _, frame in kids)
            for kid, frame in kids:
                if (node := have.get(frame)) is not None:
                    found[id(kid)] = node
    return found


def label(block: Block, name: Callable[[Frame], str]) -> str:
    """What a block says, before it is cut to its width."""
    if block.node is None:
        return f"+{block.merged}"
    return name(block.node.frame)


def fit(text: str, width: int) -> str:
    """``text`` in ``width`` cells: an edge mark, then the text, cut with ``…``."""
    if width <= 1:
        return EDGE[:width]
    room = width - 1
    if len(text) > room:
        text = text[: room - 1] + "…" if room > 1 else "…"
    return EDGE + text.ljust(room)


def colour(frame: Frame | None) -> str:
    """A block's background: by module (kernel and Python frames each their own)."""
    if frame is None or frame.kind == KIND_ROOT:
        return OTHER_COLOUR
    if frame.kind == KIND_KERNEL:
        return KERNEL_COLOUR
    if frame.kind == KIND_PYTHON:
        return PYTHON_COLOUR
    if not frame.module:
        return OTHER_COLOUR
    return PALETTE[zlib.crc32(frame.module.encode("utf-8", "replace")) % len(PALETTE)]


def change_colour(change: Change, biggest: float) -> str:
    """A differential block's background: red grew, blue shrank (the larger the move
    against the largest on the screen, the stronger), grey where noise explains it."""
    if not change.significant or biggest <= 0:
        return SAME_COLOUR
    strength = 0.35 + 0.65 * min(1.0, abs(change.delta_pp) / biggest)
    low, high = round(0x3A * (1 - strength)), round(0x3A + (0xC8 - 0x3A) * strength)
    if change.delta_pp > 0:
        return f"#{high:02x}{low:02x}{low:02x}"
    return f"#{low:02x}{low + 0x20:02x}{high:02x}"


def line_segments(
    blocks: Sequence[Block],
    width: int,
    name: Callable[[Frame], str],
    cursor: Block | None,
    matches: Callable[[Block], bool],
    diff: Differential | None = None,
) -> list[Segment]:
    """One line of the graph as segments, ``width`` cells (coloured by ``diff``, each
    block's change against a baseline, where one is pinned)."""
    out: list[Segment] = []
    x = 0
    for block in blocks:
        if block.x > x:
            out.append(Segment(" " * (block.x - x), BLANK))
        frame = block.node.frame if block.node is not None else None
        change = diff.of(block) if diff is not None else None
        if diff is None:
            background = colour(frame)
        else:
            background = SAME_COLOUR if change is None else change_colour(change, diff.biggest)
        style = Style(color=TEXT_COLOUR, bgcolor=background)
        if matches(block):
            style += Style(bold=True, underline=True)
        if block is cursor:
            style += Style(reverse=True)
        text = label(block, name)
        if change is not None and change.significant:
            text = (GREW if change.delta_pp > 0 else SHRANK) + text
        shown = fit(text, block.width) if block.node is not None else text[: block.width]
        out.append(Segment(shown.ljust(block.width), style))
        x = block.x + block.width
    if x < width:
        out.append(Segment(" " * (width - x), BLANK))
    return out


def find(levels: list[list[Block]], path: Path) -> Block | None:
    """The block at ``path``, or the deepest one on its way (the frame went away)."""
    found: Block | None = None
    for depth, line in enumerate(levels):
        if depth >= len(path):
            break
        hit = next((b for b in line if b.path == path[: depth + 1]), None)
        if hit is None:
            break
        found = hit
    return found


def neighbour(levels: list[list[Block]], block: Block, step: int) -> Block:
    """The block left (-1) or right (+1) of ``block`` on its line, or itself."""
    line = levels[block.depth]
    i = line.index(block) + step
    return line[i] if 0 <= i < len(line) else block


def first_child(levels: list[list[Block]], block: Block) -> Block | None:
    if block.depth + 1 >= len(levels):
        return None
    return next((b for b in levels[block.depth + 1] if b.parent is block), None)


# -- the widget and its screen -----------------------------------------------------------


class FlameGraph(Widget, can_focus=True):
    """The icicle of one tree, drawn line by line; the screen moves its cursor."""

    DEFAULT_CSS = "FlameGraph { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.root: StackNode | None = None
        self.levels: list[list[Block]] = []
        self.cursor: Block | None = None
        self.namer: Callable[[Frame], str] = frame_name
        self.matching: frozenset[Frame] = frozenset()
        # The baseline's tree at the same zoom and its samples, and the view's samples:
        # the graph is then differential (None: it is not).
        self.against: Against | None = None
        self.diff: Differential | None = None

    def show(self, root: StackNode | None, path: Path, against: Against | None = None) -> None:
        """Lay ``root`` out at the widget's size, the cursor on ``path`` (or as near),
        each block's change against the baseline worked out where ``against`` is given."""
        self.root, self.against = root, against
        width, height = self.size.width, self.size.height
        self.levels = layout(root, width, height) if root is not None else []
        self.diff = None if against is None else differential(self.levels, *against)
        self.cursor = find(self.levels, path) if self.levels else None
        if self.cursor is None and self.levels:
            self.cursor = self.levels[0][0]
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self.show(self.root, self.cursor.path if self.cursor is not None else (), self.against)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= len(self.levels):
            return Strip([Segment(" " * width, BLANK)], width)
        segments = line_segments(self.levels[y], width, self.namer, self.cursor, self._matches,
                                 self.diff)  # fmt: skip
        return Strip(segments, width)

    def _matches(self, block: Block) -> bool:
        return block.node is not None and block.node.frame in self.matching


def _names(raw: bool) -> Callable[[Frame], str]:
    return lambda frame: frame_name(frame, raw)


class FlameScreen(Screen[None]):
    """The flame graph of the dashboard's view: arrows move, Enter zooms in, Esc out."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "out", "Out", tooltip="zoom out one level; closes the search while "
                "it is typed; at the top, back"),
        Binding("enter", "zoom", "Zoom",
                tooltip="flame graph: zoom into the frame under the cursor"),
        Binding("slash", "search", "Search", tooltip="flame graph: highlight frames whose name "
                "or module holds a text, and show their share (Enter keeps it, Esc clears)"),
        Binding("i", "invert", "Invert", tooltip="flame graph: top-down / inverted"),
        Binding("up", "move('up')", show=False),
        Binding("down", "move('down')", show=False),
        Binding("left", "move('left')", show=False),
        Binding("right", "move('right')", show=False),
    ]  # fmt: skip
    AUTO_FOCUS = "#flame"

    def __init__(
        self, view: ProfileView, raw: bool, *, inverted: bool = False, path: Path = (),
        search: str = "", baseline: Baseline | None = None, haystacks: Haystacks | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.view = view
        self.baseline = baseline  # pinned: the graph is coloured by change against it
        self.raw = raw
        self.inverted = inverted
        self.zoom: Path = ()  # frames from the tree's root to the zoomed one (root excluded)
        self.zooms: list[tuple[Path, Path]] = []  # (zoom, cursor) before each Enter
        self.path: Path = path  # the cursor's, from the shown root
        self.search = search[:MAX_SEARCH]
        self.editing: str | None = None
        # (the functions pane's, where given: made already for a filter typed there)
        self.haystacks = haystacks or Haystacks()
        self._state = Text(end="")

    def compose(self) -> ComposeResult:
        yield Static(id="flame-state", markup=False)
        yield Static(id="flame-title", markup=False)
        yield FlameGraph(id="flame")
        yield Static(id="flame-status", markup=False)
        yield KeysFooter()

    @property
    def graph(self) -> FlameGraph:
        return self.query_one(FlameGraph)

    def on_mount(self) -> None:
        self.query_one("#flame-state", Static).update(self._state)
        self.call_after_refresh(self.show, self.view)

    def show_state(self, snap: EngineSnapshot, paused: bool) -> None:
        self._state = header_lines(snap, paused)[1]
        if self.is_mounted:
            self.query_one("#flame-state", Static).update(self._state)

    def show(self, view: ProfileView) -> None:
        """Draw ``view``'s tree (zoomed as it was), the cursor on the same frame."""
        self.view = view
        graph = self.graph
        graph.namer = _names(self.raw)
        root = self._root()
        if graph.cursor is not None:
            self.path = graph.cursor.path
        graph.matching = self._matching() if self.search else frozenset()
        graph.show(root, self.path, self._against())
        self._show_title(root)
        self._show_status()

    def _root(self) -> StackNode | None:
        """The tree's root, followed down the zoom path as far as the frames still are."""
        node = self.view.inverted_tree if self.inverted else self.view.tree
        for i, frame in enumerate(self.zoom):
            child = node.child(frame) if node is not None else None
            if child is None:
                self.zoom = self.zoom[:i]
                break
            node = child
        return node

    def _against(self) -> Against | None:
        """The baseline's tree at the same zoom (None under it: the path was not there),
        with both sides' samples; None without a baseline."""
        if self.baseline is None:
            return None
        base = self.baseline.view
        node = base.inverted_tree if self.inverted else base.tree
        for frame in self.zoom:
            node = node.child(frame) if node is not None else None
        return node, base.samples, self.view.samples

    def _matching(self) -> frozenset[Frame]:
        needle, hay = self.search.casefold(), self.haystacks.of
        return frozenset(f for f in self.view.functions.frames() if needle in hay(f, self.raw))

    def _show_title(self, root: StackNode | None) -> None:
        kind = "inverted (callers below)" if self.inverted else "top-down (callees below)"
        where = " > ".join(_names(self.raw)(f) for f in self.zoom[-4:])
        zoom = f"  ·  zoomed: {'… > ' if len(self.zoom) > 4 else ''}{where}" if self.zoom else ""
        line = Text(f"flame graph, {kind}{zoom}", no_wrap=True, overflow="ellipsis", end="")
        if self.baseline is not None:
            line.append(f"  ·  own share vs baseline {self.baseline.label}: ")
            line.append(f"{GREW} grew", Style(color=TEXT_COLOUR, bgcolor=change_colour(
                Change(0.0, 1.0, True), 1.0)))  # fmt: skip
            line.append(" ")
            line.append(f"{SHRANK} shrank", Style(color=TEXT_COLOUR, bgcolor=change_colour(
                Change(1.0, 0.0, True), 1.0)))  # fmt: skip
            line.append(" (more than noise)")
        self.query_one("#flame-title", Static).update(line, layout=False)

    def _show_status(self) -> None:
        """The frame under the cursor in full, or the search being typed, or its share."""
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        samples = self.view.samples or 1
        if self.editing is not None:
            line.append("/ ", "bold")
            line.append(self.editing)
            line.append("▏", "reverse")
            line.append("  Enter keeps, Esc clears")
        elif (block := self.graph.cursor) is not None:
            # The block's numbers first, then its name and the search's share: at 80
            # columns a long name is cut, never the numbers.
            diff = self.graph.diff
            change = diff.of(block) if diff is not None else None
            if change is not None:
                line.append_text(change_text(change))
            line.append_text(block_text(block, self.raw, samples))
            if self.search:
                line.append(f"  ·  {self._search_share(samples)}")
        self.query_one("#flame-status", Static).update(line, layout=False)

    def _search_share(self, samples: int) -> str:
        root = self.graph.root
        ids = self.view.frame_ids(self.graph.matching)
        found = root.samples_holding(ids) if root is not None and ids else 0
        return f"{self.search!r}: {100.0 * found / samples:.1f} % of samples"

    # -- keys ------------------------------------------------------------------------

    def action_move(self, where: str) -> None:
        graph = self.graph
        block = graph.cursor
        if block is None:
            return
        if where == "up":
            target = block.parent or block
        elif where == "down":
            target = first_child(graph.levels, block) or block
        else:
            target = neighbour(graph.levels, block, -1 if where == "left" else 1)
        if target is not block:
            graph.cursor = target
            self.path = target.path
            graph.refresh()
            self._show_status()

    def action_zoom(self) -> None:
        block = self.graph.cursor
        if block is None or block.node is None or block.parent is None:
            return
        self.zooms.append((self.zoom, block.path))
        self.zoom = (*self.zoom, *block.path[1:])
        self.path = (block.node.frame,)
        self.graph.cursor = None
        self.show(self.view)

    def action_out(self) -> None:
        """Undo the last zoom, the cursor on the frame it went into; at the top, back."""
        if self.editing is not None:
            return
        if not self.zooms:
            self.app.pop_screen()
            return
        self.zoom, self.path = self.zooms.pop()
        self.graph.cursor = None
        self.show(self.view)

    def action_invert(self) -> None:
        self.inverted = not self.inverted
        self.zoom, self.path, self.zooms = (), (), []
        self.graph.cursor = None
        self.show(self.view)

    def action_search(self) -> None:
        """Type a new search (the marked function's name, if any, stays marked until
        the first key replaces it)."""
        self.editing = ""
        self._show_status()

    def on_key(self, event: events.Key) -> None:
        """The keys typed while the search is open (they are its, not bindings')."""
        if self.editing is None:
            return
        change = edited(self.editing, event)
        if change is None:
            return
        event.stop()
        event.prevent_default()
        text, done = change
        self.editing = None if done else text
        self.search = text
        self.show(self.view)


def change_text(change: Change) -> Text:
    """A block's change against the baseline, for the status line."""
    text = Text(end="")
    mark = (GREW if change.delta_pp > 0 else SHRANK) if change.significant else "="
    text.append(f"{mark} {change.delta_pp:+.1f} pp", "bold" if change.significant else "")
    text.append(f" (own {change.base_self_pct:.1f} → {change.new_self_pct:.1f} %"
                f"{'' if change.significant else ', within noise'})  ")  # fmt: skip
    return text


def block_text(block: Block, raw: bool, samples: int) -> Text:
    """The cursor's block in full: name, module, total and self (of all samples)."""
    text = Text(end="")
    if block.node is None:
        text.append(f"+{block.merged} frames too narrow to draw", "bold")
        text.append(f"  total {block.samples} ({100.0 * block.samples / samples:.1f} %)")
        return text
    node = block.node
    frame = node.frame
    text.append(f"total {node.total_samples} ({100.0 * node.total_samples / samples:.1f} %)")
    text.append(f"  self {node.self_samples} ({100.0 * node.self_samples / samples:.1f} %)  ")
    text.append(frame_name(frame, raw), "bold")
    if frame.module:
        text.append(f"  ({frame.module})")
    return text
