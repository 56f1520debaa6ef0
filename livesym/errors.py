"""Errors a user can see, each with the exit code the CLI returns for it.

Every message is one line that says what went wrong and what to do about it;
the CLI prints it as ``livesym: <message>`` and exits with ``exit_code``.
"""

from __future__ import annotations

# Exit codes, documented in README.md ("Exit codes").
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_TARGET = 3
EXIT_FILE = 4
EXIT_CAPTURE = 5
EXIT_DEMO = 6  # demo: the bundled target could not be built or started
EXIT_CANNOT_RUN = 126  # -- CMD: the command was found but could not be run (as a shell says)
EXIT_NOT_FOUND = 127  # -- CMD: no such command
EXIT_HANGUP = 129  # the terminal went away (SIGHUP): the session was stopped and kept
EXIT_INTERRUPTED = 130


class LivesymError(Exception):
    """A failure to report to the user in one line, with a remedy."""

    exit_code = EXIT_FAILURE


class UsageError(LivesymError):
    """The command line asks for something that cannot be done as said."""

    exit_code = EXIT_USAGE


class TargetError(LivesymError):
    """The target process does not exist or cannot be inspected."""

    exit_code = EXIT_TARGET


class FileError(LivesymError):
    """A file cannot be opened or read."""

    exit_code = EXIT_FILE


class ElfFormatError(FileError):
    """A file is not an ELF file or is damaged beyond what can be read."""


class NotElfError(ElfFormatError):
    """A file that is not ELF at all (data files are mapped too; that is no defect)."""


class CaptureError(LivesymError):
    """A capture file is missing, corrupt or of an unknown version."""

    exit_code = EXIT_CAPTURE


class LaunchError(LivesymError):
    """A command to launch (``-- CMD``) could not be started; exit as a shell would."""

    def __init__(self, message: str, exit_code: int = EXIT_CANNOT_RUN) -> None:
        super().__init__(message)
        self.exit_code = exit_code
