"""The SVG flame graph's file (export/svg.py): well-formed XML whatever the names hold,
each frame as wide as its samples, what is too narrow to draw counted, a deep stack
drawn without recursion. Its rendering is checked in Chromium (tests/integration/
test_diff.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from livesym.export.svg import MIN_PX, WIDTH, capture_bars, render
from livesym.records import TimeMode
from tests.unit.test_export import capture, native

SVG = "{http://www.w3.org/2000/svg}"


def _frames(text: str) -> dict[str, ET.Element]:
    root = ET.fromstring(text.encode())
    return {g.get("data-name", ""): g for g in root.iter(f"{SVG}g") if g.get("class") == "f"}


def test_hostile_names_stay_data_and_the_file_stays_well_formed():
    names = ["a<b>&\"c'", "red\x1b[31m\x00\x7f", "]]></script><script>alert(1)</script>"]
    frames = [native(i, name) for i, name in enumerate(names)] + [native(3, "main")]
    c = capture(frames, [(0, 3), (1, 3), (2, 3)], [(0.0, 7, s, 0) for s in (0, 1, 2)])
    text = render(capture_bars(c, TimeMode.CPU), "t<", "s&")
    drawn = _frames(text)  # (ET raises on anything not well-formed)
    assert "a<b>&\"c'" in drawn
    assert "red\\x1b[31m\\x00\\x7f" in drawn  # controls as Python escapes: XML 1.0 has none
    assert "\x1b" not in text and "\x00" not in text
    assert text.count("<script>") == 1  # a name cannot close the file's script or add one


def test_each_frame_is_as_wide_as_its_samples_and_the_narrow_are_counted():
    frames = [native(0, "big"), native(1, "tiny"), native(2, "main")]
    big, tiny = 20_000 - 1, 1  # tiny: 1200 / 20000 = 0.06 px, under MIN_PX
    samples = [(0.0, 7, 0, 0, big), (0.0, 7, 1, 0, tiny)]
    c = capture(frames, [(0, 2), (1, 2)], samples)
    text = render(capture_bars(c, TimeMode.CPU), "t", "s")
    drawn = _frames(text)
    rect = drawn["big"].find(f"{SVG}rect")
    assert rect is not None
    assert abs(float(rect.get("width", "0")) - WIDTH * big / (big + tiny)) < 1e-3
    assert "tiny" not in drawn and WIDTH * tiny / (big + tiny) < MIN_PX
    assert "1 frames under 0.1 px not drawn (0.01 % of the samples)" in text


def test_a_deep_recursion_is_drawn_to_its_leaf():
    depth = 3000
    frames = [native(i, f"r{i}") for i in range(depth)]
    c = capture(frames, [tuple(range(depth))], [(0.0, 7, 0, 0)])
    drawn = _frames(render(capture_bars(c, TimeMode.CPU), "t", "s"))
    assert len(drawn) == depth + 1  # every level and the root
    assert drawn["r0"].get("data-d") == str(depth)  # the leaf, on top
