"""Reading captures: untrusted input, validated before anything uses it.

Every failure is a ``CaptureError`` whose message names the file and what is
wrong with it; nothing here raises anything else for any input bytes.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from livesym.capture.model import FORMAT, MAX_WEIGHT, NEW_IN, READABLE_VERSIONS, VERSION
from livesym.capture.unchunk import ChunkError, is_chunked, merged
from livesym.collector import collector_paused
from livesym.errors import CaptureError
from livesym.records import (
    KIND_KERNEL,
    KIND_NATIVE,
    KIND_PYTHON,
    KIND_TRUNCATED,
    KIND_UNKNOWN,
    SAMPLE_FLAGS,
    Capture,
    FrameRecord,
    GenerationRecord,
    MappingRecord,
    ObjectRecord,
    ProcessRecord,
    ProcessStat,
    Reason,
)

# What parsing a capture may take, by default (--max-capture-memory): a capture of a
# million samples needs about 1.1 GiB by parse_cost's bound.
DEFAULT_MEMORY_LIMIT = 4 << 30
PARSED_OBJECT_BYTES = 64
CHUNK = 8 << 20  # bytes read, or inflated, at a time
MAX_SAMPLES = 50_000_000
MAX_FRAMES = 5_000_000
MAX_STACKS = 5_000_000
MAX_DEPTH = 16384  # frames in one stack (the unwinder stops at 8192, Python frames added)
MAX_GENERATIONS = 100_000
MAX_MAPPINGS = 5_000_000  # over all generations
MAX_PROCESS_STATS = 10_000_000
MAX_PROCESSES = 100_000
MAX_ARGV = 4096  # arguments kept of one process's command line


# What to do about a capture that is there but cannot be used.
_RECOPY = "the file may be truncated: copy it again, or record a new one with 'livesym record'"
_NOT_OURS = "give a capture written by 'livesym record' or 'livesym attach --record'"
_DAMAGED = "the file is damaged or not a livesym capture: copy it again, or record a new one"


# What a recording whose last chunk was cut short says of itself (its session's errors).
TORN = "the capture's last chunk was cut short (the recording was killed, or the disk refused it)"


class _Bad(Exception):
    """A validation failure; its message says what is wrong."""


class _Unsupported(_Bad):
    """A capture of another format version; its message also says what to do."""


def read_capture(path: str | Path, *, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> Capture:
    """Load and validate a capture file; raise CaptureError with one line on any problem,
    among them a capture whose parse would take more than ``memory_limit`` bytes."""
    # A capture is millions of small containers and none of them is garbage: the
    # cyclic collector would walk them over and over (it doubles the load time).
    with paused_gc():
        return _read_capture(str(path), memory_limit)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside (reference counting still frees).

    On the way out, what exists is frozen (``gc.freeze``): a loaded capture
    lives as long as the session, and the collector would otherwise walk its
    millions of objects at every full collection, a pause the dashboard shows.
    """
    with collector_paused(freeze=True):
        yield


def _read_capture(path: str, memory_limit: int) -> Capture:
    raw, cut = _read_bytes(path, memory_limit)
    chunked = is_chunked(raw)
    if cut and not chunked:
        raise CaptureError(f"{path}: damaged gzip data ({cut}); {_RECOPY}")
    if not raw or raw.isspace():
        raise CaptureError(f"{path}: not a readable capture (empty file); {_RECOPY}")
    if chunked:
        # A recording's chunks: a tail cut short is the chunk a killed or refused write
        # left, and what came before it reads.
        try:
            doc, torn = merged(raw)
        except ChunkError as e:
            raise CaptureError(f"{path}: invalid capture: {e}; {_DAMAGED}") from None
        if torn or cut:
            doc["session"]["errors"].append(TORN)
        return _validated(path, doc)
    try:
        # orjson: a million-sample capture parses in a third of json's time.
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        # Running out of data (at the very end, or inside a string that never
        # closes) means the document was cut short; anything else is not JSON.
        short = "end of data" in e.msg or e.pos >= len(raw.rstrip())
        what, todo = ("truncated", _RECOPY) if short else ("not JSON", _NOT_OURS)
        raise CaptureError(f"{path}: not a readable capture ({what}: {e.msg}); {todo}") from None
    return _validated(path, doc)


def _validated(path: str, doc: Any) -> Capture:
    try:
        return _capture(doc)
    except _Unsupported as e:
        raise CaptureError(f"{path}: {e}") from None
    except _Bad as e:
        raise CaptureError(f"{path}: invalid capture: {e}; {_DAMAGED}") from None


def _read_bytes(path: str, memory_limit: int) -> tuple[bytearray, str]:
    """The file's text (inflated), and why it ends early where its gzip data does."""
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            return _bounded(path, _gunzipped(f) if gzipped else _chunks(f), memory_limit)
    except FileNotFoundError:
        raise CaptureError(
            f"{path}: no such capture file; check the path, or record a capture with "
            "'livesym record PID -o FILE'"
        ) from None
    except IsADirectoryError:
        raise CaptureError(
            f"{path}: is a directory, not a capture file; give the path of a capture file"
        ) from None
    except PermissionError:
        raise CaptureError(
            f"{path}: cannot read: permission denied; run as the file's owner, or copy it "
            "somewhere readable"
        ) from None
    except zlib.error as e:
        raise CaptureError(f"{path}: damaged gzip data ({e}); {_RECOPY}") from None
    except OSError as e:
        raise CaptureError(
            f"{path}: cannot read: {e.strerror}; check the path and the disk"
        ) from None


def parse_cost(chunk: bytes | bytearray) -> int:
    """An upper bound on the memory that parsing these bytes of JSON takes.

    Every value after a ``,`` or ``:`` or inside a ``[`` or ``{`` is at most one
    Python object of PARSED_OBJECT_BYTES with its slot in a container (an empty list
    or dict, a float, a short string); the text itself becomes at most 4 bytes a
    character (UCS-4 strings). Counting bytes is C-speed; no tokenizer is needed.
    """
    separators = chunk.count(b",") + chunk.count(b":") + chunk.count(b"[") + chunk.count(b"{")
    return PARSED_OBJECT_BYTES * separators + 4 * len(chunk)


def _bounded(path: str, chunks: Iterator[bytes], memory_limit: int) -> tuple[bytearray, str]:
    """The chunks joined, refused as soon as parsing them would take more than
    ``memory_limit`` bytes: a small file that inflates to gigabytes, or gigabytes of
    tiny values, stop here with one line instead of taking the machine down. With what
    came, why they ended early ("" when they did not): the caller decides what a cut
    means."""
    data = bytearray()
    cost = 0
    try:
        for chunk in chunks:
            cost += len(chunk) + parse_cost(chunk)  # the text is held while it is parsed
            _check_cost(path, cost, memory_limit, len(data) + len(chunk))
            data += chunk
    except EOFError as e:
        return data, str(e)
    return data, ""


def _check_cost(path: str, cost: int, memory_limit: int, read: int) -> None:
    if cost > memory_limit:
        raise CaptureError(
            f"{path}: reading it would take more than {format_size(memory_limit)} of "
            f"memory (over {format_size(read)} of JSON read so far); "
            "if you trust the file and have the memory, raise the limit with "
            "--max-capture-memory SIZE"
        )


def _chunks(f: BinaryIO) -> Iterator[bytes]:
    while chunk := f.read(CHUNK):
        yield chunk


def _gunzipped(f: BinaryIO) -> Iterator[bytes]:
    """The gzip members of ``f`` one after another (a recording appends one a chunk),
    inflated a bounded chunk at a time; EOFError where the last is cut short. Bytes
    after the last member that do not start another are ignored, as gzip does."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    started = False  # whether ``inflate`` has been given any of its member
    pending = b""
    for compressed in _chunks(f):
        pending += compressed
        while pending:
            if inflate.eof:
                if len(pending) < 2:
                    break  # the next member's magic may be split between two reads
                if not pending.startswith(b"\x1f\x8b"):
                    return  # not another member: trailing bytes
                inflate, started = zlib.decompressobj(16 + zlib.MAX_WBITS), False
            out = inflate.decompress(pending, CHUNK)
            started = True
            # What it did not take: more to inflate, or (at a member's end) the next one.
            pending = inflate.unused_data if inflate.eof else inflate.unconsumed_tail
            if out:
                yield out
    if pending == b"\x1f" or (started and not inflate.eof):
        raise EOFError("compressed data ends early (truncated file?)")


def format_size(n: int) -> str:
    """Bytes as a person reads them: 4 GiB, 512 MiB, 3 KiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return (
                f"{value:.0f} {unit}"
                if value >= 10 or value == int(value)
                else f"{value:.1f} {unit}"
            )
    return f"{n} B"


def _get(doc: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in doc:
        raise _Bad(f"missing field {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
        raise _Bad(f"field {key!r} has the wrong type")
    return value


def _check_older_version(doc: dict[str, Any], version: int) -> None:
    """A capture holds only the frames its version knows: a version 1 file has no
    truncated frames and no unnamed functions, a version 2 file no kernel frames. A
    file that says otherwise was not written by the livesym of its version."""
    frames = doc.get("frames")
    for f in frames if isinstance(frames, list) else ():
        if not isinstance(f, dict):
            continue
        brought = 2 if f.get("kind") == "truncated" or f.get("reason") == "unnamed_function" else 0
        brought = 3 if f.get("kind") in (KIND_KERNEL, KIND_UNKNOWN) else brought
        if brought > version:
            raise _Bad(f"a version {version} capture with {NEW_IN[brought]} (version {brought})")


def _capture(doc: Any) -> Capture:
    if not isinstance(doc, dict):
        raise _Bad("the top level is not an object")
    if doc.get("format") != FORMAT:
        raise _Bad(f"format is {doc.get('format')!r}, not {FORMAT!r}")
    version = doc.get("version")
    if version not in READABLE_VERSIONS or type(version) is not int:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        raise _Unsupported(
            f"capture version {version!r} is not supported (this livesym reads {readable}); "
            "read it with the livesym release that wrote it"
        )
    if version < VERSION:
        _check_older_version(doc, version)
    objects = tuple(_object(o, i) for i, o in enumerate(_get(doc, "objects", list)))
    frames_raw = _get(doc, "frames", list)
    if len(frames_raw) > MAX_FRAMES:
        raise _Bad(f"more than {MAX_FRAMES} frames")
    frames = tuple(_frame(f, i, len(objects)) for i, f in enumerate(frames_raw))
    stacks = _stacks(_get(doc, "stacks", list), len(frames))
    samples = _samples(_get(doc, "samples", list), len(stacks), version >= 5)
    threads_raw = _get(doc, "threads", dict)
    threads: dict[int, str] = {}
    for tid, name in threads_raw.items():
        if not (isinstance(tid, str) and tid.isdecimal() and isinstance(name, str)):
            raise _Bad("threads must map thread ids to names")
        threads[int(tid)] = name
    maps = _generations(_get(doc, "maps", list), len(objects))
    process = _process(doc.get("process", []))
    processes = _processes(doc.get("processes", []))
    thread_pids = _thread_pids(doc.get("thread_pids", {}))
    return Capture(
        target=_get(doc, "target", dict),
        host=_get(doc, "host", dict),
        sampler=_get(doc, "sampler", dict),
        session=_get(doc, "session", dict),
        maps=maps,
        objects=objects,
        frames=frames,
        stacks=stacks,
        threads=threads,
        samples=samples,
        process=process,
        processes=processes,
        thread_pids=thread_pids,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _processes(raw: Any) -> tuple[ProcessRecord, ...]:
    if not isinstance(raw, list):
        raise _Bad("field 'processes' has the wrong type")
    if len(raw) > MAX_PROCESSES:
        raise _Bad(f"more than {MAX_PROCESSES} processes")
    out = []
    for i, p in enumerate(raw):
        where = f"process {i}"
        if not isinstance(p, dict):
            raise _Bad(f"{where} is not an object")
        pid, name, argv = _get(p, "pid", int), _get(p, "name", str), _get(p, "argv", list)
        parent, started, ended = p.get("parent", 0), p.get("started", 0.0), p.get("ended")
        if not (
            all(isinstance(a, str) for a in argv) and len(argv) <= MAX_ARGV and _is_int(parent)
            and _is_number(started) and (ended is None or _is_number(ended))
        ):  # fmt: skip
            raise _Bad(f"{where} has a field of the wrong type")
        out.append(ProcessRecord(pid, name, tuple(argv), parent, float(started),
                                 None if ended is None else float(ended)))  # fmt: skip
    return tuple(out)


def _thread_pids(raw: Any) -> dict[int, int]:
    if not isinstance(raw, dict) or len(raw) > MAX_SAMPLES:
        raise _Bad("field 'thread_pids' has the wrong type")
    out: dict[int, int] = {}
    for tid, pid in raw.items():
        if not (isinstance(tid, str) and tid.isdecimal() and len(tid) < 20 and _is_int(pid)):
            raise _Bad("thread_pids must map thread ids to process ids")
        out[int(tid)] = pid
    return out


def _hex_or_none(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Bad(f"{what} is not a hex string")
    try:
        return int(value, 16)
    except ValueError:
        raise _Bad(f"{what} is not a hex string: {value[:40]!r}") from None


def _str_or_none(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _Bad(f"{what} is not a string")
    return value


def _int_or_none(value: Any, what: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise _Bad(f"{what} is not an integer")
    return value


def _object(o: Any, index: int) -> ObjectRecord:
    if not isinstance(o, dict):
        raise _Bad(f"object {index} is not an object")
    if _get(o, "id", int) != index:
        raise _Bad(f"object {index} has id {o.get('id')!r}")
    segments = _get(o, "segments", list)
    if not all(isinstance(s, dict) for s in segments):
        raise _Bad(f"object {index}: segments must be objects")
    return ObjectRecord(
        id=index,
        path=_get(o, "path", str),
        build_id=_str_or_none(o.get("build_id"), f"object {index} build_id"),
        e_type=_get(o, "e_type", str),
        elf_class=_get(o, "elf_class", int),
        machine=_get(o, "machine", str),
        segments=tuple(segments),
        symbol_source=_str_or_none(o.get("symbol_source"), f"object {index} symbol_source"),
    )


def _frame(f: Any, index: int, objects: int) -> FrameRecord:
    # Called once per frame of the capture (hundreds of thousands): field checks
    # go through _field, which builds a message only when a check fails.
    if type(f) is not dict:
        raise _Bad(f"frame {index} is not an object")
    if f.get("id") != index or type(f.get("id")) is not int:
        raise _Bad(f"frame {index} has id {f.get('id')!r}")
    obj = _field(f, "object", _INT, index)
    if obj is not None and not 0 <= obj < objects:
        raise _Bad(f"frame {index} refers to object {obj}, which does not exist")
    mapping = f.get("mapping")
    parsed_mapping = None
    if mapping is not None:
        if not (type(mapping) is list and len(mapping) == 4 and type(mapping[2]) is str):
            raise _Bad(f"frame {index} mapping must be [start, end, perms, pgoff]")
        try:
            parsed_mapping = (int(mapping[0], 16), int(mapping[1], 16), mapping[2],
                              int(mapping[3], 16))  # fmt: skip
        except (TypeError, ValueError):
            raise _Bad(f"frame {index} mapping addresses are not hex strings") from None
    steps = f.get("steps", [])
    problems = f.get("problems", [])
    if not (type(steps) is list and _all_str(steps)):
        raise _Bad(f"frame {index} steps must be strings")
    if not (type(problems) is list and _all_str(problems)):
        raise _Bad(f"frame {index} problems must be strings")
    vma = _field(f, "vma", _HEX, index)
    if vma is None:
        raise _Bad(f"frame {index} has no vma")
    kind = f.get("kind", KIND_NATIVE)
    if kind not in (KIND_NATIVE, KIND_PYTHON, KIND_TRUNCATED, KIND_KERNEL, KIND_UNKNOWN):
        raise _Bad(f"frame {index} kind must be native, python, kernel, truncated or unknown")
    generation = f.get("generation")
    if type(generation) is not int:
        raise _Bad(f"frame {index}: field 'generation' is missing or not an integer")
    return FrameRecord(
        index, generation, vma, _field(f, "module", _STR, index), obj, parsed_mapping,
        _field(f, "base", _HEX, index), _field(f, "segment", _INT, index),
        _field(f, "elf_vaddr", _HEX, index), _field(f, "elf_offset", _HEX, index),
        _field(f, "symbol", _STR, index), _field(f, "demangled", _STR, index),
        _field(f, "symbol_vaddr", _HEX, index), _field(f, "symbol_size", _INT, index),
        _field(f, "symbol_offset", _INT, index), _reason(f.get("reason"), index),
        _field(f, "detail", _STR, index) or "", tuple(steps), tuple(problems), kind,
        _field(f, "line", _INT, index), _field(f, "source_file", _STR, index),
    )  # fmt: skip


_HEX, _INT, _STR = 0, 1, 2
_REASONS = {r.value: r for r in Reason}


def _reason(value: Any, index: int) -> Reason | None:
    if value is None:
        return None
    found = _REASONS.get(value) if type(value) is str else None
    if found is None:
        raise _Bad(f"frame {index} reason {str(value)[:40]!r} is not one livesym knows")
    return found


def _all_str(items: list[Any]) -> bool:
    try:
        "".join(items)  # checks every item is a str, in C
    except TypeError:
        return False
    return True


def _field(f: dict[str, Any], name: str, kind: int, index: int) -> Any:
    """Field ``name`` of frame ``index``: None, or a hex string / integer / string."""
    value = f.get(name)
    if value is None:
        return None
    if kind == _HEX:
        if type(value) is str:
            try:
                return int(value, 16)
            except ValueError:
                pass
        raise _Bad(f"frame {index} {name} is not a hex string: {str(value)[:40]!r}")
    if kind == _INT:
        if type(value) is int:
            return value
        raise _Bad(f"frame {index} {name} is not an integer")
    if type(value) is str:
        return value
    raise _Bad(f"frame {index} {name} is not a string")


def _generations(raw: list[Any], objects: int) -> tuple[GenerationRecord, ...]:
    if len(raw) > MAX_GENERATIONS:
        raise _Bad(f"more than {MAX_GENERATIONS} maps generations")
    out = []
    total = 0
    for i, g in enumerate(raw):
        where = f"maps generation {i}"
        if not isinstance(g, dict):
            raise _Bad(f"{where} is not an object")
        entries = _get(g, "entries", list)
        total += len(entries)
        if total > MAX_MAPPINGS:
            raise _Bad(f"more than {MAX_MAPPINGS} mappings in all generations")
        out.append(
            GenerationRecord(
                number=_get(g, "generation", int),
                time=float(_get(g, "time", (int, float))),
                mappings=tuple(
                    _mapping(e, f"{where} entry {j}", objects) for j, e in enumerate(entries)
                ),
                pid=_get(g, "pid", int) if "pid" in g else 0,
            )
        )
    return tuple(out)


def _mapping(e: Any, where: str, objects: int) -> MappingRecord:
    if not (isinstance(e, list) and len(e) in (8, 9)):
        raise _Bad(f"{where} is not [start, end, perms, pgoff, dev, inode, path, deleted, facts]")
    start, end, pgoff = (_hex_or_none(e[i], where) for i in (0, 1, 3))
    perms, dev, inode, path, deleted = e[2], e[4], e[5], e[6], e[7]
    if start is None or end is None or pgoff is None or not (
        isinstance(perms, str) and isinstance(dev, str) and isinstance(path, str)
        and isinstance(inode, int) and not isinstance(inode, bool) and isinstance(deleted, bool)
    ):  # fmt: skip
        raise _Bad(f"{where} has a field of the wrong type")
    facts = e[8] if len(e) == 9 else {}
    if not isinstance(facts, dict):
        raise _Bad(f"{where}: facts must be an object")
    obj = _int_or_none(facts.get("object"), f"{where} object")
    if obj is not None and not 0 <= obj < objects:
        raise _Bad(f"{where} refers to object {obj}, which does not exist")
    problems = facts.get("problems", [])
    if not (isinstance(problems, list) and all(isinstance(p, str) for p in problems)):
        raise _Bad(f"{where} problems must be strings")
    return MappingRecord(
        start=start, end=end, perms=perms, pgoff=pgoff, dev=dev, inode=inode, path=path,
        deleted=deleted, object=obj,
        base=_hex_or_none(facts.get("base"), f"{where} base"),
        base_formula=_str_or_none(facts.get("base_formula"), f"{where} base_formula"),
        e_type=_str_or_none(facts.get("e_type"), f"{where} e_type"),
        build_id=_str_or_none(facts.get("build_id"), f"{where} build_id"),
        symbol_source=_str_or_none(facts.get("symbol_source"), f"{where} symbol_source"),
        problems=tuple(problems),
    )  # fmt: skip


def _process(raw: Any) -> tuple[ProcessStat, ...]:
    if not isinstance(raw, list):
        raise _Bad("field 'process' has the wrong type")
    if len(raw) > MAX_PROCESS_STATS:
        raise _Bad(f"more than {MAX_PROCESS_STATS} process statistics")
    out = []
    for i, p in enumerate(raw):
        if not (
            isinstance(p, list)
            and len(p) == 4
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)
        ):
            raise _Bad(f"process statistic {i} is not [time, cpu%, rss, threads]")
        out.append(ProcessStat(float(p[0]), float(p[1]), int(p[2]), int(p[3])))
    return tuple(out)


def _stacks(raw: list[Any], frames: int) -> tuple[tuple[int, ...], ...]:
    if len(raw) > MAX_STACKS:
        raise _Bad(f"more than {MAX_STACKS} stacks")
    # Whole-table checks first (fast); the loop below finds and names a bad one.
    if all(type(s) is list and len(s) <= MAX_DEPTH for s in raw):
        ids = [fid for s in raw for fid in s]
        if all(type(fid) is int for fid in ids) and (
            not ids or (min(ids) >= 0 and max(ids) < frames)
        ):
            return tuple(map(tuple, raw))
    for i, stack in enumerate(raw):
        if not isinstance(stack, list) or len(stack) > MAX_DEPTH:
            raise _Bad(f"stack {i} is not a list of at most {MAX_DEPTH} frame ids")
        for fid in stack:
            if not isinstance(fid, int) or isinstance(fid, bool) or not 0 <= fid < frames:
                raise _Bad(f"stack {i} refers to frame {fid!r}, which does not exist")
    raise AssertionError("unreachable: the fast check failed but no stack is bad")


def _samples(
    raw: list[Any], stacks: int, weighted: bool
) -> tuple[tuple[float, int, int, int, int], ...]:
    """The rows ``[time, tid, stack, flags]``, and from version 5 (``weighted``) also
    ``[time, tid, stack, flags, weight]``; each comes back with its weight (1 unsaid)."""
    if len(raw) > MAX_SAMPLES:
        raise _Bad(f"more than {MAX_SAMPLES} samples")
    if not raw:
        return ()
    # Column-wise checks first (a million samples in a fraction of a second);
    # only when they fail does the loop below find and name the bad sample.
    if all(type(s) is list and len(s) == 4 for s in raw):
        times, tids, sids, flags = zip(*raw, strict=True)
        if _columns_good(times, tids, sids, flags, stacks):
            return tuple(zip(map(float, times), tids, sids, flags, [1] * len(raw), strict=True))
    elif weighted and all(type(s) is list and 4 <= len(s) <= 5 for s in raw):
        full = [s if len(s) == 5 else [*s, 1] for s in raw]
        times, tids, sids, flags, weights = zip(*full, strict=True)
        if _columns_good(times, tids, sids, flags, stacks) and all(
            type(w) is int and 1 <= w <= MAX_WEIGHT for w in weights
        ):
            return tuple(zip(map(float, times), tids, sids, flags, weights, strict=True))
    _name_bad_sample(raw, stacks, weighted)
    raise AssertionError("unreachable: the fast check failed but no sample is bad")


def _columns_good(
    times: tuple[Any, ...], tids: tuple[Any, ...], sids: tuple[Any, ...],
    flags: tuple[Any, ...], stacks: int,
) -> bool:  # fmt: skip
    return (
        all(type(t) is float or type(t) is int for t in times)
        and all(type(v) is int for v in tids)
        and all(type(v) is int and 0 <= v <= SAMPLE_FLAGS for v in flags)
        and all(type(v) is int for v in sids)
        and min(sids) >= 0
        and max(sids) < stacks
    )


def _name_bad_sample(raw: list[Any], stacks: int, weighted: bool) -> None:
    """Raise _Bad naming the first sample that is not right."""
    shape = "[time, tid, stack, flags" + (", weight]" if weighted else "]")
    for i, s in enumerate(raw):
        if not (isinstance(s, list) and (len(s) == 4 or (weighted and len(s) == 5))):
            raise _Bad(f"sample {i} is not {shape}")
        t, tid, stack, flag, *weight = s
        if not isinstance(t, int | float) or isinstance(t, bool):
            raise _Bad(f"sample {i} has a bad time")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (tid, stack, flag)):
            raise _Bad(f"sample {i} has a bad thread, stack or flags")
        if not 0 <= flag <= SAMPLE_FLAGS:
            raise _Bad(f"sample {i} has flags {flag} (bits 0-2 only)")
        if weight and not (type(weight[0]) is int and 1 <= weight[0] <= MAX_WEIGHT):
            raise _Bad(f"sample {i} has a bad weight (a whole number from 1 to {MAX_WEIGHT})")
        if not 0 <= stack < stacks:
            raise _Bad(f"sample {i} refers to stack {stack}, which does not exist")


MAX_LOST_AT = 1 << 16  # seconds with lost samples a capture may list


def lost_at(session: dict[str, Any]) -> list[tuple[int, int]]:
    """The session's ``lost_at``: (second from its start, samples lost in it), the first
    ``MAX_LOST_AT`` (captures written before the timeline have none). Read as ``lost``
    is, leniently: an entry that is not two non-negative integers is passed over (the
    total still says the loss)."""
    raw = session.get("lost_at")
    if not isinstance(raw, list):
        return []
    out = []
    for pair in raw[:MAX_LOST_AT]:
        if isinstance(pair, list) and len(pair) == 2 and all(_is_int(v) and v >= 0 for v in pair):
            out.append((pair[0], pair[1]))
    return out
