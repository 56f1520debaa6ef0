"""Who may look at a process, and what to tell a user who may not: one place.

"Run as root" is the usual remedy for a refusal, and the wrong one for a user who
already is root. Root is refused by what root does not override on its own: no
CAP_SYS_PTRACE (a container started without it), a user namespace whose root is
not the target's (livesym inside a container, the target outside), Yama's
ptrace_scope 3 (no attaching at all), a security module (AppArmor, SELinux), a
/proc mounted with hidepid. ``denied_remedy`` names the one that applies here.
"""

from __future__ import annotations

import os

CAP_SYS_PTRACE = 19
CAP_PERFMON = 38
CAP_SYS_ADMIN = 21
_FULL_UID_MAP = ("0", "0", "4294967295")


def read_sysctl(name: str) -> str | None:
    """``/proc/sys/<name>`` (e.g. ``kernel/perf_event_paranoid``), stripped; None where
    it cannot be read (not there, or not permitted)."""
    try:
        with open(f"/proc/sys/{name}") as f:
            return f.read(4096).strip()
    except OSError:
        return None


def ptrace_scope() -> int | None:
    """Yama's kernel.yama.ptrace_scope, or None without Yama (the classic rules)."""
    value = read_sysctl("kernel/yama/ptrace_scope")
    return int(value) if value is not None and value.isdigit() else None


def effective_caps(status_path: str = "/proc/self/status") -> int:
    """This process's effective capabilities (CapEff), 0 where unreadable."""
    try:
        with open(status_path, "rb") as f:
            for line in f.read(1 << 16).split(b"\n"):
                if line.startswith(b"CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def has_cap(cap: int, caps: int | None = None) -> bool:
    return bool((effective_caps() if caps is None else caps) >> cap & 1)


def in_user_namespace(uid_map_path: str = "/proc/self/uid_map") -> bool:
    """Whether livesym runs in a user namespace other than the initial one, where its
    root is not the host's root (a rootless or user-namespaced container)."""
    try:
        with open(uid_map_path) as f:
            lines = f.read(4096).split("\n")
    except OSError:
        return False
    return tuple(lines[0].split()) != _FULL_UID_MAP


def security_label(path: str = "/proc/self/attr/current") -> str | None:
    """livesym's own AppArmor profile or SELinux context, unless unconfined."""
    try:
        with open(path, "rb") as f:
            label = f.read(4096).rstrip(b"\0\n").decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not label or label.startswith("unconfined") or ":unconfined_t:" in label:
        return None
    return label


def denied_remedy(pid: int, *, attach: bool = False) -> str:
    """What to do about a refusal to read (or, ``attach``, to trace) process ``pid``,
    fitting who livesym runs as."""
    if os.geteuid() != 0:
        owner = _owner(pid)
        whose = f"the process's user ({owner})" if owner is not None else "the process's user"
        scope = ptrace_scope() if attach else None
        if scope is not None and scope >= 1:
            return (
                f"run as root (kernel.yama.ptrace_scope={scope} lets a user trace only its "
                "own children)"
            )
        return f"run as {whose} or as root"
    if attach and ptrace_scope() == 3:
        return (
            "kernel.yama.ptrace_scope=3 forbids ptrace even to root until reboot; "
            "use --sampler perf"
        )
    if not has_cap(CAP_SYS_PTRACE):
        return (
            "livesym runs as root without CAP_SYS_PTRACE (a container started without it?); "
            "run it with that capability (docker: --cap-add SYS_PTRACE) or on the host"
        )
    if in_user_namespace():
        return (
            "livesym's root is root of a user namespace (a container), not of the process's; "
            "run livesym on the host, or inside the process's own container"
        )
    label = security_label()
    if label is not None:
        return (
            f"a security module confines livesym ({label}); run it unconfined, or allow "
            "ptrace read access in the policy"
        )
    return (
        "even root is refused here: a security module (SELinux, AppArmor, Landlock) or the "
        "kernel's lockdown may deny it; check the kernel log (dmesg)"
    )


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
