"""Durable file writes: a crash leaves the old content or the new, never a torn file.

Both write the bytes to a hidden temporary file beside the target and fsync it, then put it in
place with one atomic directory operation, and fsync the directory so that survives a crash too.
The temporary file's name is fixed per target: a writer that crashed half-way leaves it, and the
same write, replayed, reuses and removes it.
"""

from __future__ import annotations

import os
from pathlib import Path

from actorrt.exceptions import SinkConflictError


def _temporary(path: Path, data: bytes, mode: int = 0o666) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)  # created anew below, with ``mode``
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Replace ``path`` with ``data`` (rename over it); a new file gets ``mode`` (less the umask)."""
    os.replace(_temporary(path, data, mode), path)
    _sync_directory(path.parent)


def write_once(path: Path, data: bytes) -> bool:
    """Create ``path`` with ``data`` unless it exists; True if this call created it.

    An existing file must hold exactly ``data`` (a replayed write): anything else raises
    SinkConflictError and leaves the file as it was.
    """
    tmp = _temporary(path, data)
    try:
        os.link(tmp, path)  # atomic create-if-absent: never replaces what a reader may have seen
    except FileExistsError:
        if path.read_bytes() != data:
            raise SinkConflictError(f"{path} exists with other content than this write") from None
        return False
    finally:
        tmp.unlink()
    _sync_directory(path.parent)
    return True
