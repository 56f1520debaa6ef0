"""Demangling: Itanium C++ through libstdc++'s ``__cxa_demangle`` (the same code
as c++filt), Rust legacy and v0 through rustc-demangle (the ``pyderust``
binding of rust-lang's own crate).

The C++ binding is a few lines of ctypes on ``libstdc++.so.6`` rather than the
cxxfilt package: cxxfilt locates the library with ``ctypes.util.find_library``
at import, which runs ``ldconfig`` in a subprocess (~30 ms on every start).

Both libraries load on first use. When one is missing, names stay raw: a
profile with mangled names is still a correct profile.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from functools import lru_cache

# Legacy Rust symbols are Itanium-shaped but end in a 17-character hash
# segment ("17h" + 16 hex digits) before the closing "E".
_RUST_LEGACY = re.compile(r"^_ZN.*17h[0-9a-f]{16}E(?:\.[\w.$]*)?$")

_CxxFn = Callable[[bytes], "str | None"]


def _load_cxa_demangle() -> _CxxFn | None:
    try:
        libcxx = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    cxa = libcxx.__cxa_demangle
    cxa.restype = ctypes.c_void_p
    cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free = libc.free
    free.argtypes = [ctypes.c_void_p]
    free.restype = None

    def demangle(name: bytes) -> str | None:
        status = ctypes.c_int(0)
        out = cxa(name, None, None, ctypes.byref(status))
        if not out:
            return None
        try:
            if status.value != 0:
                return None
            raw = ctypes.string_at(out)
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


@lru_cache(maxsize=1)
def _cxx() -> _CxxFn | None:
    return _load_cxa_demangle()


@lru_cache(maxsize=1)
def _rust() -> Callable[[str], str] | None:
    return _load_rust_demangle()


def is_mangled(name: str) -> bool:
    return name.startswith(("_Z", "_R"))


def _demangle_rust(name: str) -> str | None:
    fn = _rust()
    if fn is None:
        return None
    try:
        return fn(name)
    except ValueError:
        return None


def _demangle_cxx(name: str) -> str | None:
    fn = _cxx()
    if fn is None:
        return None
    try:
        return fn(name.encode("utf-8", "surrogateescape"))
    except (ValueError, UnicodeEncodeError):
        return None


def demangle(name: str) -> str:
    """The readable form of a symbol name; the name itself when it is not mangled
    or no demangler accepts it."""
    if name.startswith("_R") or (name.startswith("_ZN") and _RUST_LEGACY.match(name)):
        result = _demangle_rust(name)
        if result is not None:
            return result
    if name.startswith("_Z"):
        result = _demangle_cxx(name)
        if result is not None:
            return result
    return name
