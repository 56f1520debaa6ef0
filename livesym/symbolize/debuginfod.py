"""Debug files by build-id from debuginfod servers, as elfutils' client fetches them.

``DEBUGINFOD_URLS`` (space-separated) names the servers; an empty or unset one (or
``--offline``) asks nothing. Each server is asked ``GET /buildid/ID/debuginfo``;
what arrives is kept in the client cache the other tools share
(``DEBUGINFOD_CACHE_PATH``, else ``$XDG_CACHE_HOME/debuginfod_client``, else
``~/.cache/debuginfod_client``) as ``ID/debuginfo``, and a build-id no server has
leaves an empty file there, so it is not asked again for ``CACHE_MISS_S``.

Every reply is hostile: the body is bounded (``DEBUGINFOD_MAXSIZE``, else
``MAX_BYTES``), every read and the whole fetch are timed out
(``DEBUGINFOD_TIMEOUT``, ``DEBUGINFOD_MAXTIME``), and a file is kept only once it
reads as ELF with the build-id asked for. A server that is down, slow, or answers
garbage or another build's file costs that server, with a one-line reason.

Plain HTTP through the standard library rather than elfutils' libdebuginfod: the
library would add a C dependency (through ctypes) for one GET per object, and its
failures would be harder to bound and to report in one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from livesym.elf.image import load_image
from livesym.errors import LivesymError
from livesym.records import Reason, Unresolved

MAX_BYTES = 4 << 30  # of one debug file, unless DEBUGINFOD_MAXSIZE says less
DEFAULT_TIMEOUT = 10.0  # seconds without progress (elfutils waits 90: too long here)
DEFAULT_MAXTIME = 60.0  # seconds for one fetch, over every server
CACHE_MISS_S = 600  # a build-id no server had is not asked again for this long
CHUNK = 1 << 20
MAX_SERVERS = 16
_BUILD_ID = re.compile(r"[0-9a-f]{2,128}")

# Build-ids being fetched now, by any client of this process: what the dashboard's
# header shows while names wait for a server.
_in_flight: dict[str, int] = {}
_in_flight_lock = threading.Lock()


def fetching() -> tuple[str, ...]:
    """The build-ids whose files are being fetched now."""
    with _in_flight_lock:
        return tuple(_in_flight)


@contextlib.contextmanager
def _fetching(build_id: str) -> Iterator[None]:
    with _in_flight_lock:
        _in_flight[build_id] = _in_flight.get(build_id, 0) + 1
    try:
        yield
    finally:
        with _in_flight_lock:
            left = _in_flight.pop(build_id, 1) - 1
            if left > 0:
                _in_flight[build_id] = left


Kind = Literal["debuginfo", "executable"]


@dataclass(frozen=True)
class DebuginfodClient:
    """The servers, the cache and the bounds of one session."""

    urls: tuple[str, ...]
    cache: Path
    timeout: float = DEFAULT_TIMEOUT
    maxtime: float = DEFAULT_MAXTIME
    max_bytes: int = MAX_BYTES

    @classmethod
    def from_environment(cls, env: Mapping[str, str] = os.environ) -> DebuginfodClient | None:
        """The client the environment asks for; None where it names no server."""
        urls = tuple(u.rstrip("/") for u in env.get("DEBUGINFOD_URLS", "").split() if u)
        urls = tuple(u for u in urls if u.startswith(("http://", "https://")))[:MAX_SERVERS]
        if not urls:
            return None
        cache = env.get("DEBUGINFOD_CACHE_PATH") or os.path.join(
            env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "debuginfod_client",
        )
        return cls(
            urls,
            Path(cache),
            _seconds(env.get("DEBUGINFOD_TIMEOUT"), DEFAULT_TIMEOUT),
            _seconds(env.get("DEBUGINFOD_MAXTIME"), DEFAULT_MAXTIME),
            int(_seconds(env.get("DEBUGINFOD_MAXSIZE"), MAX_BYTES)),
        )

    def debuginfo(self, build_id: str) -> Path | Unresolved:
        """The debug file of ``build_id``: from the cache, else fetched (and kept)."""
        return self.fetch(build_id, "debuginfo")

    def executable(self, build_id: str) -> Path | Unresolved:
        """The binary itself (its symbols, for a capture read where it is not)."""
        return self.fetch(build_id, "executable")

    def fetch(self, build_id: str, kind: Kind) -> Path | Unresolved:
        known = self.cached(build_id, kind)
        if known is not None:
            return known
        with _fetching(build_id):
            return self._fetch(build_id, self.cache / build_id / kind, kind)

    def cached(self, build_id: str, kind: Kind) -> Path | Unresolved | None:
        """What the cache knows of ``build_id`` without asking a server: its file, a
        recent miss (or a build-id that is not one); None where a server must be asked."""
        if not _BUILD_ID.fullmatch(build_id):
            return Unresolved(Reason.UNREADABLE, f"build-id {build_id!r} is not hex")
        place = self.cache / build_id / kind
        try:
            st = place.stat()
        except OSError:
            return None
        if st.st_size > 0:
            return place
        if time.time() - st.st_mtime < CACHE_MISS_S:
            return Unresolved(Reason.UNREADABLE, "no debuginfod server had it (cached miss)")
        return None

    def _fetch(self, build_id: str, place: Path, kind: str) -> Path | Unresolved:
        deadline = time.monotonic() + self.maxtime
        why: list[str] = []
        missing = 0
        for url in self.urls:
            if time.monotonic() >= deadline:
                why.append(f"{url}: not asked, {self.maxtime:g} s spent")
                continue
            got = self._get(f"{url}/buildid/{build_id}/{kind}", build_id, place, deadline)
            if isinstance(got, Path):
                return got
            missing += got.detail.endswith("has no such file")
            why.append(f"{url}: {got.detail}")
        if missing == len(self.urls):
            with contextlib.suppress(OSError):  # remember the miss, as elfutils does
                place.parent.mkdir(parents=True, exist_ok=True)
                place.touch()
        return Unresolved(Reason.UNREADABLE, "; ".join(why))

    def _get(self, url: str, build_id: str, place: Path, deadline: float) -> Path | Unresolved:
        try:
            place.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=place.parent, prefix=".fetch-")
        except OSError as e:
            return Unresolved(Reason.UNREADABLE, f"cache {self.cache}: {e.strerror}")
        try:
            with os.fdopen(fd, "wb") as out:
                size = self._download(url, out, deadline)
            if isinstance(size, Unresolved):
                return size
            checked = _check(temp, build_id)
            if checked is not None:
                return checked
            os.replace(temp, place)
            temp = ""
            return place
        finally:
            if temp:
                with contextlib.suppress(OSError):
                    os.unlink(temp)

    def _download(self, url: str, out: IO[bytes], deadline: float) -> int | Unresolved:
        import urllib.error  # only once a server is asked: http.client is not small
        import urllib.request

        request = urllib.request.Request(url, headers={"User-Agent": "livesym"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                length = reply.headers.get("Content-Length")
                if length is not None and length.isdigit() and int(length) > self.max_bytes:
                    return Unresolved(Reason.UNREADABLE, f"offers {length} bytes, over the limit")
                size = 0
                while chunk := reply.read(CHUNK):
                    size += len(chunk)
                    if size > self.max_bytes:
                        return Unresolved(Reason.UNREADABLE, f"sent over {self.max_bytes} bytes")
                    if time.monotonic() > deadline:
                        return Unresolved(Reason.UNREADABLE, "too slow: the time allowed ran out")
                    out.write(chunk)
                return size
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return Unresolved(Reason.UNREADABLE, "has no such file")
            return Unresolved(Reason.UNREADABLE, f"answered HTTP {e.code}")
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            return Unresolved(Reason.UNREADABLE, f"unreachable ({reason})")


def _check(path: str, build_id: str) -> Unresolved | None:
    """None where ``path`` is an ELF file of ``build_id``, else why it is refused."""
    try:
        image = load_image(path)
    except LivesymError as e:
        return Unresolved(Reason.UNREADABLE, f"sent a file that is not ELF ({e})")
    if image.build_id_hex != build_id:
        return Unresolved(
            Reason.OTHER_BUILD, f"sent build-id {image.build_id_hex}, not {build_id}: refused"
        )
    return None


def _seconds(text: str | None, default: float) -> float:
    try:
        value = float(text) if text else default
    except ValueError:
        return default
    return value if value > 0 else default


class BackgroundFetches:
    """Debug files fetched in threads of their own, so a live session never waits for a
    server: the symbols it loads meanwhile go without, and the engine renames their
    frames once ``arrived`` says the file is in the cache.

    Daemon threads, at most PARALLEL fetching at once: a session that ends does not
    wait for a server (a file half written stays a temporary file, never the cache's).
    """

    PARALLEL = 2

    def __init__(self, client: DebuginfodClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.PARALLEL)
        self._started: set[str] = set()
        self._arrived: list[str] = []
        self._threads: list[threading.Thread] = []

    def start(self, build_id: str) -> None:
        """Fetch the debug file of ``build_id`` unless that was started already."""
        with self._lock:
            if build_id in self._started:
                return
            self._started.add(build_id)
            thread = threading.Thread(
                target=self._run, args=(build_id,), name=f"livesym-debuginfod-{build_id[:8]}",
                daemon=True,
            )  # fmt: skip
            self._threads.append(thread)
        thread.start()

    def _run(self, build_id: str) -> None:
        with _fetching(build_id), self._slots:  # shown as fetching while queued too
            got = self.client.debuginfo(build_id)
        if not isinstance(got, Unresolved):
            with self._lock:
                self._arrived.append(build_id)

    def take_arrived(self) -> list[str]:
        """The build-ids whose debug files arrived since the last call."""
        with self._lock:
            arrived, self._arrived = self._arrived, []
        return arrived

    def has_arrived(self) -> bool:
        with self._lock:
            return bool(self._arrived)

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the fetches started so far; True if none
        is left running."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)
