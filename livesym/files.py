"""Writing a file whole, safely, in a directory others may write to.

livesym usually runs as root, in whatever directory the user stands in (/tmp
included). A temporary file with a fixed name (``FILE.tmp``) opened with a plain
``open`` follows a symlink that any local user planted there, and root's write
lands wherever it points. So the temporary file gets an unpredictable name and is
created with O_CREAT|O_EXCL|O_NOFOLLOW (``tempfile.mkstemp``) beside the
destination, then renamed over it: ``rename`` replaces a symlink standing at the
destination itself, never the file it points to. A reader never sees half a file.

Files are created 0600, as perf writes perf.data: a capture holds the target's
command line, its paths and its memory layout. (``chmod`` the finished file to
share it; a recording rewrites its file, and each rewrite is 0600 again.)
"""

from __future__ import annotations

import contextlib
import os
import tempfile

MODE = 0o600


def write_atomically(path: str, data: bytes, *, durable: bool = True) -> None:
    """Put ``data`` at ``path`` in one rename; ``durable``: on disk before the rename
    (a crash leaves the old file or the new one, never an empty one). Raises OSError."""
    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
