"""The export formats by name, each loaded on first use (pprof needs protobuf).

An exporter takes a capture, which time to count (``TimeMode``) and whether to split
stacks by process where the format has no other place for it (collapsed: ``--pid``),
and returns the bytes of the file (docs/sharing.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from livesym.errors import UsageError

if TYPE_CHECKING:
    from livesym.records import Capture, TimeMode

Exporter = Callable[["Capture", "TimeMode", bool], bytes]


def _collapsed(capture: Capture, mode: TimeMode, by_process: bool) -> bytes:
    from livesym.export.collapsed import collapsed

    return collapsed(capture, mode=mode, by_process=by_process).encode()


def _speedscope(capture: Capture, mode: TimeMode, by_process: bool) -> bytes:
    from livesym.export.speedscope import speedscope

    name = Path(str(capture.target.get("exe") or "livesym")).name
    return speedscope(capture, mode=mode, name=name)


def _pprof(capture: Capture, mode: TimeMode, by_process: bool) -> bytes:
    try:
        from livesym.export.pprof import pprof
    except ImportError:
        raise UsageError(
            "--format pprof needs the protobuf package: pip install protobuf"
        ) from None
    return pprof(capture, mode=mode)


def _svg(capture: Capture, mode: TimeMode, by_process: bool) -> bytes:
    from livesym.export.svg import capture_bars, render

    name = Path(str(capture.target.get("exe") or "livesym")).name
    root = capture_bars(capture, mode)
    subtitle = (f"{mode.value} time, {root.value:g} samples over {capture.seconds:.1f} s at "
                f"{capture.rate_hz or '?'} Hz")  # fmt: skip
    return render(root, f"livesym: {name}", subtitle).encode()


EXPORTERS: dict[str, Exporter] = {
    "collapsed": _collapsed,  # flamegraph.pl, inferno
    "speedscope": _speedscope,  # speedscope.app
    "pprof": _pprof,  # go tool pprof, Pyroscope, Parca
    "svg": _svg,  # a flame graph for a browser, to send to someone
}
FORMATS = tuple(EXPORTERS)
