"""An SVG flame graph as a real browser renders it: Debian's Chromium, headless.

``rendered(svg, click=NAME, search=PATTERN)`` opens a copy of the file with one script
added at its end (the file's own script runs first, as it does for anyone), which
measures every frame's rectangle as laid out (``getBoundingClientRect``), clicks the
frame named ``click`` where it is drawn (the element at its centre, as a mouse would
hit it), measures again, runs the file's search with ``pattern``, and writes the results
into the document; ``--dump-dom`` prints the document, and the results are read back.

Skips the calling test, with the reason, where Chromium is not installed (.ci/run
installs it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_PROBE = """
<script><![CDATA[
(function () {
  const svg = document.querySelector("svg");
  const frames = Array.from(document.querySelectorAll("g.f"));
  function measure() {
    return frames.map((g) => {
      const r = g.querySelector("rect").getBoundingClientRect();
      return {name: g.dataset.name, width: r.width, left: r.left, top: r.top,
              label: g.querySelector("text").textContent,
              title: g.querySelector("title").textContent,
              fill: g.querySelector("rect").getAttribute("fill"),
              shown: getComputedStyle(g).display !== "none"};
    });
  }
  const out = {before: measure(), hit: null, after: null, matched: null};
  const target = frames.find((g) => g.dataset.name === CLICK);
  if (target) {
    const r = target.querySelector("rect").getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    out.hit = hit && hit.closest("g.f") ? hit.closest("g.f").dataset.name : null;
    if (hit) hit.dispatchEvent(new MouseEvent("click", {bubbles: true}));
    out.after = measure();
  }
  if (SEARCH !== null) out.matched = svg.livesym.search(SEARCH);
  const note = document.createElementNS("http://www.w3.org/2000/svg", "desc");
  note.setAttribute("id", "livesym-probe");
  note.textContent = JSON.stringify(out);
  svg.appendChild(note);
})();
]]></script>
"""


@dataclass(frozen=True)
class Box:
    name: str
    width: float
    left: float
    label: str
    title: str
    fill: str
    shown: bool


@dataclass(frozen=True)
class Rendered:
    before: list[Box]
    hit: str | None  # the frame the click landed on
    after: list[Box] | None
    matched: float | None


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if (path := shutil.which(name)) is not None:
            return path
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")


def rendered(
    svg: Path, tmp: Path, *, click: str | None = None, search: str | None = None
) -> Rendered:
    text = svg.read_text()
    probe = _PROBE.replace("CLICK", json.dumps(click)).replace("SEARCH", json.dumps(search))
    copy = tmp / f"probed-{svg.name}"
    copy.write_text(text.replace("</svg>", probe + "</svg>"))
    done = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", f"--user-data-dir={tmp / 'chromium-profile'}",
         "--window-size=1400,2000", "--virtual-time-budget=3000", "--dump-dom",
         copy.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = re.search(r'<desc id="livesym-probe">(.*?)</desc>', done.stdout, re.S)
    assert found is not None, (done.returncode, done.stderr[-2000:], done.stdout[-500:])
    raw = json.loads(_unescape(found.group(1)))

    def boxes(items: list[dict[str, object]] | None) -> list[Box] | None:
        if items is None:
            return None
        return [Box(str(i["name"]), float(i["width"]), float(i["left"]),  # (numbers: JSON)
                    str(i["label"]), str(i["title"]), str(i["fill"]), bool(i["shown"]))
                for i in items]  # fmt: skip

    before = boxes(raw["before"])
    assert before is not None
    return Rendered(before, raw["hit"], boxes(raw["after"]), raw["matched"])


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"') \
        .replace("&#39;", "'").replace("&amp;", "&")  # fmt: skip
