"""What an owner keeps for other actors' replays: objects pinned until the receivers checkpoint.

A replayed actor re-executes its tasks since its last checkpoint, with the same arguments, so
whoever holds an argument of such a task must still have it then: the sender of an argument that
travelled beside its task, or the owner of a ref. Each such object is *pinned* for (receiver,
sender, counter) when its task is sent, or when the receiver fetches it for the task; a receiver
that checkpoints says which counters its checkpoint covers, and the pins up to them go. An object
is freed once it has no pin and no live ``ObjectRef`` in this process points at it.

Pinned bytes have a budget: past it, the oldest pinned objects are spilled to a local directory
and read back from there when a replay asks for them. Within it, a pinned object's shared segment
gets a pre-faulted spare (``objects/arena.py``), so that keeping objects costs later calls no page
faults.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

from actorrt.objects.store import ObjectStore
from actorrt.rpc import node_pb2
from actorrt.util.processes import process_alive

Pin = tuple[bytes, bytes, int]  # (receiver actor, sender, task counter)
SPILL_PREFIX = "actorrt-spill-"  # then the pid of the process that spills


def remove_stale_spill_dirs() -> None:
    """Remove the spill directories of processes that are gone (a SIGKILL leaves them behind)."""
    for path in Path(tempfile.gettempdir()).glob(f"{SPILL_PREFIX}*-*"):
        pid = path.name[len(SPILL_PREFIX):].partition("-")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


class Retention:
    def __init__(self, objects: ObjectStore, budget_bytes: int) -> None:
        self._objects = objects
        self.budget_bytes = budget_bytes
        self._pins: dict[bytes, set[Pin]] = {}  # object id -> what it is kept for
        self._by_receiver: dict[bytes, dict[Pin, set[bytes]]] = {}  # receiver -> pin -> object ids
        self._referenced: set[bytes] = set()  # owned objects some live ObjectRef here points at
        self._in_memory: OrderedDict[bytes, int] = OrderedDict()  # pinned, in memory, oldest first: size
        self._in_memory_bytes = 0  # their sum (pinning is on the submit path: no re-summing there)
        self._spilled: dict[bytes, int] = {}  # pinned or not, on disk: size
        self._spill_dir: Path | None = None
        self.released_bytes = 0
        self.pressure_checkpoints = 0  # asked of receivers because what is kept for them grew too large

    def referenced(self, object_id: bytes) -> None:
        """A live ``ObjectRef`` in this process points at ``object_id`` (a result it owns)."""
        self._referenced.add(object_id)

    def unreferenced(self, object_id: bytes) -> None:
        """The last ``ObjectRef`` here went away: free the object unless a replay may need it."""
        self._referenced.discard(object_id)
        if object_id not in self._pins:
            self._free(object_id)

    def pin(self, object_id: bytes, receiver: bytes, sender: bytes, counter: int) -> None:
        """Keep ``object_id`` until ``receiver``'s checkpoint covers task ``counter`` of ``sender``."""
        pin = (receiver, sender, counter)
        pins = self._pins.setdefault(object_id, set())
        if pin in pins:
            return
        pins.add(pin)
        self._by_receiver.setdefault(receiver, {}).setdefault(pin, set()).add(object_id)
        if object_id in self._objects:
            # Counted once its value is there (a result may still be on its way).
            self._objects.expect(object_id).add_done_callback(lambda _, oid=object_id: self._count(oid))

    def _count(self, object_id: bytes) -> None:
        if object_id in self._pins and object_id not in self._in_memory and object_id not in self._spilled:
            size = self._objects.size(object_id)
            if size is not None:
                self._in_memory[object_id] = size
                self._in_memory_bytes += size
                self._objects.kept_for_replays(object_id, self.budget_bytes)
                self._spill_past_budget()

    def release(self, receiver: bytes, covered: Mapping[bytes, int]) -> None:
        """``receiver`` checkpointed past ``covered[sender]`` for each sender: drop those pins."""
        pins = self._by_receiver.get(receiver)
        if not pins:
            return
        for pin in [p for p in pins if p[2] <= covered.get(p[1], 0)]:
            for object_id in pins.pop(pin):
                held = self._pins.get(object_id)
                if held is None:
                    continue
                held.discard(pin)
                if not held:
                    del self._pins[object_id]
                    if object_id in self._referenced:  # kept for its ref now, not as a pin
                        self._in_memory_bytes -= self._in_memory.pop(object_id, 0)
                    else:
                        self._free(object_id)
        if not pins:
            del self._by_receiver[receiver]

    def _free(self, object_id: bytes) -> None:
        size = self._in_memory.pop(object_id, None)
        if size is not None:
            self._in_memory_bytes -= size
        else:
            size = self._spilled.pop(object_id, None)
        if size is not None:
            self.released_bytes += size
        self._objects.release(object_id)

    def _spill_past_budget(self) -> None:
        while self._in_memory and self._in_memory_bytes > self.budget_bytes:
            object_id, size = self._in_memory.popitem(last=False)
            self._in_memory_bytes -= size
            if self._spill_dir is None:
                remove_stale_spill_dirs()
                self._spill_dir = Path(tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-"))
            if self._objects.spill(object_id, self._spill_dir / object_id.hex()):
                self._spilled[object_id] = size

    def kept_bytes(self) -> int:
        """What is kept for replays, in memory and spilled."""
        return self._in_memory_bytes + sum(self._spilled.values())

    def pinned_by_receiver(self) -> dict[bytes, int]:
        """Per receiver, the bytes kept (in memory or spilled) for its replay."""
        out = {}
        for receiver, pins in self._by_receiver.items():
            objects = set().union(*pins.values())
            out[receiver] = sum(self._in_memory.get(o, 0) + self._spilled.get(o, 0) for o in objects)
        return out

    def stats(self) -> node_pb2.ObjectsKept:
        return node_pb2.ObjectsKept(
            pinned_objects=len(self._in_memory), pinned_bytes=self._in_memory_bytes,
            spilled_objects=len(self._spilled), spilled_bytes=sum(self._spilled.values()),
            released_bytes=self.released_bytes, pressure_checkpoints=self.pressure_checkpoints,
        )

    def close(self) -> None:
        """Remove the spill directory (the process is going away)."""
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
