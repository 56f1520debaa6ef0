"""The debuginfod client as the environment configures it, as elfutils' client reads
the same variables."""

from __future__ import annotations

from pathlib import Path

from livesym.records import Unresolved
from livesym.symbolize.debuginfod import DEFAULT_TIMEOUT, DebuginfodClient


def test_no_servers_means_no_client():
    assert DebuginfodClient.from_environment({}) is None
    assert DebuginfodClient.from_environment({"DEBUGINFOD_URLS": "  "}) is None
    # Only HTTP(S) URLs are servers; a file: or ftp: entry asks nothing
    assert DebuginfodClient.from_environment({"DEBUGINFOD_URLS": "file:///etc ftp://x"}) is None


def test_servers_cache_and_bounds_come_from_the_environment():
    env = {
        "DEBUGINFOD_URLS": "https://a.example/ http://b.example:8002",
        "DEBUGINFOD_CACHE_PATH": "/tmp/dcache",
        "DEBUGINFOD_TIMEOUT": "3",
        "DEBUGINFOD_MAXSIZE": "1000",
    }
    client = DebuginfodClient.from_environment(env)
    assert client is not None
    assert client.urls == ("https://a.example", "http://b.example:8002")
    assert client.cache == Path("/tmp/dcache")
    assert (client.timeout, client.max_bytes) == (3.0, 1000)
    # Unusable numbers fall back to the defaults; XDG_CACHE_HOME places the cache
    client = DebuginfodClient.from_environment(
        {"DEBUGINFOD_URLS": "http://x", "DEBUGINFOD_TIMEOUT": "-5", "XDG_CACHE_HOME": "/c"}
    )
    assert client is not None and client.timeout == DEFAULT_TIMEOUT
    assert client.cache == Path("/c/debuginfod_client")


def test_a_build_id_that_is_not_hex_is_never_a_path(tmp_path):
    client = DebuginfodClient(("http://127.0.0.1:9",), tmp_path)
    for hostile in ("../../etc/passwd", "ab/cd", "", "AB" * 10):
        got = client.debuginfo(hostile)
        assert isinstance(got, Unresolved) and "not hex" in got.detail
    assert list(tmp_path.iterdir()) == []


def test_a_remembered_miss_is_not_asked_again(tmp_path):
    # A server on a port nothing listens on: the first ask fails and is not remembered
    # as a miss (the server was down, not without the file); a miss marker is honoured.
    client = DebuginfodClient(("http://127.0.0.1:9",), tmp_path, timeout=1, maxtime=2)
    got = client.debuginfo("ab" * 20)
    assert isinstance(got, Unresolved) and "unreachable" in got.detail
    assert not (tmp_path / ("ab" * 20) / "debuginfo").exists()
    marker = tmp_path / ("cd" * 20) / "debuginfo"
    marker.parent.mkdir()
    marker.touch()
    got = client.debuginfo("cd" * 20)
    assert isinstance(got, Unresolved) and "cached miss" in got.detail
