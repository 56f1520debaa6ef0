"""The Tree pane: the call tree, top-down or inverted, one row per visible node.

Rows are the nodes the user opened, depth first, hottest first among siblings (ties in
frame order, so equal weights keep their places from one refresh to the next). A row's
key is its path of frames from the root: the cursor and what is open stay with the
same frames while the counts change under them. The first view opens the hottest path,
as long as it holds half of each parent's samples.

A node with thousands of children (the inverted tree's first level is every function
with self time) shows the hottest MAX_CHILDREN and a row for the rest; the table holds
at most MAX_ROWS rows, and the status line says when more would follow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message

from livesym.printable import printable
from livesym.profile import ProfileView, StackNode
from livesym.records import Frame
from livesym.ui.format import basename, frame_name, number, pct, plain
from livesym.ui.functions import Haystacks, frame_key, selection_parts
from livesym.ui.options import ViewOptions
from livesym.ui.quiet import QuietStatic
from livesym.ui.table import Column, Row, SyncTable

MAX_ROWS = 3000  # rows in the table (each costs on every refresh)
MAX_CHILDREN = 200  # children shown under one node; a row says how many more
MAX_OPEN_DEPTH = 200  # the hottest path is opened this deep at most
SEP = "\x1e"  # between the frame keys of a row's path
MORE = "\x1d"  # the key of a node's "more" row: its path, then this

# For the help: the keys the tree's bindings do not show.
TREE_KEYS = (
    ("→ l", "open the highlighted node (on an open one: step into its first child)"),
    ("← h", "close it (on a closed one: step out to its parent)"),
    ("Enter", "open or close it"),
    ("f", "the flame graph, at the highlighted node"),
)

COLUMNS = (
    Column("total", "TOTAL%", 6, right=True),
    Column("self", "SELF%", 6, right=True),
    Column("function", "FUNCTION", 16, flex=True),
    Column("module", "MODULE", 16, drop_below=64),
)


@dataclass(frozen=True)
class Shown:
    """One visible row: its node (None for a "more" row) and where it sits."""

    key: str
    node: StackNode | None
    depth: int
    parent: str | None  # the parent row's key; None at the first level
    more: tuple[int, int] = (0, 0)  # a "more" row: children left out, their samples


def hottest_path(root: StackNode) -> set[str]:
    """The keys of the nodes along the hottest path from ``root``, to open at first: the
    hottest child of each, as long as it holds at least half of its parent's samples
    (below that the path is no longer where the time goes)."""
    opened: set[str] = set()
    node, key = root, ""
    for _ in range(MAX_OPEN_DEPTH):
        # (as many as its rows will show: one pass over its stacks serves both)
        first = node.hottest(MAX_CHILDREN)[0] if node.has_children else ()
        if not first:
            break
        child = first[0]
        if node is not root and 2 * child.total_samples < node.total_samples:
            break
        node, key = child, _child_key(key, child.frame)
        opened.add(key)
    return opened


def _child_key(parent: str, frame: Frame) -> str:
    return frame_key(frame) if not parent else parent + SEP + frame_key(frame)


def visible(root: StackNode, opened: set[str]) -> tuple[list[Shown], bool]:
    """The rows to show, depth first; and whether MAX_ROWS cut them short."""
    rows: list[Shown] = []
    todo: list[Shown] = _child_rows(root, "", -1, None)
    todo.reverse()
    while todo:
        if len(rows) >= MAX_ROWS:
            return rows, True
        row = todo.pop()
        rows.append(row)
        if row.node is not None and row.key in opened and row.node.has_children:
            children = _child_rows(row.node, row.key, row.depth, row.key)
            todo.extend(reversed(children))
    return rows, False


def _child_rows(node: StackNode, key: str, depth: int, parent: str | None) -> list[Shown]:
    children, more, samples = node.hottest(MAX_CHILDREN)
    rows = [Shown(_child_key(key, c.frame), c, depth + 1, parent) for c in children]
    if more:
        rows.append(Shown(key + MORE, None, depth + 1, parent, (more, samples)))
    return rows


def table_row(row: Shown, opened: set[str], scale: float, raw: bool, marked: bool = False) -> Row:
    indent = "  " * min(row.depth, 60)
    node = row.node
    if node is None:
        count, samples = row.more
        text = f"{indent}  … {count} more ({pct(samples * scale)} % together)"
        return Row(row.key, {"function": plain(text, "dim")})
    mark = ("▾ " if row.key in opened else "▸ ") if node.has_children else "  "
    frame = node.frame
    name = indent + mark + frame_name(frame, raw)
    style = ("" if frame.resolved else "italic") + (" bold underline" if marked else "")
    return Row(
        row.key,
        {
            "total": number(pct(node.total_samples * scale)),
            "self": number(pct(node.self_samples * scale)) if node.self_samples else number(""),
            "function": plain(name, style.strip()),
            "module": plain(basename(frame.module) if frame.module else ""),
        },
    )


class TreeTable(SyncTable):
    """The tree's rows; → and ← open and close, Enter toggles."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,l", "open", show=False),
        Binding("left,h", "close", show=False),
        Binding("i", "invert", "Invert", tooltip="tree: top-down / inverted (bottom-up)"),
    ]

    @dataclass
    class Inverted(Message):
        """``i``: the other tree."""

    @dataclass
    class Opened(Message):
        key: str
        open: bool  # True: open (or step into), False: close (or step out)

    def action_open(self) -> None:
        key = self.selected_key
        if key is not None:
            self.post_message(self.Opened(key, True))

    def action_invert(self) -> None:
        self.post_message(self.Inverted())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``i`` only where the tree can be inverted (not a function's callers or callees)."""
        if action == "invert" and isinstance(self.parent, TreePane):
            return self.parent.invertible
        return True

    def action_close(self) -> None:
        key = self.selected_key
        if key is not None:
            self.post_message(self.Opened(key, False))


Source = Callable[[ProfileView, bool], "StackNode | None"]


def whole_tree(view: ProfileView, inverted: bool) -> StackNode | None:
    return view.inverted_tree if inverted else view.tree


class TreePane(Vertical):
    """The status line and a call tree of a view: the whole tree (the dashboard's Tree
    pane), or one that ``source`` picks (a function's callers or callees)."""

    def __init__(
        self,
        *,
        id: str | None = None,
        table_id: str = "tree-table",
        source: Source = whole_tree,
        what: str = "",
        invertible: bool = True,
    ) -> None:
        super().__init__(id=id)
        self.source = source
        self.what = what  # says what the tree is, on its status line (else its direction)
        self.invertible = invertible
        self.table_id = table_id
        self.inverted = False
        self.opened: set[str] = set()
        self._fresh = True  # the next tree opens its hottest path
        self._rows: dict[str, Shown] = {}
        self._shown: tuple[ProfileView, ViewOptions, bool, frozenset[str]] | None = None
        self._root: StackNode | None = None
        self._haystacks = Haystacks()

    def compose(self) -> ComposeResult:
        yield QuietStatic(classes="tree-status", markup=False)
        yield TreeTable(COLUMNS, id=self.table_id)

    @property
    def table(self) -> TreeTable:
        return self.query_one(TreeTable)

    def selected_path(self) -> tuple[Frame, ...]:
        """The frames from the tree's root to the highlighted node (the root's included)."""
        key = self.table.selected_key
        frames: list[Frame] = []
        row = self._rows.get(key) if key is not None else None
        while row is not None and row.node is not None:
            frames.append(row.node.frame)
            row = self._rows.get(row.parent) if row.parent is not None else None
        root = [self._root.frame] if self._root is not None else []
        return (*root, *reversed(frames))

    def show(self, view: ProfileView, options: ViewOptions) -> None:
        """Show ``view``'s tree with the rows the user opened."""
        state = (view, options, self.inverted, frozenset(self.opened))
        if self._shown is not None and self._shown[0] is view and self._shown[1:] == state[1:]:
            return  # views are immutable: the same view shows the same rows
        root = self.source(view, self.inverted)
        self._root = root
        if root is not None and self._fresh:
            self._fresh = False
            self.opened = hottest_path(root)
        self._shown = (view, options, self.inverted, frozenset(self.opened))
        rows, cut = visible(root, self.opened) if root is not None else ([], False)
        self._rows = {r.key: r for r in rows}
        scale = 100.0 / view.samples if view.samples else 0.0
        marked = self._marker(options)
        self.table.sync([
            table_row(r, self.opened, scale, options.raw_names,
                      r.node is not None and marked(r.node.frame))
            for r in rows
        ])  # fmt: skip
        self._show_status(options, len(rows), cut, view.samples)

    def _marker(self, options: ViewOptions) -> Callable[[Frame], bool]:
        """Whether a frame matches the functions' text filter (its rows are marked: bold
        and underlined, which needs no colour)."""
        if not options.text:
            return lambda _frame: False
        needle, raw, hay = options.text.casefold(), options.raw_names, self._haystacks.of
        return lambda frame: needle in hay(frame, raw)

    def _show_status(self, options: ViewOptions, rows: int, cut: bool, samples: int) -> None:
        if self.what:
            direction = self.what
        elif self.inverted:
            direction = "inverted: where time was spent, then its callers"
        else:
            direction = "top-down: callers above their callees"
        parts = [direction, "cumulative" if not options.recent else "recent window"]
        parts += selection_parts(options)
        if options.text:
            parts.append(f"{options.text!r} marked")
        parts.append(f"{samples} samples" if samples else "no samples yet")
        if cut:
            parts.append(f"first {rows} rows shown: close some")
        parts.append("→ ← open/close" + ("  i inverted" if self.invertible else ""))
        line = Text(printable("  ·  ".join(parts)), no_wrap=True, overflow="ellipsis", end="")
        self.query_one(".tree-status", QuietStatic).show(line, layout=False)

    def invert(self) -> None:
        """Switch between the top-down and the inverted tree (each opens its hottest path)."""
        if self.invertible:
            self.inverted = not self.inverted
            self._fresh = True

    def toggle(self, key: str, want: bool | None = None) -> bool:
        """Open or close the row ``key`` (``want`` None: the other way); on a row that
        cannot go that way, move: into its first child, or out to its parent. Returns
        whether the rows changed."""
        row = self._rows.get(key)
        if row is None or row.node is None:
            return False
        is_open = key in self.opened
        if want is None:
            want = not is_open
        if (want and is_open) or (want and not row.node.has_children):
            if is_open and row.node.children:
                self.table.select_key(_child_key(key, row.node.children[0].frame))
            return False
        if not want and not is_open:
            if row.parent is not None:
                self.table.select_key(row.parent)
            return False
        if want:
            self.opened.add(key)
        else:
            self.opened = {k for k in self.opened if k != key and not k.startswith(key + SEP)}
        return True

    def on_tree_table_opened(self, event: TreeTable.Opened) -> None:
        event.stop()
        if self.toggle(event.key, event.open):
            self.post_message(self.Changed())

    def on_tree_table_inverted(self, event: TreeTable.Inverted) -> None:
        event.stop()
        self.invert()
        self.post_message(self.Changed())

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        event.stop()
        if self.toggle(event.key):
            self.post_message(self.Changed())

    @dataclass
    class Changed(Message):
        """Rows opened or closed: show the held view again."""
