# The C walk's interface (livesym/_cfiwalk.c); livesym.unwind.quick uses it.

MAX_FRAMES: int

class Steps:
    size: int
    def put(
        self,
        address: int,
        cfa_is_bp: bool,
        cfa_offset: int,
        ra_offset: int,
        bp_offset: int | None,
        low_other: int | None,
        high_other: int | None,
        /,
    ) -> None: ...
    def put_root(self, address: int, /) -> None: ...
    def put_other(self, address: int, /) -> None: ...
    def clear(self) -> None: ...
    def walk(
        self, pc: int, sp: int, bp: int, copy: bytes, limit: int = ..., /
    ) -> tuple[int, ...] | int | None: ...
