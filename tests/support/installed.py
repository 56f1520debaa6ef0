"""livesym as a user installs it: a wheel built from this source tree, installed (not
editable) into a fresh virtual environment that every user can read.

An editable install runs the source tree; a wheel holds only what pyproject.toml
packs. A package left out of it (livesym.engine once was) breaks every command of a
regular install while every test of an editable one passes, so the smoke tests run
this install, as root and as an unprivileged user.

The environment lives under a fresh 0755 directory of the system's temporary folder
(never the clone's, which may sit under a 0700 home), and its interpreter is the
distribution's ``/usr/bin/python3`` when that is new enough: the one an unprivileged
user can run (a pyenv interpreter under /root is not), and the one ``pipx`` or a
user's own venv would use. The wheel's dependencies come from the package index, as
they do for a user; pip's cache makes every install after the first quick.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path("/usr/bin/python3")
INSTALL_TIMEOUT = 600  # seconds for building the wheel and installing it with its dependencies


@dataclass(frozen=True)
class Installed:
    """A fresh environment holding livesym installed from its wheel."""

    root: Path  # the world-readable folder holding the environment
    venv: Path
    wheel: Path

    @property
    def livesym(self) -> Path:
        return self.venv / "bin" / "livesym"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


class InstallFailed(Exception):
    """The wheel could not be built or installed; the message says which step, and why."""


def interpreter() -> Path:
    """The interpreter for the environment: the system's Python 3.11+ (runnable by every
    user), else this one."""
    if SYSTEM_PYTHON.exists():
        done = subprocess.run(
            [str(SYSTEM_PYTHON), "-c", "import sys, venv; print(sys.version_info >= (3, 11))"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        if done.stdout.strip() == "True":
            return SYSTEM_PYTHON
    return Path(sys.executable)


def _run(step: str, argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise InstallFailed(f"{step} failed ({done.returncode}): {' / '.join(tail)}")


def install() -> Installed:
    """Build the wheel from SOURCE and install it into a fresh environment."""
    root = Path(tempfile.mkdtemp(prefix="livesym-wheel-"))
    os.chmod(root, 0o755)
    wheels = root / "dist"
    try:
        _run("pip wheel", [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "-w", str(wheels), str(SOURCE)])  # fmt: skip
        (wheel,) = wheels.glob("livesym-*.whl")
        venv = root / "venv"
        _run("venv", [str(interpreter()), "-m", "venv", str(venv)])
        _run("pip install", [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                             "--disable-pip-version-check", str(wheel)])  # fmt: skip
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True, timeout=60)
    return Installed(root, venv, wheel)


def source_packages() -> set[str]:
    """Every package of the source tree's livesym/ (a folder with __init__.py, the
    sample_targets symlink followed), dotted."""
    top = SOURCE / "livesym"
    found = set()
    for folder, _, files in os.walk(top, followlinks=True):
        if "__init__.py" in files:
            relative = Path(folder).relative_to(top)
            found.add(".".join(("livesym", *relative.parts)))
    return found
