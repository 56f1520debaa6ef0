"""``record --push URL``: each interval's profile sent to a Pyroscope-compatible back end.

Every ``interval`` seconds the recording's last interval is made into a pprof profile
(``export.pprof``: build-ids and file offsets in its mappings, so the back end can
symbolize what livesym could not) and sent as Pyroscope's ingest API takes it:

    POST URL/ingest?name=APP{labels}&from=START&until=END&format=pprof&spyName=livesym
    Content-Type: multipart/form-data; the field ``profile``: the gzipped profile

Sending runs in a thread of its own with a bounded queue: sampling never waits for the
network. A send that fails (the server down, refusing, too slow) is tried again with
back-off (1, 2, 4 s), up to ``ATTEMPTS`` times while newer profiles wait; one that
still fails, or that finds the queue full, is a counted loss, said in one line at the
end and in the session's errors, never the end of the session.

Written here with the standard library (urllib): a multipart body of one field is a few
lines, and no HTTP client library is worth its weight for one POST every ten seconds.
Tested against a local receiver that checks every part of the request and decodes the
profile with ``go tool pprof``; it was not run against a live Pyroscope or Parca server
(none can run on these machines).
"""

from __future__ import annotations

import queue
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass

from livesym.errors import UsageError

ATTEMPTS = 4  # tries of one profile (back-off 1, 2, 4 s between them)
QUEUE = 32  # profiles waiting to be sent; past it the oldest is a counted loss
TIMEOUT = 10.0  # seconds one request may take
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class Interval:
    """One interval's profile: gzipped pprof, and its span in Unix seconds."""

    profile: bytes
    start: float
    end: float


@dataclass(frozen=True)
class Target:
    """Where to send: the server's base URL, the application's name and its labels."""

    url: str
    app: str
    labels: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, url: str, app: str, labels: dict[str, str]) -> Target:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"--push {url!r} is not an http(s) URL: give the back end's "
                             "address, e.g. --push http://pyroscope:4040")  # fmt: skip
        for name in (app, *labels):
            if not _NAME.fullmatch(name):
                raise UsageError(f"{name!r} is not a name Pyroscope takes (letters, digits, "
                                 "'_', '.', '-')")  # fmt: skip
        return cls(url.rstrip("/"), app, tuple(sorted(labels.items())))

    def ingest_url(self, start: float, end: float) -> str:
        labels = ",".join(f"{k}={v}" for k, v in self.labels)
        query = urllib.parse.urlencode({
            "name": f"{self.app}{{{labels}}}", "from": int(start), "until": max(int(end),
            int(start) + 1), "format": "pprof", "spyName": "livesym",
        })  # fmt: skip
        return f"{self.url}/ingest?{query}"


def multipart(field: str, data: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body of one file field, and its content type."""
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
            f'filename="{field}.pb.gz"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


class Pusher:
    """Sends intervals in a thread; ``sent``, ``lost`` and ``last_error`` say how it went."""

    def __init__(self, target: Target, attempts: int = ATTEMPTS) -> None:
        self.target = target
        self._attempts = attempts
        self._closing = threading.Event()  # the session ended: no more waiting to retry
        self._queue: queue.Queue[Interval | None] = queue.Queue(QUEUE)
        self.sent = 0
        self.lost = 0
        self.last_error = ""
        self._busy = False  # a profile is being sent (or waits to be tried again)
        self._thread = threading.Thread(target=self._run, name="livesym-push", daemon=True)
        self._thread.start()

    def push(self, interval: Interval | None) -> None:
        """Queue ``interval``; never waits (a full queue loses its oldest: counted)."""
        while True:
            try:
                self._queue.put_nowait(interval)
                return
            except queue.Full:
                try:
                    if self._queue.get_nowait() is not None:
                        self.lost += 1
                except queue.Empty:
                    pass

    def close(self, wait: float) -> None:
        """No more intervals: each that waits is tried once more, now (a retry waiting
        for its back-off too), for at most ``wait`` seconds; the rest is lost, counted."""
        self._closing.set()
        self.push(None)
        self._thread.join(wait)
        if self._thread.is_alive():  # (the None that ends it is not a profile)
            self.lost += max(0, self._queue.qsize() - 1) + self._busy

    def _run(self) -> None:
        while (interval := self._queue.get()) is not None:
            self._busy = True
            if self._send_with_retries(interval):
                self.sent += 1
            else:
                self.lost += 1
            self._busy = False

    def _send_with_retries(self, interval: Interval) -> bool:
        for attempt in range(self._attempts):
            if attempt:
                if self._closing.is_set():
                    return False  # (tried once since the session ended)
                self._closing.wait(float(1 << (attempt - 1)))  # cut short by the end
            try:
                self._send(interval)
                return True
            except (OSError, urllib.error.URLError) as e:
                self.last_error = _why(e)
        return False

    def _send(self, interval: Interval) -> None:
        body, content_type = multipart("profile", interval.profile)
        request = urllib.request.Request(
            self.target.ingest_url(interval.start, interval.end), data=body, method="POST",
            headers={"Content-Type": content_type, "User-Agent": "livesym"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            answer.read(1 << 16)


def _why(e: BaseException) -> str:
    if isinstance(e, urllib.error.HTTPError):
        return f"the server answered {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        return str(e.reason)[:200]
    return str(e)[:200]
