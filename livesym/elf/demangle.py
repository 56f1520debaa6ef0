"""Demangling: Itanium C++ through libstdc++'s ``__cxa_demangle`` (the same code
as c++filt), Rust legacy and v0 through rustc-demangle (the ``pyderust``
binding of rust-lang's own crate).

The C++ binding is a few lines of ctypes on ``libstdc++.so.6`` rather than the
cxxfilt package: cxxfilt locates the library with ``ctypes.util.find_library``
at import, which runs ``ldconfig`` in a subprocess (~30 ms on every start).

Both libraries load on first use. When one is missing, names stay raw: a
profile with mangled names is still a correct profile.

Symbol names are hostile input too. An Itanium back-reference (``S<seq>_``,
``T<n>_``) repeats an earlier part of the name, so a name made of nested
back-references demangles to output exponential in its length: 242 bytes can
demangle to 218 MB. Real names have few (libLLVM's 35,000 names: at most 44,
99% at most 11). A name with more than ``SUSPECT_REFS`` is demangled in a
forked child with an address-space limit and a deadline, within a time budget
per process; every result longer than ``MAX_DEMANGLED`` is dropped for the
raw name.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import resource
import select
import signal
import time
from collections.abc import Callable
from typing import Any

# Legacy Rust symbols are Itanium-shaped but end in a 17-character hash
# segment ("17h" + 16 hex digits) before the closing "E".
_RUST_LEGACY = re.compile(r"^_ZN.*17h[0-9a-f]{16}E(?:\.[\w.$]*)?$")

_CxxFn = Callable[[bytes], "str | None"]

_BACK_REFERENCE = re.compile(rb"S[0-9A-Z]*_|T[0-9]*_")
SUSPECT_REFS = 32
MAX_DEMANGLED = 64 << 10
SANDBOX_DEADLINE = 0.5  # seconds for one suspect name
SANDBOX_MEMORY = 256 << 20  # address space a suspect name may add
SANDBOX_BUDGET = 5.0  # seconds of sandboxed demangling per process, then raw names
_sandbox_spent = 0.0


def _load_cxa_demangle() -> _CxxFn | None:
    try:
        libcxx = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    # No argtypes: ctypes passes bytes and None as char* and NULL directly, and
    # skipping per-call argument conversion halves the cost of each call.
    cxa = libcxx.__cxa_demangle
    cxa.restype = ctypes.c_void_p
    free = libc.free
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    string_at = ctypes.string_at

    def demangle(name: bytes) -> str | None:
        # No status cell: libstdc++'s __cxa_demangle writes it only when given one, and
        # returns NULL on every failure (a name it rejects, or no memory).
        out = cxa(name, None, None, None)
        if not out:
            return None
        try:
            raw = string_at(out)
        finally:
            free(out)
        return raw.decode("utf-8", "backslashreplace")

    return demangle


def _load_rust_demangle() -> Callable[[str], str] | None:
    try:
        from pyderust import demangle
    except ImportError:
        return None
    return demangle


_UNLOADED: Any = object()
_cxx_fn: _CxxFn | None = _UNLOADED
_rust_fn: Callable[[str], str] | None = _UNLOADED


def _cxx() -> _CxxFn | None:
    global _cxx_fn
    if _cxx_fn is _UNLOADED:
        _cxx_fn = _load_cxa_demangle()
    return _cxx_fn


def _rust() -> Callable[[str], str] | None:
    global _rust_fn
    if _rust_fn is _UNLOADED:
        _rust_fn = _load_rust_demangle()
    return _rust_fn


def _demangle_rust(name: str) -> str | None:
    fn = _rust()
    if fn is None:
        return None
    try:
        return fn(name)
    except ValueError:
        return None


def demangle(name: str) -> str:
    """The readable form of a symbol name; the name itself when it is not mangled
    or no demangler accepts it."""
    if not name.startswith(("_Z", "_R")):
        return name
    return demangle_bytes(name.encode("utf-8", "surrogateescape"), name)


def demangle_bytes(raw: bytes, name: str) -> str:
    """``demangle`` for a name already at hand both as the file's bytes and as text
    (symbol tables have both), saving an encode on the hot path."""
    head = raw[:2]
    if head in (b"_Z", b"_R") and b"@" in raw:
        # A symbol version (@@GLIBCXX_3.4) or a PLT stub's @plt is no part of the
        # mangling: demangle what comes before, keep the rest, as c++filt does.
        at = name.index("@")
        return demangle_bytes(raw[: raw.index(b"@")], name[:at]) + name[at:]
    if head == b"_Z":
        # (Rust's legacy hash, "17h" and 16 hex digits, found before the regex is run)
        if raw[2:3] == b"N" and b"17h" in raw and _RUST_LEGACY.match(name):
            result = _demangle_rust(name)
            if result is not None:
                return result
        cxx = _cxx_fn if _cxx_fn is not _UNLOADED else _cxx()
        if cxx is None:
            return name
        # Every back-reference ends in "_": counting those first spares the regex.
        if raw.count(b"_") > SUSPECT_REFS and len(_BACK_REFERENCE.findall(raw)) > SUSPECT_REFS:
            found = _sandboxed(cxx, raw)
        else:
            found = cxx(raw)
        if found is not None and len(found) <= MAX_DEMANGLED:
            return found
        return name
    if head == b"_R":
        return _demangle_rust(name) or name
    return name


def _sandboxed(cxx: _CxxFn, raw: bytes) -> str | None:
    """Demangle a suspect name in a forked child: bounded memory, bounded time."""
    global _sandbox_spent
    if _sandbox_spent >= SANDBOX_BUDGET:
        return None
    started = time.monotonic()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: limit growth, demangle, send at most MAX_DEMANGLED bytes
        try:
            os.close(read_end)
            with open("/proc/self/statm") as f:
                size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            limit = size + SANDBOX_MEMORY
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            found = cxx(raw)
            if found is not None and len(found) <= MAX_DEMANGLED:
                os.write(write_end, b"+" + found.encode("utf-8", "surrogateescape"))
        finally:
            os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    try:
        deadline = started + SANDBOX_DEADLINE
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        _sandbox_spent += time.monotonic() - started
    data = b"".join(chunks)
    if not data.startswith(b"+"):
        return None
    return data[1:].decode("utf-8", "backslashreplace")
