"""``record --push URL``: each interval's profile sent to a Pyroscope-compatible ingest
endpoint, as Pyroscope's /ingest takes pprof. No Pyroscope or Parca server can run here:
the receiver is a local HTTP server that checks every part of each request (path, query,
multipart field) and whose profiles ``go tool pprof`` reads; every sample the recording
took is in exactly one profile. A server that is down costs counted, said losses, never
the recording."""

from __future__ import annotations

import gzip
import http.server
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from livesym.capture.reader import read_capture
from livesym.export.profile_proto import Profile
from tests.support.procs import running


class _Receiver(http.server.ThreadingHTTPServer):
    requests: list[tuple[str, dict[str, list[str]], str, bytes]]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        url = urllib.parse.urlsplit(self.path)
        self.server.requests.append((url.path, urllib.parse.parse_qs(url.query),
                                     self.headers.get("Content-Type", ""), body))  # fmt: skip
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver(("127.0.0.1", 0), _Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _field(content_type: str, body: bytes, name: str) -> bytes:
    """The multipart body's field ``name``."""
    boundary = re.search(r"boundary=([^;]+)", content_type)
    assert boundary, content_type
    for part in body.split(b"--" + boundary.group(1).encode()):
        head, _, data = part.partition(b"\r\n\r\n")
        if f'name="{name}"'.encode() in head:
            return data.removesuffix(b"\r\n")
    pytest.fail(f"no field {name!r} in the multipart body")


def _livesym(*args: str) -> list[str]:
    return [sys.executable, "-m", "livesym", *args]


@pytest.mark.skipif(shutil.which("go") is None, reason="go tool pprof is the reference reader")
def test_each_interval_is_pushed_once_as_pyroscope_takes_it(
    built: Callable[[str], Path], tmp_path: Path, receiver: _Receiver
):
    # GIVEN a recording that pushes every second to a receiver
    url = f"http://127.0.0.1:{receiver.server_address[1]}"
    capture = tmp_path / "pushed.json"
    with running(built("spin")) as target:
        result = subprocess.run(
            _livesym("record", str(target.pid), "-o", str(capture), "--rate", "199",
                     "--duration", "3.5", "--push", url, "--push-interval", "1",
                     "--push-name", "spin-app", "--push-label", "env=test"),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # THEN a request a second and the last part at the end, each as /ingest takes it
    assert 4 <= len(receiver.requests) <= 6, [r[1] for r in receiver.requests]
    assert f"pushed {len(receiver.requests)} profiles to {url}" in result.stderr
    spans = []
    total = 0
    for path, query, content_type, body in receiver.requests:
        assert path == "/ingest"
        assert query["name"] == ["spin-app{env=test}"]
        assert query["format"] == ["pprof"] and query["spyName"] == ["livesym"]
        start, until = int(query["from"][0]), int(query["until"][0])
        assert start < until
        spans.append((start, until))
        assert content_type.startswith("multipart/form-data")
        data = _field(content_type, body, "profile")
        profile = Profile.FromString(gzip.decompress(data))
        total += sum(sample.value[0] for sample in profile.sample)
        # ... which go tool pprof reads, hot functions named
        out = tmp_path / "one.pb.gz"
        out.write_bytes(data)
        listed = subprocess.run(["go", "tool", "pprof", "-top", str(out)],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert listed.returncode == 0, listed.stderr
    assert "hot_alpha" in listed.stdout or "leaf_work" in listed.stdout, listed.stdout
    # ... in time order, together every sample the recording took, each once
    assert spans == sorted(spans)
    recorded = read_capture(capture)
    assert total == sum(row[4] for row in recorded.samples) > 100


def test_a_server_that_is_down_costs_counted_losses_not_the_recording(
    built: Callable[[str], Path], tmp_path: Path
):
    # GIVEN a port nobody listens on
    with socket_closed() as port, running(built("spin")) as target:
        capture = tmp_path / "down.json"
        result = subprocess.run(
            _livesym("record", str(target.pid), "-o", str(capture), "--rate", "99",
                     "--duration", "1.5", "--push", f"http://127.0.0.1:{port}",
                     "--push-interval", "0.5"),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    # THEN the recording ends as any does, its capture whole, the losses said in one line
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "pushed" in line]
    assert len(lines) == 1 and re.search(r"pushed 0 profiles .*; \d+ not sent", lines[0]), lines
    assert "refused" in lines[0].lower(), lines[0]
    recorded = read_capture(capture)
    assert recorded.samples
    assert any("not pushed to" in e for e in recorded.session["errors"])


class socket_closed:
    """A local port that was free a moment ago (bound, then closed)."""

    def __enter__(self) -> int:
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        s.close()
        return port

    def __exit__(self, *exc: object) -> None:
        pass
