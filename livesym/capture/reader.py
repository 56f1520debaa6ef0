"""Reading captures: untrusted input, validated before anything uses it.

Every failure is a ``CaptureError`` whose message names the file and what is
wrong with it; nothing here raises anything else for any input bytes.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from livesym.capture.model import FORMAT, VERSION, Capture, FrameRecord, ObjectRecord
from livesym.errors import CaptureError

MAX_FILE_BYTES = 4 << 30
MAX_SAMPLES = 50_000_000
MAX_FRAMES = 5_000_000
MAX_STACKS = 5_000_000
MAX_DEPTH = 1024


class _Bad(Exception):
    """A validation failure; its message says what is wrong."""


def read_capture(path: str | Path) -> Capture:
    """Load and validate a capture file; raise CaptureError with one line on any problem."""
    path = str(path)
    raw = _read_bytes(path)
    if not raw.strip():
        raise CaptureError(f"{path}: not a readable capture (empty file)")
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        # Stopping at the very end, or inside a string that never closes, means the
        # document was cut short; anything else is not JSON at all.
        cut = e.pos >= len(raw.rstrip()) or e.msg.startswith("Unterminated string")
        what = "truncated" if cut else "not JSON"
        raise CaptureError(f"{path}: not a readable capture ({what}: {e.msg})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CaptureError(f"{path}: not a readable capture (not JSON: {e})") from None
    except RecursionError:
        raise CaptureError(f"{path}: not a readable capture (nested too deeply)") from None
    try:
        return _capture(doc)
    except _Bad as e:
        raise CaptureError(f"{path}: invalid capture: {e}") from None


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise CaptureError(f"{path}: no such capture file") from None
    except IsADirectoryError:
        raise CaptureError(f"{path}: is a directory, not a capture file") from None
    except OSError as e:
        raise CaptureError(f"{path}: cannot read: {e.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CaptureError(f"{path}: larger than {MAX_FILE_BYTES >> 30} GiB; not a capture")
    if data[:2] == b"\x1f\x8b":
        try:
            data = _gunzip(data)
        except (OSError, EOFError, zlib.error) as e:
            raise CaptureError(f"{path}: damaged gzip data ({e})") from None
    return data


def _gunzip(data: bytes) -> bytes:
    # Bounded: a small file must not inflate into unbounded memory.
    out = zlib.decompressobj(16 + zlib.MAX_WBITS)
    result = out.decompress(data, MAX_FILE_BYTES)
    if out.unconsumed_tail:
        raise OSError(f"decompresses to more than {MAX_FILE_BYTES >> 30} GiB")
    if not out.eof:
        raise EOFError("compressed data ends early (truncated file?)")
    return result


def _get(doc: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in doc:
        raise _Bad(f"missing field {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
        raise _Bad(f"field {key!r} has the wrong type")
    return value


def _capture(doc: Any) -> Capture:
    if not isinstance(doc, dict):
        raise _Bad("the top level is not an object")
    if doc.get("format") != FORMAT:
        raise _Bad(f"format is {doc.get('format')!r}, not {FORMAT!r}")
    version = doc.get("version")
    if version != VERSION:
        raise _Bad(f"version {version!r} is not supported (this livesym reads {VERSION})")
    objects = tuple(_object(o, i) for i, o in enumerate(_get(doc, "objects", list)))
    frames_raw = _get(doc, "frames", list)
    if len(frames_raw) > MAX_FRAMES:
        raise _Bad(f"more than {MAX_FRAMES} frames")
    frames = tuple(_frame(f, i, len(objects)) for i, f in enumerate(frames_raw))
    stacks = _stacks(_get(doc, "stacks", list), len(frames))
    samples = _samples(_get(doc, "samples", list), len(stacks))
    threads_raw = _get(doc, "threads", dict)
    threads: dict[int, str] = {}
    for tid, name in threads_raw.items():
        if not (isinstance(tid, str) and tid.isdigit() and isinstance(name, str)):
            raise _Bad("threads must map thread ids to names")
        threads[int(tid)] = name
    maps = _get(doc, "maps", list)
    if not all(isinstance(m, dict) for m in maps):
        raise _Bad("maps must be a list of objects")
    return Capture(
        target=_get(doc, "target", dict),
        host=_get(doc, "host", dict),
        sampler=_get(doc, "sampler", dict),
        session=_get(doc, "session", dict),
        maps=tuple(maps),
        objects=objects,
        frames=frames,
        stacks=stacks,
        threads=threads,
        samples=samples,
    )


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
    )


def _frame(f: Any, index: int, objects: int) -> FrameRecord:
    if not isinstance(f, dict):
        raise _Bad(f"frame {index} is not an object")
    where = f"frame {index}"
    if _get(f, "id", int) != index:
        raise _Bad(f"{where} has id {f.get('id')!r}")
    obj = _int_or_none(f.get("object"), f"{where} object")
    if obj is not None and not 0 <= obj < objects:
        raise _Bad(f"{where} refers to object {obj}, which does not exist")
    mapping = f.get("mapping")
    parsed_mapping = None
    if mapping is not None:
        if not (isinstance(mapping, list) and len(mapping) == 4 and isinstance(mapping[2], str)):
            raise _Bad(f"{where} mapping must be [start, end, perms, pgoff]")
        start, end, pgoff = (_hex_or_none(mapping[i], f"{where} mapping") for i in (0, 1, 3))
        parsed_mapping = (start or 0, end or 0, mapping[2], pgoff or 0)
    steps = f.get("steps", [])
    problems = f.get("problems", [])
    if not (isinstance(steps, list) and all(isinstance(s, str) for s in steps)):
        raise _Bad(f"{where} steps must be strings")
    if not (isinstance(problems, list) and all(isinstance(s, str) for s in problems)):
        raise _Bad(f"{where} problems must be strings")
    vma = _hex_or_none(f.get("vma"), f"{where} vma")
    if vma is None:
        raise _Bad(f"{where} has no vma")
    return FrameRecord(
        id=index,
        generation=_get(f, "generation", int),
        vma=vma,
        module=_str_or_none(f.get("module"), f"{where} module"),
        object=obj,
        mapping=parsed_mapping,
        base=_hex_or_none(f.get("base"), f"{where} base"),
        segment=_int_or_none(f.get("segment"), f"{where} segment"),
        elf_vaddr=_hex_or_none(f.get("elf_vaddr"), f"{where} elf_vaddr"),
        elf_offset=_hex_or_none(f.get("elf_offset"), f"{where} elf_offset"),
        symbol=_str_or_none(f.get("symbol"), f"{where} symbol"),
        demangled=_str_or_none(f.get("demangled"), f"{where} demangled"),
        symbol_vaddr=_hex_or_none(f.get("symbol_vaddr"), f"{where} symbol_vaddr"),
        symbol_size=_int_or_none(f.get("symbol_size"), f"{where} symbol_size"),
        symbol_offset=_int_or_none(f.get("symbol_offset"), f"{where} symbol_offset"),
        reason=_str_or_none(f.get("reason"), f"{where} reason"),
        detail=_str_or_none(f.get("detail"), f"{where} detail") or "",
        steps=tuple(steps),
        problems=tuple(problems),
    )


def _stacks(raw: list[Any], frames: int) -> tuple[tuple[int, ...], ...]:
    if len(raw) > MAX_STACKS:
        raise _Bad(f"more than {MAX_STACKS} stacks")
    out = []
    for i, stack in enumerate(raw):
        if not isinstance(stack, list) or len(stack) > MAX_DEPTH:
            raise _Bad(f"stack {i} is not a list of at most {MAX_DEPTH} frame ids")
        for fid in stack:
            if not isinstance(fid, int) or isinstance(fid, bool) or not 0 <= fid < frames:
                raise _Bad(f"stack {i} refers to frame {fid!r}, which does not exist")
        out.append(tuple(stack))
    return tuple(out)


def _samples(raw: list[Any], stacks: int) -> tuple[tuple[float, int, int, int], ...]:
    if len(raw) > MAX_SAMPLES:
        raise _Bad(f"more than {MAX_SAMPLES} samples")
    out = []
    for i, s in enumerate(raw):
        if not (isinstance(s, list) and len(s) == 4):
            raise _Bad(f"sample {i} is not [time, tid, stack, flags]")
        t, tid, stack, flags = s
        if not isinstance(t, int | float) or isinstance(t, bool):
            raise _Bad(f"sample {i} has a bad time")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (tid, stack, flags)):
            raise _Bad(f"sample {i} has a bad thread, stack or flags")
        if not 0 <= stack < stacks:
            raise _Bad(f"sample {i} refers to stack {stack}, which does not exist")
        out.append((float(t), tid, stack, flags))
    return tuple(out)
