"""One perf event's mmap'd ring buffer, read as the kernel publishes it.

Ring buffer protocol (kernel/events/ring_buffer.c, perf_event.h): the kernel
writes records, then publishes ``data_head`` with a release store; we load
``data_head``, then the records, then store ``data_tail`` to hand the space
back. The reader needs a read barrier between the head load and the data
loads, and a full barrier between the data loads and the tail store. Python
cannot emit a fence instruction, so ``RingBuffer._fence`` releases and
re-acquires a private lock: glibc implements that as a release RMW followed
by an acquire RMW (a locked instruction on x86-64; LDADDL/CASA or
STLXR/LDAXR on arm64), which orders every earlier access before every later
one. On x86-64 (TSO: loads are not reordered with loads, nor stores with
earlier loads) the plain loads would already be enough.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import threading
from collections.abc import Iterator

from livesym.sampling import perf_abi as abi

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_munmap = _libc.munmap
_munmap.restype = ctypes.c_int
_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


class RingBuffer:
    """The mmap of one event: a header page and 2^n data pages.

    Mapped with libc's mmap rather than with mmap.mmap, which dup()s the fd
    (two perf fds per thread) and unmaps only once no buffer export is left.
    """

    def __init__(self, fd: int, data_pages: int, page: int) -> None:
        self.length = (1 + data_pages) * page
        ctypes.set_errno(0)
        addr = _mmap(None, self.length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno() or errno.ENOMEM
            raise OSError(err, os.strerror(err))
        self._addr: int | None = addr
        self._head = ctypes.c_uint64.from_address(addr + abi.DATA_HEAD_OFFSET)
        self._tail = ctypes.c_uint64.from_address(addr + abi.DATA_TAIL_OFFSET)
        offset = ctypes.c_uint64.from_address(addr + abi.DATA_OFFSET_OFFSET).value
        size = ctypes.c_uint64.from_address(addr + abi.DATA_SIZE_OFFSET).value
        # Kernels before 4.1 leave data_offset/data_size zero: the data follows the page.
        self.data_offset = offset or page
        self.data_size = size or data_pages * page
        self._view = (ctypes.c_char * self.length).from_address(addr)
        self._fence_lock = threading.Lock()
        self._fence_lock.acquire()

    def _fence(self) -> None:
        # See the module docstring: a release followed by an acquire.
        self._fence_lock.release()
        self._fence_lock.acquire()

    def empty(self) -> bool:
        """Whether the kernel has published nothing since the last read: one load of
        each offset, no fence (a head read stale is read afresh at the next drain). Most
        rings of a session are empty at most drains (a sleeping thread's, the switch
        events'), and the ``published`` context cost more than the look."""
        return self._addr is None or self._head.value == self._tail.value

    @contextlib.contextmanager
    def published(self) -> Iterator[bytes | memoryview]:
        """Every record the kernel has published, in place where it does not wrap
        (``abi.ring_span``: parse it inside the ``with``, and keep no view of it), then
        the space given back.

        Raises ValueError when head/tail are inconsistent; the space is given
        back all the same, so one bad read cannot wedge the ring.
        """
        if self._addr is None:
            yield b""
            return
        head = self._head.value  # one aligned 8-byte load
        self._fence()
        tail = self._tail.value
        try:
            view = memoryview(self._view)
            yield abi.ring_span(view, self.data_offset, self.data_size, tail, head)
        finally:
            self._fence()
            self._tail.value = head

    def close(self) -> None:
        if self._addr is not None:
            addr, self._addr = self._addr, None
            _munmap(addr, self.length)
