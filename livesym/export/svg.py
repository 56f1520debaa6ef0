"""A flame graph as one self-contained, interactive SVG file: the file ``py-spy record -o
x.svg`` and flamegraph.pl users hand around. Hover a frame for its share, click one to
zoom to it (click the bottom bar or press Escape to zoom out), search with the button or
Ctrl+F (a regular expression; the share of samples under a match is shown).

Root at the bottom, callers below their callees, each frame as wide as its samples
(``WIDTH`` pixels for all of them); frames narrower than ``MIN_PX`` are not drawn, and
the subtitle says how many and how many samples they held. The differential one
(``livesym diff --svg``) is sized by NEW and coloured by each frame's change in its own
(self) share from BASE: red grew, blue shrank, white the same (flamegraph.pl's
difffolded convention); a path gone in NEW has no width to draw, and its samples are in
the subtitle's "gone" figure.

Written here rather than taken from inferno or flamegraph.pl: both are separate
programs (Rust, Perl) that read folded text, which loses the module, the kind and the
differential shares each frame carries here; the file is a few hundred lines of SVG.
Every name is data: escaped for XML, control characters written as Python escapes.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from livesym.export.stacks import profile_frames, stack_counts, stack_frames
from livesym.printable import printable
from livesym.profile.diff import share_pct
from livesym.profile.difftree import DiffNode
from livesym.records import (
    KIND_KERNEL,
    KIND_PYTHON,
    KIND_ROOT,
    KIND_TRUNCATED,
    ROOT_FRAME,
    Capture,
    Frame,
    TimeMode,
)

WIDTH = 1200  # pixels, the frames' full width (as flamegraph.pl's default)
PAD = 10  # pixels either side
FRAME_H = 16  # pixels a level
FONT = 12  # px
CHAR_W = 0.59 * FONT  # a character's width, for cutting labels to fit
MIN_PX = 0.1  # frames narrower are not drawn
TOP = 3 * FRAME_H  # title and subtitle
BOTTOM = 2 * FRAME_H  # the details line
MAX_DEPTH = 4096  # levels drawn; deeper frames are counted as not drawn


@dataclass(slots=True, eq=False)
class Bar:
    """One frame on one path: its samples (its width) and, in a differential graph,
    its path's shares on both sides."""

    frame: Frame
    value: float
    self_value: float = 0.0
    children: list[Bar] = field(default_factory=list)
    base_pct: float | None = None  # differential: the path's total share in BASE
    delta_self_pp: float | None = None  # ... and the change of its own share


def capture_bars(capture: Capture, mode: TimeMode) -> Bar:
    """The capture's stacks as one tree of bars under ``[all]``, merged by function."""
    frames = profile_frames(capture)
    root = Bar(ROOT_FRAME, 0.0)
    index: dict[tuple[int, Frame], Bar] = {}
    for (_tid, sid), n in stack_counts(capture, mode).items():
        root.value += n
        node = root
        for frame in reversed(stack_frames(capture, frames, sid)):
            key = (id(node), frame)
            child = index.get(key)
            if child is None:
                child = index[key] = Bar(frame, 0.0)
                node.children.append(child)
            child.value += n
            node = child
        node.self_value += n
    return root


def diff_bars(root: DiffNode, base_samples: int, new_samples: int) -> Bar:
    """A diff tree as bars sized by NEW, each with its shares on both sides."""

    def bar(node: DiffNode) -> Bar:
        own = share_pct(node.new_self, new_samples) - share_pct(node.base_self, base_samples)
        base = share_pct(node.base_total, base_samples)
        return Bar(node.frame, float(node.new_total), float(node.new_self), base_pct=base,
                   delta_self_pp=own)  # fmt: skip

    top = bar(root)
    todo = [(root, top)]
    while todo:
        node, made = todo.pop()
        for child in node.children:
            b = bar(child)
            made.children.append(b)
            todo.append((child, b))
    return top


@dataclass(frozen=True, slots=True)
class _Box:
    bar: Bar
    x: float  # samples before it at its level
    depth: int


def _boxes(root: Bar) -> tuple[list[_Box], int, float]:
    """The frames to draw, in order, and how many were not (and their samples)."""
    total = root.value or 1.0
    scale = WIDTH / total
    out: list[_Box] = []
    hidden, hidden_samples = 0, 0.0
    todo = [_Box(root, 0.0, 0)]
    while todo:
        box = todo.pop()
        if box.bar.value * scale < MIN_PX or box.depth > MAX_DEPTH:
            hidden += 1
            hidden_samples += box.bar.value
            continue
        out.append(box)
        x = box.x
        ordered = sorted(box.bar.children, key=lambda b: b.frame.order)  # (flamegraph.pl's)
        for child in ordered:
            todo.append(_Box(child, x, box.depth + 1))
            x += child.value
    return out, hidden, hidden_samples


def _colour(bar: Bar, biggest_change: float) -> str:
    if bar.delta_self_pp is not None:
        strength = min(1.0, abs(bar.delta_self_pp) / biggest_change) if biggest_change else 0.0
        other = round(255 * (1 - strength))
        return f"rgb(255,{other},{other})" if bar.delta_self_pp > 0 else \
            f"rgb({other},{other},255)"  # fmt: skip
    frame = bar.frame
    v = zlib.crc32(frame.label.encode()) / 0xFFFFFFFF  # the same name, the same colour
    if frame.kind == KIND_TRUNCATED or (not frame.resolved and frame.kind != KIND_ROOT):
        return f"rgb({170 + round(40 * v)},{170 + round(40 * v)},{170 + round(40 * v)})"
    if frame.kind == KIND_KERNEL:
        return f"rgb({220 + round(30 * v)},{120 + round(60 * v)},0)"
    if frame.kind == KIND_PYTHON:
        return f"rgb({60 + round(60 * v)},{170 + round(60 * v)},{60 + round(60 * v)})"
    return f"rgb({205 + round(50 * v)},{round(230 * v)},{round(55 * (1 - v))})"


def _title(bar: Bar, total: float) -> str:
    frame = bar.frame
    name = frame.label if frame.kind != KIND_ROOT else "all"
    where = f" ({frame.module})" if frame.module else ""
    share = 100.0 * bar.value / total if total else 0.0
    text = f"{name}{where}: {bar.value:g} samples, {share:.2f} %"
    if bar.base_pct is not None and bar.delta_self_pp is not None:
        text += (f" (base {bar.base_pct:.2f} %, {share - bar.base_pct:+.2f} points; own "
                 f"time {bar.delta_self_pp:+.2f} points)")  # fmt: skip
    return printable(text)


def render(root: Bar, title: str, subtitle: str) -> str:
    """The flame graph of the tree under ``root`` as SVG text."""
    boxes, hidden, hidden_samples = _boxes(root)
    total = root.value
    depth = max((b.depth for b in boxes), default=0)
    height = TOP + (depth + 1) * FRAME_H + BOTTOM
    full = WIDTH + 2 * PAD
    if hidden:
        subtitle += (f"; {hidden} frames under {MIN_PX:g} px not drawn "
                     f"({100 * hidden_samples / (total or 1):.2f} % of the samples)")  # fmt: skip
    changes = [abs(b.bar.delta_self_pp) for b in boxes if b.bar.delta_self_pp is not None]
    biggest = max(changes, default=0.0)
    scale = WIDTH / (total or 1.0)
    parts = [
        '<?xml version="1.0" standalone="no"?>\n',
        f'<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{full}" '
        f'height="{height}" viewBox="0 0 {full} {height}" '
        f'data-total="{total:g}" data-width="{WIDTH}" data-pad="{PAD}" '
        f'data-char="{CHAR_W:.3f}" data-frame-h="{FRAME_H}">\n',
        f"<style>{_STYLE}</style>\n",
        f'<rect x="0" y="0" width="{full}" height="{height}" fill="#f8f8f8"/>\n',
        f'<text id="title" x="{full / 2}" y="{FRAME_H}" text-anchor="middle" '
        f'font-size="{FONT + 5}">{_text(title)}</text>\n',
        f'<text id="subtitle" x="{full / 2}" y="{2 * FRAME_H}" text-anchor="middle">'
        f"{_text(subtitle)}</text>\n",
        f'<text id="unzoom" class="button" x="{PAD}" y="{FRAME_H}" visibility="hidden">'
        "Reset zoom</text>\n",
        f'<text id="search" class="button" x="{full - PAD}" y="{FRAME_H}" '
        'text-anchor="end">Search</text>\n',
        f'<text id="matched" x="{full - PAD}" y="{height - FRAME_H / 2}" '
        'text-anchor="end"></text>\n',
        f'<text id="details" x="{PAD}" y="{height - FRAME_H / 2}"> </text>\n',
        '<g id="frames">\n',
    ]
    for box in boxes:
        parts.extend(_frame(box, total, scale, height, biggest))
    parts.append(f"</g>\n<script><![CDATA[{_SCRIPT}]]></script>\n</svg>\n")
    return "".join(parts)


def _frame(box: _Box, total: float, scale: float, height: int, biggest: float) -> Iterator[str]:
    bar = box.bar
    x = PAD + box.x * scale
    w = bar.value * scale
    y = height - BOTTOM - (box.depth + 1) * FRAME_H
    label = printable(bar.frame.label if bar.frame.kind != KIND_ROOT else "all")
    yield (
        f'<g class="f" data-x="{box.x:g}" data-w="{bar.value:g}" data-d="{box.depth}" '
        f"data-name={quoteattr(label)}>"
        f"<title>{_text(_title(bar, total))}</title>"
        f'<rect x="{x:.3f}" y="{y}" width="{w:.3f}" height="{FRAME_H - 1}" '
        f'fill="{_colour(bar, biggest)}" rx="2"/>'
        f'<text x="{x + 3:.3f}" y="{y + FRAME_H - 4}">{_text(_fit(label, w))}</text></g>\n'
    )


def _fit(label: str, width: float) -> str:
    room = math.floor((width - 6) / CHAR_W)
    if room < 3:
        return ""
    return label if len(label) <= room else label[: room - 2] + ".."


def _text(text: str) -> str:
    return escape(printable(text))


_STYLE = (
    "text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}"
    ".f text{pointer-events:none}.f:hover rect{stroke:#000;stroke-width:0.5}"
    ".button{cursor:pointer;fill:#0044aa}.f{cursor:pointer}.hide{display:none}"
    ".parent rect{opacity:0.5}"
)

# The page's behaviour: zoom (data-x/-w/-d are samples and levels, so a zoom recomputes
# each frame's box from them), search and details. Plain ES2015, no network, no eval.
_SCRIPT = r"""
(function () {
  const svg = document.querySelector("svg");
  const W = +svg.dataset.width, PAD = +svg.dataset.pad, CH = +svg.dataset.char;
  const frames = Array.from(document.querySelectorAll("g.f"));
  const details = document.getElementById("details");
  const unzoom = document.getElementById("unzoom");
  const matched = document.getElementById("matched");
  const total = +svg.dataset.total || 1;
  function fit(g, w) {
    const t = g.querySelector("text"), name = g.dataset.name;
    const room = Math.floor((w - 6) / CH);
    t.textContent = room < 3 ? "" : name.length <= room ? name : name.slice(0, room - 2) + "..";
  }
  function place(g, x, w) {
    const r = g.querySelector("rect");
    r.setAttribute("x", x.toFixed(3));
    r.setAttribute("width", w.toFixed(3));
    g.querySelector("text").setAttribute("x", (x + 3).toFixed(3));
    fit(g, w);
  }
  function zoom(target) {
    const x0 = +target.dataset.x, w0 = +target.dataset.w, d0 = +target.dataset.d;
    const scale = W / w0;
    for (const g of frames) {
      const x = +g.dataset.x, w = +g.dataset.w, d = +g.dataset.d;
      g.classList.remove("hide", "parent");
      if (d < d0 && x <= x0 && x + w >= x0 + w0) {
        g.classList.add("parent");
        place(g, PAD, W);
      } else if (d >= d0 && x >= x0 && x + w <= x0 + w0 + 1e-9) {
        place(g, PAD + (x - x0) * scale, w * scale);
      } else {
        g.classList.add("hide");
      }
    }
    unzoom.setAttribute("visibility", d0 > 0 ? "visible" : "hidden");
  }
  function reset() { zoom(frames.find((g) => +g.dataset.d === 0)); }
  function search(pattern) {
    let re;
    try { re = new RegExp(pattern); } catch (e) { matched.textContent = "bad pattern"; return 0; }
    const spans = [];
    for (const g of frames) {
      const hit = pattern !== "" && re.test(g.dataset.name);
      g.querySelector("rect").style.fill = hit ? "rgb(230,0,230)" : "";
      if (hit) spans.push([+g.dataset.x, +g.dataset.x + +g.dataset.w]);
    }
    spans.sort((a, b) => a[0] - b[0]);
    let covered = 0, end = -Infinity;
    for (const [a, b] of spans) {  // a sample under two matches counts once
      if (b <= end) continue;
      covered += b - Math.max(a, end);
      end = b;
    }
    const pct = 100 * covered / total;
    matched.textContent = spans.length ? "Matched: " + pct.toFixed(2) + " %" : "";
    return pct;
  }
  for (const g of frames) {
    g.addEventListener("click", () => zoom(g));
    const said = g.querySelector("title").textContent;
    g.addEventListener("mouseover", () => { details.textContent = said; });
    g.addEventListener("mouseout", () => { details.textContent = " "; });
  }
  unzoom.addEventListener("click", reset);
  document.getElementById("search").addEventListener("click", () => {
    const p = prompt("Search for (a regular expression):", "");
    if (p !== null) search(p);
  });
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "f") {
      e.preventDefault();
      const p = prompt("Search for (a regular expression):", "");
      if (p !== null) search(p);
    } else if (e.key === "Escape") { reset(); search(""); }
  });
  svg.livesym = { zoom: zoom, reset: reset, search: search };
})();
"""
