"""Actor checkpoints: state snapshots in files, and the lineage they make collectable.

A checkpoint is taken between two tasks of an actor (on ``actorrt.checkpoint(handles)``, or every
N tasks) and written atomically: a reader finds the previous file or the new one, never a torn
one. Recovery restores the newest checkpoint and replays only the tasks after it, so the store
can forget the tasks a checkpoint covers.

An actor class may define ``checkpoint(self) -> object`` and ``restore(self, state)``; otherwise
the whole instance is pickled with cloudpickle.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from actorrt.lineage import ids
from actorrt.rpc import checkpoint_pb2
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling
from actorrt.util.files import write_atomically

# Files kept per actor: the newest, and the one before it (its pointer in the store may lag).
FILES_KEPT = 2


def actor_directory(directory: str | Path, actor_id: bytes) -> Path:
    return Path(directory) / actor_id.hex()


def checkpoint_path(directory: str | Path, actor_id: bytes, seq: int, writer: str) -> Path:
    """Where checkpoint ``seq`` of ``actor_id`` goes, as written by node incarnation ``writer``:
    a replaced incarnation that resumes mid-checkpoint cannot overwrite its successor's file."""
    return actor_directory(directory, actor_id) / f"{seq:010d}-{writer}.ckpt"


def writer_slot(path: str | Path) -> int:
    """The node slot whose process wrote checkpoint file ``path`` (``checkpoint_path``'s name)."""
    return int(Path(path).name.split("-", 1)[1].split(".", 1)[0])


def write_checkpoint(path: Path, checkpoint: checkpoint_pb2.ActorCheckpoint) -> None:
    write_atomically(path, checkpoint.SerializeToString())


def drop_older(path: Path) -> None:
    """Drop the files of ``path``'s actor older than the ``FILES_KEPT`` newest (once the store
    points at ``path``: a process whose pointer write is refused must delete nothing), and the
    marks of what it took since those."""
    files = sorted(path.parent.glob("*.ckpt"))
    for old in files[:-FILES_KEPT]:
        if old != path:
            old.unlink(missing_ok=True)
    oldest = files[-FILES_KEPT:][0].name.split("-", 1)[0] if files else ""
    for mark in path.parent.glob(f"*{SINCE}*"):
        if mark.name.split(".", 1)[0] < oldest:
            mark.unlink(missing_ok=True)


# What an actor took since its checkpoint ``seq`` (``ft="checkpoint"``, a deterministic actor):
# ``<seq>.since-from-<sender hex>`` for its first sender's calls, ``<seq>.since-more`` once it took
# another sender's or called an actor. A rollback round reads them (``rollback_plan``).
SINCE = ".since-"
FROM, MORE = "from-", "more"  # (what a mark says: its first sender's calls; more than those)


def mark_since(directory: str | Path, actor_id: bytes, seq: int, what: str) -> None:
    """Mark, durably before it has any effect, that ``actor_id`` did ``what`` since checkpoint ``seq``."""
    path = actor_directory(directory, actor_id) / f"{seq:010d}{SINCE}{what}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def marks_since(directory: str | Path, actor_id: bytes, seq: int) -> set[str]:
    """What ``actor_id`` marked since checkpoint ``seq``."""
    return {p.name.split(SINCE, 1)[1] for p in actor_directory(directory, actor_id).glob(f"{seq:010d}{SINCE}*")}


def read_checkpoint(path: str | Path) -> checkpoint_pb2.ActorCheckpoint:
    return checkpoint_pb2.ActorCheckpoint.FromString(Path(path).read_bytes())


def write_manifest(directory: str | Path, taken: list[dict[str, Any]]) -> dict[str, Any]:
    """Record a global checkpoint (``actorrt.checkpoint``): what each actor's barrier task
    returned, in ``<directory>/global/<id>.json``, written last and atomically."""
    global_dir = Path(directory) / "global"
    global_dir.mkdir(parents=True, exist_ok=True)
    number = 1 + max((int(p.stem) for p in global_dir.glob("*.json") if p.stem.isdigit()), default=0)
    manifest = {"id": number, "time": time.time(),
                "actors": {t["actor_id"]: {"seq": t["seq"], "path": t["path"]} for t in taken}}
    write_atomically(global_dir / f"{number:010d}.json", json.dumps(manifest, indent=1).encode())
    return manifest


def latest_manifest(directory: str | Path) -> dict[str, Any] | None:
    """The newest global checkpoint in ``directory``, or None."""
    found = _manifests(directory)
    return json.loads(found[-1].read_text()) if found else None


def manifest(directory: str | Path, number: int) -> dict[str, Any] | None:
    """Global checkpoint ``number`` in ``directory``, or None."""
    path = Path(directory) / "global" / f"{number:010d}.json"
    return json.loads(path.read_text()) if path.exists() else None


def latest_restorable(directory: str | Path) -> dict[str, Any] | None:
    """The newest global checkpoint whose every file is still there (an actor keeps its two
    newest: a global checkpoint under way may have dropped the file the last complete one names)."""
    for path in reversed(_manifests(directory)):
        found = json.loads(path.read_text())
        if all(Path(entry["path"]).exists() for entry in found["actors"].values()):
            return found
    return None


def _manifests(directory: str | Path) -> list[Path]:
    return sorted(p for p in (Path(directory) / "global").glob("*.json") if p.stem.isdigit())


def snapshot_state(instance: Any) -> bytes:
    """The actor's state: what its ``checkpoint()`` returns, else the instance itself."""
    hook = getattr(instance, "checkpoint", None)
    if callable(hook) and callable(getattr(instance, "restore", None)):
        return pickling.dumps(("hook", hook()))
    return pickling.dumps(("instance", instance))


def restore_state(creation: pb.ActorCreation, state: bytes) -> Any:
    """A new instance of the actor with ``state`` (its constructor does not run again)."""
    kind, value = pickling.loads(state)
    if kind == "instance":
        return value
    cls = pickling.loads(creation.class_blob)
    instance = cls.__new__(cls)
    instance.restore(value)
    return instance


def covered_tasks(actor_id: bytes, collected: dict[bytes, int], cut: dict[bytes, int]) -> list[bytes]:
    """The IDs of the tasks sent to ``actor_id`` after ``collected`` and up to ``cut`` (per sender
    counters): task IDs are recomputable, so the collector needs no read of the store."""
    return [
        ids.task_id(actor_id, sender, counter)
        for sender, last in cut.items()
        for counter in range(collected.get(sender, 0) + 1, last + 1)
    ]


def checkpoint_files(directory: str | Path, actor_id: bytes) -> list[dict[str, Any]]:
    """The checkpoint files kept of ``actor_id``, newest first: their number, the node slot that
    wrote each, its size and when it was written (for people: the dashboard)."""
    out = []
    for path in sorted(actor_directory(directory, actor_id).glob("*.ckpt"), reverse=True):
        try:
            stat = path.stat()
        except FileNotFoundError:  # dropped meanwhile
            continue
        out.append({"seq": int(path.name.split("-", 1)[0]), "slot": writer_slot(path), "bytes": stat.st_size,
                    "written": stat.st_mtime})
    return out
