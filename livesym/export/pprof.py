"""pprof's profile.proto, gzipped: what go tool pprof, Pyroscope, Parca and Grafana read.

- ``sample_type`` is [samples/count, cpu/nanoseconds] (wall/nanoseconds when
  idle samples are counted), ``period`` one sampling interval in nanoseconds
  (1e9 / rate). Samples are aggregated per (stack, thread), with the thread's
  name and id, and its process's id and name, as labels (``thread``,
  ``thread_id``, ``pid``, ``process``): a back end can filter or group by them.
- A ``Mapping`` per mapping a frame fell in: its run-time range, ``file_offset``
  = pgoff, the path the process mapped, and the object's build-id; the main
  executable's first.
- A ``Location`` per distinct (mapping, run-time address, function, line): the
  address is the frame's run-time address with its mapping's start, limit and
  offset, as pprof expects for shared libraries. For a return address that is
  the address looked up (return address - 1), inside the call instruction,
  which the format allows.
- A ``Function`` per function as the profile counts it: ``name`` the demangled
  name, ``system_name`` the raw symbol, ``filename`` the source file for Python
  functions (native frames have none: livesym reads no DWARF; their file is
  the mapping's). An unresolved frame gets livesym's label, as every other view
  shows it: an unnamed function bounded by its FDE is ``libfoo.so @ 0x29c240``
  (each function apart, never one ``[libfoo.so]`` for the whole library), other
  code ``[reason] module``. Where its object has a build-id, its mapping's
  ``has_functions`` is false, so a back end that has the binary or its debug file
  symbolizes it again (pprof keeps the label where it finds no name).
"""

from __future__ import annotations

import gzip
from typing import Any

from livesym import __version__
from livesym.export.stacks import Processes, stack_counts
from livesym.records import KIND_PYTHON, UNKNOWN_FRAME, Capture, Frame, FrameRecord, TimeMode


def pprof(capture: Capture, *, mode: TimeMode = TimeMode.CPU) -> bytes:
    """The gzipped profile (deterministic: no timestamp in the gzip header)."""
    return gzip.compress(build_profile(capture, mode).SerializeToString(), mtime=0)


# The sample type of each time, as Pyroscope, Parca and go tool pprof name them.
_KINDS = {TimeMode.CPU: "cpu", TimeMode.WALL: "wall", TimeMode.OFF_CPU: "off_cpu"}


class _Strings:
    def __init__(self) -> None:
        self.table = [""]
        self._index = {"": 0}

    def __call__(self, text: str | None) -> int:
        if not text:
            return 0
        index = self._index.get(text)
        if index is None:
            index = self._index[text] = len(self.table)
            self.table.append(text)
        return index


def build_profile(capture: Capture, mode: TimeMode = TimeMode.CPU) -> Any:
    """The ``perftools.profiles.Profile`` message (protobuf is imported here, not before)."""
    from livesym.export.profile_proto import Profile

    profile = Profile()
    strings = _Strings()
    builder = _Builder(capture, profile, strings)
    rate = capture.rate_hz
    period = round(1e9 / rate) if rate else 0
    kind = _KINDS[mode]
    for name, unit in (("samples", "count"), (kind, "nanoseconds")):
        profile.sample_type.add(type=strings(name), unit=strings(unit))
    profile.period_type.type = strings(kind)
    profile.period_type.unit = strings("nanoseconds")
    profile.period = period
    profile.default_sample_type = strings(kind)
    duration = _duration(capture)
    if duration is not None:
        profile.duration_nanos = duration
    sampler = capture.sampler.get("name", "?")
    profile.comment.append(strings(f"livesym {__version__}, sampler {sampler} at {rate} Hz"))
    thread_key, tid_key = strings("thread"), strings("thread_id")
    pid_key, process_key = strings("pid"), strings("process")
    processes = Processes(capture)
    for (tid, sid), n in sorted(stack_counts(capture, mode).items()):
        sample = profile.sample.add()
        sample.location_id.extend(builder.stack(sid))
        sample.value.extend((n, n * period))
        thread = capture.threads.get(tid)
        if thread:
            sample.label.add(key=thread_key, str=strings(thread))
        sample.label.add(key=tid_key, num=tid)
        pid = processes.pid(tid)
        sample.label.add(key=pid_key, num=pid)
        name = processes.name(pid)
        if name:
            sample.label.add(key=process_key, str=strings(name))
    builder.finish()
    profile.string_table.extend(strings.table)
    return profile


def _duration(capture: Capture) -> int | None:
    start, end = capture.session.get("start"), capture.session.get("end")
    if isinstance(start, int | float) and isinstance(end, int | float) and end >= start:
        return round((end - start) * 1e9)
    return None


class _Builder:
    """Mappings, locations and functions, each made once, as samples refer to them."""

    def __init__(self, capture: Capture, profile: Any, strings: _Strings) -> None:
        self._capture = capture
        self._profile = profile
        self._strings = strings
        self._frames = [r.frame() for r in capture.frames]
        self._mappings: dict[tuple[object, ...], Any] = {}
        self._unresolved_in: set[int] = set()  # mapping ids with a location left to symbolize
        self._locations: dict[tuple[object, ...], int] = {}
        self._location_of: dict[int, int] = {}  # frame id -> location id
        self._functions: dict[Frame, int] = {}
        self._stacks: dict[int, list[int]] = {}
        self._add_mappings()

    def _add_mappings(self) -> None:
        # The main executable's mappings first: pprof takes mapping[0] as the main binary.
        exe = self._capture.target.get("exe")
        records = [r for r in self._capture.frames if r.mapping is not None]
        records.sort(key=lambda r: r.module != exe)
        for record in records:
            self._mapping_id(record)

    def _mapping_id(self, record: FrameRecord) -> int:
        assert record.mapping is not None
        key = (record.mapping, record.module, record.object)
        mapping = self._mappings.get(key)
        if mapping is None:
            start, end, _perms, pgoff = record.mapping
            mapping = self._profile.mapping.add(
                id=len(self._mappings) + 1,
                memory_start=start,
                memory_limit=end,
                file_offset=pgoff,
                filename=self._strings(record.module),
                build_id=self._strings(self._build_id(record)),
            )
            self._mappings[key] = mapping
        return int(mapping.id)

    def _build_id(self, record: FrameRecord) -> str | None:
        objects = self._capture.objects
        if record.object is not None and 0 <= record.object < len(objects):
            return objects[record.object].build_id
        return None

    def stack(self, sid: int) -> list[int]:
        """Location ids of a stack, leaf first (as pprof wants them)."""
        found = self._stacks.get(sid)
        if found is None:
            ids = self._capture.stacks[sid]
            if ids:
                found = [self._location(fid) for fid in ids]
            else:
                found = [self._placeholder_location(UNKNOWN_FRAME)]
            self._stacks[sid] = found
        return found

    def _location(self, fid: int) -> int:
        found = self._location_of.get(fid)
        if found is not None:
            return found
        record = self._capture.frames[fid]
        frame = self._frames[fid]
        mapping_id = self._mapping_id(record) if record.mapping is not None else 0
        address = record.vma if record.kind != KIND_PYTHON else 0
        line = record.line or 0
        if not frame.resolved and mapping_id != 0 and self._build_id(record) is not None:
            self._unresolved_in.add(mapping_id)  # a back end with the binary may name it
        function_id = self._function(frame, record.source_file)
        key = (mapping_id, address, function_id, line)
        location_id = self._locations.get(key)
        if location_id is None:
            location_id = self._locations[key] = len(self._locations) + 1
            location = self._profile.location.add(
                id=location_id, mapping_id=mapping_id, address=address
            )
            if function_id:
                location.line.add(function_id=function_id, line=line)
        self._location_of[fid] = location_id
        return location_id

    def _placeholder_location(self, frame: Frame) -> int:
        function_id = self._function(frame)
        key = (0, 0, function_id, 0)
        location_id = self._locations.get(key)
        if location_id is None:
            location_id = self._locations[key] = len(self._locations) + 1
            location = self._profile.location.add(id=location_id)
            location.line.add(function_id=function_id)
        return location_id

    def _function(self, frame: Frame, source_file: str | None = None) -> int:
        """The function's id; its filename is its source file (a Python frame's module,
        or the DWARF source file of the first native record seen with one)."""
        function_id = self._functions.get(frame)
        if function_id is None:
            function_id = self._functions[frame] = len(self._functions) + 1
            strings = self._strings
            self._profile.function.add(
                id=function_id,
                name=strings(frame.label),
                system_name=strings(frame.symbol or frame.label),
                filename=strings(frame.module if frame.kind == KIND_PYTHON else source_file),
            )
        elif source_file is not None:
            function = self._profile.function[function_id - 1]
            if not function.filename:
                function.filename = self._strings(source_file)
        return function_id

    def finish(self) -> None:
        for mapping in self._mappings.values():
            mapping.has_functions = int(mapping.id) not in self._unresolved_in
