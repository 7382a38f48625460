"""Atomic file writes: a file the user asked for is replaced whole or left as it was, never half-written."""

from __future__ import annotations

import os
import tempfile
from typing import IO, Any, Callable


def write_atomically(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Write a file through a temporary file beside it and a rename.

    `write(f)` fills a temporary file in the target's directory (binary mode); the file is
    flushed and fsynced, renamed over `path` (`os.replace`, atomic on POSIX file systems) and
    the directory is fsynced so that the rename reaches the disk too. Until the rename an
    existing file at `path` is untouched; on any error the temporary file is removed.

    Args:
        path: the file to create or replace.
        write: called once with the open temporary file.

    Raises:
        OSError: the directory is missing or not writable, the disk is full, `path` is a
            directory, ... (after the temporary file is removed); and whatever `write` raises.
    """
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fchmod(f.fileno(), _mode_for(path))  # mkstemp makes 0600: the mode open() would give, or the old file's
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # the rename itself reaches the disk with the directory's entry
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - file systems without directory fsync
        pass


def _mode_for(path: str) -> int:
    """The permission bits of an existing `path`, else those `open(path, "w")` would give (0666 less the umask)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask: read from /proc on Linux (setting it to read it would race other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
