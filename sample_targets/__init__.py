"""Small C programs with known behaviour: the ground truth for livesym's tests and demo.

The C sources sit next to this module (shipped as package data of
``livesym.sample_targets``).  Nothing is compiled at install time: :func:`build`
compiles a target with the machine's C compiler when it is first needed and
caches the result, keyed by the sources' bytes, the flags and the compiler.

    >>> from livesym.sample_targets import build, TARGETS
    >>> exe = build("spin")          # Path of the compiled program
    >>> TARGETS["spin"].hot_functions
    (('hot_alpha', 0.526), ...)

Every program prints exactly ``ready <pid>`` on stdout once it is fully set up,
then runs until killed (or for the number of seconds given as its first
argument).  See README.md in this directory for what each target is for.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "TARGETS",
    "BuildError",
    "TargetSpec",
    "TargetUnavailable",
    "build",
    "build_go",
    "cache_dir",
    "compiler",
    "source_dir",
]

_HERE = Path(__file__).resolve().parent

# Bump when the way targets are built changes in a way the hash cannot see.
_BUILD_SCHEME = "1"


@dataclass(frozen=True)
class TargetSpec:
    """How to build one sample target and what it is known to do."""

    name: str  # file name of the result: "spin", "libhot.so", ...
    sources: tuple[str, ...]  # file names in this package directory
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]  # after the sources; the compiler runs in the output dir
    kind: str  # "exe" or "lib"
    needs: tuple[str, ...] = ()  # targets (libraries) built first, into the same dir
    # Ground truth: (function, expected share of the process's on-CPU samples, 0..1),
    # counting a sample for a function when the function is on the sampled stack.
    hot_functions: tuple[tuple[str, float], ...] = ()
    description: str = ""


class BuildError(Exception):
    """A target could not be built.  The message is a single line."""


class TargetUnavailable(BuildError):
    """The target cannot be built on this machine (e.g. no static libc); tests skip."""


_COMMON = ("-std=gnu11", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-Wall", "-Wextra")
_LIB_CFLAGS = (*_COMMON, "-fPIC")
# Frame pointers in every function but the leaves (frameless.c).
_FRAMELESS_LEAF = (
    "-std=gnu11", "-O1", "-g", "-fno-omit-frame-pointer", "-momit-leaf-frame-pointer", "-Wall"
)  # fmt: skip
_NO_UNWIND_TABLES = (
    "-std=gnu11", "-O2", "-g", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables",
    "-Wall", "-pthread",
)  # fmt: skip
_FRAMELESS_HOT = (
    ("dispatch", 1.0), ("spin_for", 1.0), ("render", 0.7), ("blend", 0.6), ("parse", 0.3)
)  # fmt: skip

# Shares of on-CPU samples in spin: the duty cycles 50 %, 30 %, 15 % of a core,
# normalised by their sum (0.95).  hot_alpha hands half of its CPU budget to leaf_work.
_SPIN_HOT: tuple[tuple[str, float], ...] = (
    ("hot_alpha", round(50 / 95, 3)),
    ("hot_beta", round(30 / 95, 3)),
    ("hot_gamma", round(15 / 95, 3)),
    ("leaf_work", round(25 / 95, 3)),
)
_SPIN_DESC = (
    "3 worker threads alpha/beta/gamma in hot_alpha/hot_beta/hot_gamma, busy 50/30/15 % "
    "of every 10 ms (thread CPU time), so 52.6/31.6/15.8 % of samples; hot_alpha spends "
    "half of its CPU time in leaf_work (2-deep stack). Args: [SECONDS] [--threads N]."
)


def _lib(name: str, source: str, description: str) -> TargetSpec:
    # Shares of samples belong to the program using the library (see uselib, churn).
    return TargetSpec(
        name=name,
        sources=(source,),
        cflags=_LIB_CFLAGS,
        ldflags=("-shared", f"-Wl,-soname,{name}"),
        kind="lib",
        description=description,
    )


TARGETS: dict[str, TargetSpec] = {
    spec.name: spec
    for spec in (
        TargetSpec(
            name="spin",
            sources=("spin.c",),
            cflags=(*_COMMON, "-pthread"),
            ldflags=("-pthread",),
            kind="exe",
            hot_functions=_SPIN_HOT,
            description="PIE (ET_DYN with PT_INTERP). " + _SPIN_DESC,
        ),
        TargetSpec(
            name="spin-nopie",
            sources=("spin.c",),
            cflags=(*_COMMON, "-pthread", "-fno-pie"),
            ldflags=("-pthread", "-no-pie"),
            kind="exe",
            hot_functions=_SPIN_HOT,
            description="Non-PIE (ET_EXEC at 0x400000). " + _SPIN_DESC,
        ),
        TargetSpec(
            name="spin-static",
            sources=("spin.c",),
            cflags=(*_COMMON, "-pthread"),
            ldflags=("-pthread", "-static"),
            kind="exe",
            hot_functions=_SPIN_HOT,
            description="Static (ET_EXEC, no PT_INTERP, no shared libraries). " + _SPIN_DESC,
        ),
        TargetSpec(
            name="deep",
            sources=("deep.c",),
            # No frame pointers anywhere: only CFI finds the callers.
            cflags=("-std=gnu11", "-O2", "-g", "-fomit-frame-pointer", "-Wall", "-pthread"),
            ldflags=("-pthread",),
            kind="exe",
            description=(
                "Threads parked in pause() at the bottom of main/worker -> chain_a -> "
                "chain_b -> chain_c -> park, and one inside a signal handler, built -O2 "
                "-fomit-frame-pointer: stacks only "
                "call-frame information unwinds (the reference is gdb's backtrace)."
            ),
        ),
        TargetSpec(
            name="deep-debugframe",
            sources=("deep.c",),
            # No unwind tables: GCC puts the CFI in .debug_frame (what debug files keep).
            cflags=_NO_UNWIND_TABLES,
            ldflags=("-pthread",),
            kind="exe",
            description=(
                "deep built -fno-asynchronous-unwind-tables: its own functions have no "
                ".eh_frame entries, only .debug_frame ones (and stripped, only its debug "
                "file has them)."
            ),
        ),
        TargetSpec(
            name="recurse",
            sources=("recurse.c",),
            cflags=("-std=gnu11", "-O2", "-g", "-fomit-frame-pointer", "-Wall", "-pthread"),
            ldflags=("-pthread",),
            kind="exe",
            hot_functions=(("bottom", 1.0), ("descend", 1.0)),
            description=(
                "main -> descend, 2,000 frames deep (--depth N), -> bottom, which spins 2 ms "
                "of CPU; then up and down again. A stack of about 32 KiB (-O2 "
                "-fomit-frame-pointer): deeper than a 16 KiB copy; --thread: in a second thread. "
                "Args: [SECONDS] [--depth N] [--thread]."
            ),
        ),
        TargetSpec(
            name="pool",
            sources=("pool.c",),
            cflags=("-std=gnu11", "-O2", "-g", "-Wall", "-pthread"),
            ldflags=("-pthread",),
            kind="exe",
            hot_functions=(("pool_work", 0.9),),
            description=(
                "A thread pool: 1,000 threads (--threads N) each spinning 30 us (--busy-us) "
                "of its own CPU time in pool_work, then sleeping 50 ms (--period-ms): 60 % "
                "of a core in all, too little per thread for an event per thread to fire. "
                "--busy-us 1000 asks for 20 cores. Args: [SECONDS] [--threads N] "
                "[--busy-us US] [--period-ms MS]."
            ),
        ),
        TargetSpec(
            name="waits",
            sources=("waits.c",),
            # Built as distro code is (-O2, no frame pointers): call-frame information
            # finds the callers of the blocking calls.
            cflags=("-std=gnu11", "-O2", "-g", "-fomit-frame-pointer", "-Wall", "-pthread"),
            ldflags=("-pthread",),
            kind="exe",
            hot_functions=(("cpu_part", 1.0),),
            description=(
                "One thread (main) repeating a 40 ms cycle (--cycle-ms): 10 ms of CPU in "
                "cpu_part, 20 ms in nanosleep under sleep_part, 10 ms in a timed condition "
                "wait (futex) under wait_part: wall time 25/50/25 %, off-CPU 67/33 %. "
                "--busy N adds N threads spinning in busy_part (runnable but waiting for a "
                "CPU when they outnumber the cores); --times FILE: each part's wall time so "
                "far, written every 0.25 s. Args: [SECONDS] [--cycle-ms MS] [--busy N] "
                "[--times FILE]."
            ),
        ),
        TargetSpec(
            name="phases",
            sources=("phases.c",),
            cflags=("-std=gnu11", "-O2", "-g", "-fno-omit-frame-pointer", "-Wall"),
            ldflags=(),
            kind="exe",
            hot_functions=(("first_phase", 0.5), ("second_phase", 0.5)),
            description=(
                "first_phase burns the CPU for SECONDS of wall time, then second_phase for "
                "as long, then it exits: the ground truth of time ranges. Args: [SECONDS]."
            ),
        ),
        TargetSpec(
            name="mix",
            sources=("mix.c",),
            cflags=("-std=gnu11", "-O2", "-g", "-fno-omit-frame-pointer", "-Wall"),
            ldflags=(),
            kind="exe",
            hot_functions=(("first_part", 0.7), ("second_part", 0.3)),
            description=(
                "Repeats a 5-15 ms slice of its own CPU time: PERCENT % of it in first_part, "
                "the rest in second_part; two runs of one PERCENT are one workload, the "
                "ground truth of diffs. Args: [PERCENT] [SECONDS of its CPU time] (default "
                "70, 0: until killed)."
            ),
        ),
        TargetSpec(
            name="pingpong",
            sources=("pingpong.c",),
            cflags=("-std=gnu11", "-O2", "-g", "-fomit-frame-pointer", "-Wall", "-pthread"),
            ldflags=("-pthread",),
            kind="exe",
            description=(
                "Two threads passing a byte through two pipes, each blocking in read until "
                "the other writes: tens of thousands of context switches a second. Fixed "
                "work for off-CPU overhead. Args: [ROUND_TRIPS] [DELAY_MS]; prints "
                "'elapsed <s>' and exits."
            ),
        ),
        TargetSpec(
            name="lazybind",
            sources=("lazybind.c",),
            cflags=("-std=gnu11", "-O2", "-g", "-fomit-frame-pointer", "-fno-builtin", "-Wall"),
            ldflags=("-Wl,-z,lazy",),
            kind="exe",
            description=(
                "Run with LD_BIND_NOT=1: every call of labs through the PLT is resolved "
                "again by the dynamic loader (_dl_runtime_resolve_xsavec, _dl_fixup, "
                "do_lookup_x), so most of its time is in ld.so, under resolve_loop."
            ),
        ),
        TargetSpec(
            name="nocfi",
            sources=("nocfi.c",),
            cflags=("-std=gnu11", "-O2", "-g", "-fomit-frame-pointer", "-Wall"),
            ldflags=(),
            kind="exe",
            description=(
                "main -> outer -> count_down (assembly with no FDE, rbp its loop counter) "
                "and outer -> c_work (C): no unwinder can find count_down's caller."
            ),
        ),
        TargetSpec(
            name="clockloop",
            sources=("clockloop.c",),
            cflags=("-std=gnu11", "-O2", "-g", "-fomit-frame-pointer", "-Wall"),
            ldflags=(),
            kind="exe",
            description=(
                "One thread calling clock_gettime in a tight loop: its time is in the vdso "
                "(code and CFI only in memory) and the PLT (a CFA expression), built -O2 "
                "-fomit-frame-pointer."
            ),
        ),
        TargetSpec(
            name="frameless",
            sources=("frameless.c",),
            cflags=(*_FRAMELESS_LEAF,),
            ldflags=(),
            kind="exe",
            hot_functions=_FRAMELESS_HOT,
            description=(
                "One thread: dispatch -> parse (30 %) / render (70 %), each part of it through "
                "blend (60 % in all), every cycle spent in the frameless leaf spin_for. "
                "Frame pointers everywhere but the leaf: a frame-pointer walk skips the "
                "leaf's caller; call-frame information does not."
            ),
        ),
        TargetSpec(
            name="twoseg",
            sources=("twoseg.c",),
            cflags=_COMMON,
            ldflags=("-Wl,--section-start=.hot=0x801234",),
            kind="exe",
            hot_functions=(("hot_section_work", 0.5), ("text_work", 0.5)),
            description=(
                "PIE with two R+X PT_LOADs: .text, and .hot at 0x801234 whose p_offset is "
                "not page aligned (BOLT-like). Alternates 10 ms in hot_section_work (.hot) "
                "and 10 ms in text_work (.text)."
            ),
        ),
        _lib(
            "libhot.so",
            "libhot.c",
            "Shared library exporting hot_in_lib (busy loop) and lib_helper.",
        ),
        TargetSpec(
            name="uselib",
            sources=("uselib.c",),
            cflags=_COMMON,
            ldflags=("-L.", "-lhot", "-Wl,-rpath,$ORIGIN"),
            kind="exe",
            needs=("libhot.so",),
            hot_functions=(("hot_in_lib", 1.0),),
            description=(
                "PIE linked against libhot.so (DT_RUNPATH $ORIGIN); spends its time in "
                "hot_in_lib, calling lib_helper once per 10 ms."
            ),
        ),
        TargetSpec(
            name="libworker.so",
            sources=("libworker.c",),
            cflags=(*_LIB_CFLAGS, "-pthread"),
            ldflags=("-shared", "-Wl,-soname,libworker.so", "-pthread"),
            kind="lib",
            description=(
                "Shared library exporting start_worker, which starts a pthread spinning in "
                "worker_spin (static) that never runs Python: a C library's own thread."
            ),
        ),
        _lib(
            "libchurn_a.so",
            "churn_a.c",
            "Shared library exporting churn_a_work; dlopen()ed by churn.",
        ),
        _lib(
            "libchurn_b.so",
            "churn_b.c",
            "Shared library exporting churn_b_work; dlopen()ed by churn.",
        ),
        TargetSpec(
            name="crunch",
            sources=("crunch.c",),
            cflags=(*_COMMON, "-pthread"),
            ldflags=("-pthread",),
            kind="exe",
            hot_functions=(("crunch_work", 1.0),),
            description=(
                "Fixed CPU work for overhead measurements. Args: [THREADS] "
                "[MILLION_ITERATIONS_PER_THREAD] [DELAY_MS]; prints 'elapsed <s>' and exits."
            ),
        ),
        TargetSpec(
            name="churn",
            sources=("churn.c",),
            cflags=_COMMON,
            ldflags=("-ldl",),
            kind="exe",
            needs=("libchurn_a.so", "libchurn_b.so"),
            hot_functions=(("churn_a_work", 0.5), ("churn_b_work", 0.5)),
            description=(
                "Map churn: dlopen()s libchurn_a.so / libchurn_b.so alternately, runs its "
                "work function ~20 ms, dlclose()s it; libraries come and go."
            ),
        ),
        TargetSpec(
            name="jitmap",
            sources=("jitmap.c",),
            cflags=_COMMON,
            ldflags=(),
            kind="exe",
            # Its hot function, jit_alpha, is in no ELF file: only in its perf map.
            hot_functions=(),
            description=(
                "JIT code named only by /tmp/perf-<pid>.map: runs a copy of a leaf loop in an "
                "anonymous executable mapping, named jit_alpha in the perf map; SIGUSR1 adds "
                "jit_beta (the map grows; with --late-line MS its line comes MS after it runs). "
                "Removes its perf map on SIGTERM."
            ),
        ),
        TargetSpec(
            name="jitmap-static",
            sources=("jitmap.c",),
            cflags=_COMMON,
            ldflags=("-static",),
            kind="exe",
            hot_functions=(),
            description=(
                "jitmap linked statically (ET_EXEC, no shared libraries, one thread): runs "
                "in a chroot with nothing but itself and /tmp."
            ),
        ),
    )
}


def source_dir() -> Path:
    """The directory holding the C sources."""
    return _HERE


def cache_dir() -> Path:
    """``$LIVESYM_CACHE``, else ``$XDG_CACHE_HOME/livesym``, else ``~/.cache/livesym``."""
    explicit = os.environ.get("LIVESYM_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "livesym"
    return Path.home() / ".cache" / "livesym"


def compiler() -> str | None:
    """The C compiler command: ``$CC``, else ``cc``, else ``gcc`` (first word resolved).

    ``$CC`` may carry arguments (``"ccache gcc"``).  Returns None when ``$CC`` is set
    but not found, or when neither ``cc`` nor ``gcc`` is on PATH.
    """
    env_cc = os.environ.get("CC", "").strip()
    candidates = [env_cc] if env_cc else ["cc", "gcc"]
    for candidate in candidates:
        try:
            words = shlex.split(candidate)
        except ValueError:
            return None
        if not words:
            continue
        found = shutil.which(words[0])
        if found is not None:
            return shlex.join([found, *words[1:]])
    return None


def build(name: str, out_dir: Path | None = None) -> Path:
    """Build target ``name`` (and the libraries it needs) and return the built file's path.

    With ``out_dir`` the files go there; otherwise into
    ``cache_dir()/targets/<hash>/``.  Nothing is recompiled when the sources, flags
    and compiler are unchanged.  Concurrent builds are safe: each compiles to a
    temporary name in the target directory and renames it into place.

    Raises BuildError (TargetUnavailable when the machine lacks something the target
    needs, like a static libc) with a one-line message.
    """
    spec = _spec(name)
    cc = _compiler_or_raise(name)
    digest = _digest(spec, cc)
    directory = out_dir if out_dir is not None else cache_dir() / "targets" / digest[:16]
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot build {name}: cannot create {directory}: {exc.strerror}") from exc
    return _build_into(spec, cc, directory.resolve())


# Go programs (``*.go`` here), built with the machine's Go toolchain (Debian's golang-go).
GO_TARGETS = {"gobusy": "gobusy.go"}


def build_go(name: str, out_dir: Path, *, stripped: bool = False) -> Path:
    """Build Go target ``name`` into ``out_dir`` (``NAME``, or ``NAME-stripped`` with
    ``-ldflags="-s -w"``, as Go services ship: no symbol table, no DWARF) and return
    its path. Raises TargetUnavailable without a Go toolchain, BuildError when it fails."""
    source = GO_TARGETS.get(name)
    if source is None:
        raise BuildError(f"unknown Go sample target {name!r} (known: {', '.join(GO_TARGETS)})")
    go = shutil.which("go")
    if go is None:
        raise TargetUnavailable(f"cannot build {name}: no Go toolchain (apt-get install golang-go)")
    out = out_dir.resolve() / (f"{name}-stripped" if stripped else name)
    work = out_dir.resolve() / ".go"
    env = {**os.environ, "GOCACHE": str(work / "cache"), "GOPATH": str(work / "path"),
           "GOFLAGS": "", "CGO_ENABLED": "0", "GO111MODULE": "off", "HOME": str(work)}  # fmt: skip
    command = [go, "build", "-trimpath", "-o", str(out)]
    if stripped:
        command.append("-ldflags=-s -w")
    try:
        done = subprocess.run([*command, str(_HERE / source)], env=env, capture_output=True,
                              text=True, timeout=600, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"cannot build {name}: {exc}") from exc
    if done.returncode != 0:
        raise BuildError(f"cannot build {name}: {_first_error(done.stderr, 'go', done.returncode)}")
    return out


# --------------------------------------------------------------------------- internals


def _spec(name: str) -> TargetSpec:
    try:
        return TARGETS[name]
    except KeyError:
        known = ", ".join(sorted(TARGETS))
        raise BuildError(f"unknown sample target {name!r} (known: {known})") from None


def _compiler_or_raise(name: str) -> list[str]:
    cc = compiler()
    if cc is None:
        env_cc = os.environ.get("CC", "").strip()
        if env_cc:
            raise BuildError(
                f"cannot build {name}: $CC={env_cc!r} is not an executable on PATH; "
                "fix $CC or unset it and install gcc"
            )
        raise BuildError(
            f"cannot build {name}: no C compiler found ($CC, cc, gcc); install gcc "
            "(e.g. apt-get install gcc libc6-dev)"
        )
    return shlex.split(cc)


def _closure(spec: TargetSpec, seen: tuple[str, ...] = ()) -> list[TargetSpec]:
    """spec's needs (recursively, dependencies first), then spec itself."""
    if spec.name in seen:
        raise BuildError(f"cannot build {spec.name}: dependency cycle {' -> '.join(seen)}")
    order: list[TargetSpec] = []
    for dep in spec.needs:
        for item in _closure(_spec(dep), (*seen, spec.name)):
            if item not in order:
                order.append(item)
    order.append(spec)
    return order


def _digest(spec: TargetSpec, cc: list[str]) -> str:
    """Hash of everything that goes into building spec and its needs."""
    h = hashlib.sha256()

    def put(*parts: str | bytes) -> None:
        for part in parts:
            data = part.encode() if isinstance(part, str) else part
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)

    put(_BUILD_SCHEME, *cc)
    try:
        st = os.stat(cc[0])
        put(os.path.realpath(cc[0]), str(st.st_size), str(st.st_mtime_ns))
    except OSError:
        put("no-stat")
    # Headers may be included by any source.
    for header in sorted(_HERE.glob("*.h")):
        put(header.name, header.read_bytes())
    for item in _closure(spec):
        put(item.name, item.kind, *item.cflags, "|", *item.ldflags, "|", *item.needs)
        for source in item.sources:
            path = _HERE / source
            try:
                put(source, path.read_bytes())
            except OSError as exc:
                raise BuildError(
                    f"cannot build {spec.name}: source {path} unreadable ({exc.strerror}); "
                    "reinstall livesym"
                ) from exc
    return h.hexdigest()


def _build_into(spec: TargetSpec, cc: list[str], directory: Path) -> Path:
    for dep in spec.needs:
        _build_into(_spec(dep), cc, directory)
    output = directory / spec.name
    stamp = directory / f".{spec.name}.buildhash"
    digest = _digest(spec, cc)
    if output.exists() and _read(stamp) == digest:
        return output
    if "-static" in spec.ldflags:
        _check_static_libc(spec.name, cc)

    # A fresh name per build (not created beforehand: the linker makes the file with
    # the right mode); renamed into place only when complete.
    tmp = directory / f".{spec.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    sources = [str(_HERE / s) for s in spec.sources]
    argv = [*cc, *spec.cflags, "-o", str(tmp), *sources, *spec.ldflags]
    try:
        try:
            proc = subprocess.run(
                argv, cwd=directory, capture_output=True, text=True, errors="replace", check=False
            )
        except OSError as exc:
            raise BuildError(
                f"cannot build {spec.name}: cannot run {cc[0]}: {exc.strerror}; install gcc"
            ) from exc
        if proc.returncode != 0:
            raise BuildError(
                f"cannot build {spec.name}: {_first_error(proc.stderr, cc[0], proc.returncode)}"
                "; check that a working C compiler and libc headers are installed "
                "(apt-get install gcc libc6-dev)"
            )
        if not tmp.is_file() or tmp.stat().st_size == 0:
            raise BuildError(
                f"cannot build {spec.name}: {cc[0]} reported success but wrote no output; check $CC"
            )
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    _write_atomic(stamp, digest)
    return output


def _check_static_libc(name: str, cc: list[str]) -> None:
    try:
        proc = subprocess.run(
            [*cc, "-print-file-name=libc.a"], capture_output=True, text=True, check=False
        )
    except OSError:
        return  # the build itself will report the problem
    found = proc.stdout.strip()
    if proc.returncode == 0 and not (os.path.isabs(found) and os.path.exists(found)):
        raise TargetUnavailable(
            f"cannot build {name}: no static C library (libc.a) for {cc[0]}; "
            "install libc6-dev (Debian/Ubuntu) or glibc-static (Fedora)"
        )


_ERROR_LINE = re.compile(r"error|undefined reference|cannot find|not found|No such file")


def _first_error(stderr: str, cc: str, status: int) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if _ERROR_LINE.search(line):
            return line
    if lines:
        return lines[0]
    return f"{cc} exited with status {status} and printed nothing"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
