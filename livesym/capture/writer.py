"""Writing a capture whole: encode, then replace the file atomically; and the JSON of
each record, which the chunks a recording appends (``capture.chunks``) share.

The document goes to a temporary file of an unpredictable name in the same
directory, created 0600, and is renamed over FILE (``livesym.files``), so a
reader (or a crash) never meets a half-written capture and a planted symlink
redirects nothing.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from livesym.addr.kinds import hex_or_none
from livesym.capture.model import FORMAT, VERSION
from livesym.collector import collector_paused
from livesym.errors import FileError
from livesym.files import write_atomically
from livesym.records import (
    FrameRecord,
    GenerationRecord,
    MappingRecord,
    ObjectRecord,
    ProcessRecord,
    ProcessStat,
)


def frame_json(f: FrameRecord) -> dict[str, object]:
    return {
        "id": f.id,
        "generation": f.generation,
        "vma": hex(f.vma),
        "module": f.module,
        "object": f.object,
        "mapping": (
            [f"{f.mapping[0]:x}", f"{f.mapping[1]:x}", f.mapping[2], f"{f.mapping[3]:x}"]
            if f.mapping
            else None
        ),
        "base": hex_or_none(f.base),
        "segment": f.segment,
        "elf_vaddr": hex_or_none(f.elf_vaddr),
        "elf_offset": hex_or_none(f.elf_offset),
        "symbol": f.symbol,
        "demangled": f.demangled,
        "symbol_vaddr": hex_or_none(f.symbol_vaddr),
        "symbol_size": f.symbol_size,
        "symbol_offset": f.symbol_offset,
        "reason": f.reason.value if f.reason else None,
        "detail": f.detail,
        "steps": list(f.steps),
        "problems": list(f.problems),
        "kind": f.kind,
        "line": f.line,
        "source_file": f.source_file,
    }


def object_json(o: ObjectRecord) -> dict[str, object]:
    return {
        "id": o.id,
        "path": o.path,
        "build_id": o.build_id,
        "e_type": o.e_type,
        "elf_class": o.elf_class,
        "machine": o.machine,
        "segments": list(o.segments),
        "symbol_source": o.symbol_source,
    }


def mapping_json(m: MappingRecord) -> list[object]:
    """``[start, end, perms, pgoff, dev, inode, path, deleted, facts]``; facts only as known."""
    facts: dict[str, object] = {}
    if m.object is not None:
        facts["object"] = m.object
    if m.base is not None:
        facts["base"] = hex(m.base)
    for name, value in (
        ("base_formula", m.base_formula),
        ("e_type", m.e_type),
        ("build_id", m.build_id),
        ("symbol_source", m.symbol_source),
    ):
        if value is not None:
            facts[name] = value
    if m.problems:
        facts["problems"] = list(m.problems)
    return [
        f"{m.start:x}", f"{m.end:x}", m.perms, f"{m.pgoff:x}", m.dev, m.inode, m.path,
        m.deleted, facts,
    ]  # fmt: skip


def generation_json(g: GenerationRecord) -> dict[str, object]:
    return {
        "generation": g.number,
        "pid": g.pid,
        "time": round(g.time, 6),
        "entries": [mapping_json(m) for m in g.mappings],
    }


def process_json(p: ProcessRecord) -> dict[str, object]:
    return {
        "pid": p.pid,
        "name": p.name,
        "argv": list(p.argv),
        "parent": p.parent,
        "started": round(p.started, 6),
        **({} if p.ended is None else {"ended": round(p.ended, 6)}),
    }


def document(
    *,
    created: str,
    version: str,
    target: dict[str, object],
    host: dict[str, object],
    sampler: dict[str, object],
    session: dict[str, object],
    maps: list[GenerationRecord],
    objects: list[ObjectRecord],
    frames: list[FrameRecord],
    stacks: list[tuple[int, ...]],
    threads: dict[int, str],
    samples: list[list[float | int]] | orjson.Fragment,
    process: list[ProcessStat],
    processes: list[ProcessRecord],
    thread_pids: dict[int, int],
) -> dict[str, object]:
    """The capture document; ``samples`` as rows, or already encoded (``SampleRows``)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "created": created,
        "livesym": version,
        "target": target,
        "host": host,
        "sampler": sampler,
        "session": session,
        "maps": [generation_json(g) for g in maps],
        "objects": [object_json(o) for o in objects],
        "frames": [frame_json(f) for f in frames],
        "stacks": [list(s) for s in stacks],
        "threads": {str(tid): name for tid, name in threads.items()},
        "processes": [process_json(p) for p in processes],
        "thread_pids": {str(tid): pid for tid, pid in thread_pids.items()},
        "samples": (
            samples
            if isinstance(samples, orjson.Fragment)
            else [[round(row[0], 6), *row[1:]] for row in samples]
        ),
        "process": [[round(p.time, 3), round(p.cpu_pct, 1), p.rss, p.threads] for p in process],
    }


def sample_row(when: float, tid: int, stack: int, flags: int, weight: int) -> list[float | int]:
    """One sample as a capture's row: its weight only where it is not 1 (an on-CPU
    sample's), so captures without off-CPU time are as they were."""
    if weight == 1:
        return [when, tid, stack, flags]
    return [when, tid, stack, flags, weight]


def write_capture(path: str | Path, doc: dict[str, object]) -> None:
    """Write ``doc`` to ``path`` atomically (gzip when the name ends in .gz)."""
    path = str(path)
    with collector_paused():
        data = orjson.dumps(doc)
    if path.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    try:
        write_atomically(path, data)
    except OSError as e:
        raise FileError(
            f"cannot write the capture {path}: {e.strerror}; "
            "choose a writable directory with space left (-o)"
        ) from None
