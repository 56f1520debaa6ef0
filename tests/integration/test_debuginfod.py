"""Debug files fetched by build-id from a real debuginfod server (elfutils', on
127.0.0.1, indexing a folder that holds only the debug file of a stripped spin), and
from servers that are down, slow, or answer garbage or another build's file."""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.debugfiles import build_id_of, split_debug, with_build_id
from tests.support.procs import running
from tests.support.spin import HOT

pytestmark = pytest.mark.skipif(
    shutil.which("debuginfod") is None, reason="elfutils' debuginfod (installed by .ci/run)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stripped:
    def __init__(self, exe: Path, debug: Path, build_id: str, functions: dict[str, int]):
        self.exe, self.debug, self.build_id, self.functions = exe, debug, build_id, functions


@pytest.fixture
def stripped(built: Callable[[str], Path], tmp_path: Path) -> Stripped:
    from tests.integration.test_debug_files_real import functions

    spin = built("spin")
    exe, debug = split_debug(spin, tmp_path / "bin")
    served = tmp_path / "served"
    served.mkdir()
    debug = debug.rename(served / debug.name)  # not beside the binary: only the server has it
    return Stripped(exe, debug, build_id_of(exe), functions(spin))


@pytest.fixture
def server(stripped: Stripped, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """elfutils' debuginfod serving the folder, once it has scanned it: its URL."""
    port = free_port()
    proc = subprocess.Popen(["debuginfod", "-F", "-d", str(tmp_path / "db.sqlite"), "-p",
                             str(port), str(stripped.debug.parent)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:  # until it has scanned the folder
        try:
            with urllib.request.urlopen(f"{url}/buildid/{stripped.build_id}/debuginfo", timeout=2):
                break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "debuginfod never served"
            time.sleep(0.2)

    yield lambda: url
    proc.terminate()
    proc.wait(timeout=10)


def names_of(cli, exe: Path, addresses: list[int], *options: str) -> list[dict]:
    result = cli("symbolize", "-e", str(exe), "--json", *options, *map(hex, addresses))
    assert result.code == 0 and "Traceback" not in result.err, result.err
    return result.json_lines()


def test_a_stripped_program_is_named_from_the_server_then_from_the_cache(
    cli, stripped, server, tmp_path, monkeypatch
):
    cache = tmp_path / "cache"
    monkeypatch.setenv("DEBUGINFOD_URLS", server())
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(cache))
    hot = sorted(HOT)
    addresses = [stripped.functions[f] + 2 for f in hot]
    # WHEN symbolize asks for addresses in the stripped program's static functions
    rows = names_of(cli, stripped.exe, addresses)
    # THEN the server's debug file names them, kept in the shared client cache
    assert [r["symbol"] for r in rows] == hot
    kept = cache / stripped.build_id / "debuginfo"
    assert {r["symbol_source"] for r in rows} == {"debuginfod"}
    assert {r["symbol_file"] for r in rows} == {str(kept)}
    assert kept.read_bytes() == stripped.debug.read_bytes()
    # ... a build-id the server does not have is a miss, remembered (an empty file)
    true = Path("/usr/bin/true")
    names_of(cli, true, [0x1000])
    miss = cache / build_id_of(true) / "debuginfo"
    assert miss.is_file() and miss.stat().st_size == 0
    # ... and with the server gone, the cache still names them
    subprocess.run(["pkill", "-f", f"debuginfod .*{stripped.debug.parent}"], check=False)
    time.sleep(0.3)
    assert [r["symbol"] for r in names_of(cli, stripped.exe, addresses)] == hot
    # ... while --offline, with an empty cache, asks nothing and names nothing
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "empty"))
    rows = names_of(cli, stripped.exe, addresses, "--offline")
    assert [r["symbol"] for r in rows] == [None] * len(hot)
    assert not (tmp_path / "empty").exists()


def test_top_on_the_running_stripped_program_names_its_hot_functions(
    cli, stripped, server, tmp_path, monkeypatch
):
    monkeypatch.setenv("DEBUGINFOD_URLS", server())
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))
    with running(stripped.exe) as proc:
        result = cli("top", str(proc.pid), "--duration", "2", "--json", "--limit", "20")
    assert result.code == 0, result.err
    named = {f["symbol"] for f in json.loads(result.out)["functions"]}
    assert set(HOT) <= named, named


class _Hostile(http.server.BaseHTTPRequestHandler):
    """Answers every GET as the test says: garbage, another build's file, or slowly."""

    body: bytes = b""
    delay: float = 0.0

    def do_GET(self) -> None:
        time.sleep(self.delay)
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # a client that gave up
            self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile() -> Iterator[Callable[[bytes, float], str]]:
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(body: bytes, delay: float = 0.0) -> str:
        handler = type("H", (_Hostile,), {"body": body, "delay": delay})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("case", ["down", "garbage", "another build", "slow"])
def test_a_bad_server_costs_that_server_never_the_command(
    cli, stripped, hostile, tmp_path, monkeypatch, case
):
    if case == "down":
        url = f"http://127.0.0.1:{free_port()}"
    elif case == "garbage":
        url = hostile(b"\x7fELF this is not an ELF file at all" * 100)
    elif case == "another build":
        other = with_build_id(stripped.debug, tmp_path / "other.debug", "ab" * 20)
        url = hostile(other.read_bytes())
    else:
        url = hostile(stripped.debug.read_bytes(), 5.0)
        monkeypatch.setenv("DEBUGINFOD_TIMEOUT", "1")
    cache = tmp_path / "cache"
    monkeypatch.setenv("DEBUGINFOD_URLS", url)
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(cache))
    started = time.monotonic()
    rows = names_of(cli, stripped.exe, [stripped.functions["hot_alpha"] + 2])
    # THEN the command carries on without the file, within the bounds, keeps nothing
    assert rows[0]["symbol"] is None
    assert time.monotonic() - started < 15
    assert not (cache / stripped.build_id / "debuginfo").is_file() or (
        (cache / stripped.build_id / "debuginfo").stat().st_size == 0
    )


def test_a_capture_from_a_box_without_symbols_is_named_where_a_server_has_them(
    cli, stripped, server, tmp_path, monkeypatch
):
    # GIVEN a capture of the stripped program, recorded with no server (names unknown)
    monkeypatch.setenv("DEBUGINFOD_URLS", "")
    capture = tmp_path / "cap.json.gz"
    with running(stripped.exe) as proc:
        result = cli("record", str(proc.pid), "--duration", "2", "-o", str(capture))
    assert result.code == 0, result.err
    before = json.loads(cli("report", str(capture), "--json").out)["functions"]
    assert not set(HOT) & {f["symbol"] for f in before}
    # WHEN it is reported where DEBUGINFOD_URLS names a server that has the debug file
    monkeypatch.setenv("DEBUGINFOD_URLS", server())
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))
    report = cli("report", str(capture), "--json")
    assert report.code == 0, report.err
    # THEN its frames are named by their ELF vaddrs in the fetched file
    after = {f["symbol"] for f in json.loads(report.out)["functions"]}
    assert set(HOT) <= after, after
    # ... and --offline asks nothing
    offline = cli("report", str(capture), "--json", "--offline")
    assert not set(HOT) & {f["symbol"] for f in json.loads(offline.out)["functions"]}


def test_a_live_session_says_what_it_fetches_and_names_come_once_it_arrives(
    stripped, hostile, tmp_path, monkeypatch
):
    import asyncio

    from livesym.engine import Engine
    from livesym.sampling.perf_event import PerfSampler
    from livesym.target.process import TargetProcess
    from livesym.ui.header import header_lines

    # GIVEN a server that has the debug file but takes 3 s to answer
    monkeypatch.setenv("DEBUGINFOD_URLS", hostile(stripped.debug.read_bytes(), 3.0))
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))

    async def session(pid: int) -> tuple[list[str], list[tuple[int, int, float]], set[str]]:
        engine = Engine(TargetProcess(pid), PerfSampler(pid, 499))
        target = psutil.Process(pid)
        stop = asyncio.Event()
        task = asyncio.create_task(engine.run(stop, 15.0))
        headers: list[str] = []
        # (samples counted, of them in HOT functions, the target's CPU seconds so far)
        counts: list[tuple[int, int, float]] = []
        names: set[str] = set()
        while not task.done() and not set(HOT) <= names:
            await asyncio.sleep(0.1)
            snap = engine.snapshot()
            cpu = target.cpu_times()
            headers.append(str(header_lines(snap, False)[1]))
            rows = snap.view.functions
            names = {r.frame.symbol or "" for r in rows}
            hot = sum(r.self_samples for r in rows if r.frame.symbol in HOT)
            counts.append((snap.view.samples, hot, cpu.user + cpu.system))
        stop.set()
        await task
        return headers, counts, names

    with running(stripped.exe) as proc:
        headers, counts, names = asyncio.run(session(proc.pid))
    # THEN while it waits the header says it is fetching, and samples are counted all
    # the while: the session does not wait for the server. cpu-clock samples come a
    # period of the target's CPU time each (on a busy machine it runs less than the
    # clock says), so the wait is judged by that time.
    fetching = [(n, cpu) for h, (n, _, cpu) in zip(headers, counts, strict=True) if "fetching" in h]
    assert any("fetching debug info (1)" in h for h in headers), headers[:5]
    assert len(fetching) >= 2, headers[:5]
    (first, cpu_first), (last, cpu_last) = fetching[0], fetching[-1]
    assert cpu_last - cpu_first >= 1.0, fetching  # the wait was long enough to judge
    assert last - first >= 0.8 * 499 * (cpu_last - cpu_first), fetching
    # ... and the names come after, for the samples taken before too
    assert set(HOT) <= names, names
    assert "fetching" not in headers[-1]
    total, hot, _ = counts[-1]
    assert total >= last and hot >= 0.8 * total, counts[-1]


@pytest.mark.parametrize("wait", [None, "0"])
def test_top_waits_a_bounded_time_for_a_slow_server_then_names_every_sample(
    cli, stripped, hostile, tmp_path, monkeypatch, wait
):
    # GIVEN a server that takes 3 s to send the debug file, longer than top samples
    monkeypatch.setenv("DEBUGINFOD_URLS", hostile(stripped.debug.read_bytes(), 3.0))
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))
    option = () if wait is None else ("--debuginfod-wait", wait)
    with running(stripped.exe) as proc:
        started = time.monotonic()
        result = cli("top", str(proc.pid), "--duration", "1", "--json", *option, timeout=60)
        took = time.monotonic() - started
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    hot = sum(f["self"] for f in doc["functions"] if f["symbol"] in HOT)
    if wait is None:
        # THEN by default it waits for the file, and every sample is named by it
        assert hot >= 0.8 * doc["samples"], doc["functions"][:5]
    else:
        # ... and with --debuginfod-wait 0 it prints at once, the frames unnamed
        assert hot == 0 and took < 3.0, (hot, took)
