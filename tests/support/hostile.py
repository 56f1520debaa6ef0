"""Crafted inputs that hostile files can carry, shared by the tests that need them."""

from __future__ import annotations


def substitution_bomb(levels: int) -> str:
    """A mangled name of ~10 bytes per level whose demangling doubles at every level.

    f(A<A, A>, A<A<A, A>, A<A, A> >, ...): each parameter is A<S, S> of the previous one,
    written as a back-reference (S<n>_), so the name grows linearly and its demangling
    exponentially: 24 levels (242 bytes) demangle to 218 MB in 1.5 s with libstdc++'s
    __cxa_demangle (binutils' c++filt behaves the same).
    """
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def ref(index: int) -> str:
        if index == 0:
            return "S_"
        n, out = index - 1, ""
        while True:
            n, r = divmod(n, 36)
            out = digits[r] + out
            if n == 0:
                return f"S{out}_"

    name = "_Z1f1AIS_S_E"
    for k in range(2, levels + 1):
        name += f"S_I{ref(k - 1)}{ref(k - 1)}E"
    return name
