"""The lineage stash of one process (paper §4.2): recent task specs, until they are safe to drop.

A synchronous, in-memory structure with no I/O, so its rules are tested without sockets:

- ``add`` keeps the newest version of a task (Definition 4.1); the caller flushes what it returns.
- ``ack`` records that the store holds a version; ``TryEvict`` then drops a task once it (or a newer
  version) is committed and none of its dependencies is still stashed, cascading to dependents.
- ``lineage_for`` is ``GetUncommittedLineage`` for one destination: the stashed ancestors of a task
  that this destination has not been sent yet, each forwarded at most ``max_forwards`` times. A
  committed ancestor is only stashed while it leads to an uncommitted one, and it goes along: the
  receiver's own lineage walks must be able to pass through it.

Invariant (paper Invariant 2): for every task this process executed or submitted, its uncommitted
lineage is in this stash. Committed tasks stay while an ancestor is uncommitted, so the lineage
walk from any stashed task reaches every uncommitted ancestor.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from actorrt.rpc import common_pb2 as pb

GONE_REMEMBERED = 100_000


@dataclass
class _Entry:
    spec: pb.TaskSpec
    committed: int = -1  # highest version the store acknowledged
    forwards: int = 0  # how many times this task was forwarded as lineage
    sent_to: dict[str, int] = field(default_factory=dict)  # destination -> version sent there

    @property
    def is_committed(self) -> bool:
        return self.committed >= self.spec.version


class Stash:
    def __init__(self, max_forwards: int | None = None) -> None:
        if max_forwards is not None and max_forwards < 0:
            raise ValueError("max_forwards must be >= 0 or None (unlimited)")
        self.max_forwards = max_forwards
        self._entries: dict[bytes, _Entry] = {}
        self._dependents: dict[bytes, set[bytes]] = {}  # task id -> stashed tasks that depend on it
        self.evicted = 0
        self.forwarded_sizes: deque[int] = deque(maxlen=10_000)  # lineage sent per task, recent
        # Recently evicted tasks and the version committed then: lineage that comes back later
        # (a peer forwarding what it got from us) is known committed and must not be stashed again.
        self._gone: OrderedDict[bytes, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, task_id: bytes) -> bool:
        return task_id in self._entries

    def get(self, task_id: bytes) -> pb.TaskSpec | None:
        entry = self._entries.get(task_id)
        return entry.spec if entry is not None else None

    def specs(self) -> list[pb.TaskSpec]:
        return [e.spec for e in self._entries.values()]

    def is_committed(self, task_id: bytes) -> bool:
        entry = self._entries.get(task_id)
        return entry is not None and entry.is_committed

    def committed_version(self, task_id: bytes) -> int:
        """The newest version of ``task_id`` known to be in the store (-1: none known)."""
        entry = self._entries.get(task_id)
        return entry.committed if entry is not None else self._gone.get(task_id, -1)

    # ---- adding and acknowledging ---------------------------------------------------------------

    def add(self, spec: pb.TaskSpec, source: str | None = None) -> bool:
        """Stash ``spec`` unless a same-or-newer version is here or was committed; True if it was
        stored (flush it). ``source``, the process it came from, has it: it is never sent back."""
        entry = self._entries.get(spec.task_id)
        if entry is None and self._gone.get(spec.task_id, -1) >= spec.version:
            return False
        stored = self._store(entry, spec)
        if source is not None:  # it holds the version it sent, which may be older than ours
            self._holds(spec.task_id, source, spec.version)
        return stored

    def mark_sent(self, task_id: bytes, destination: str) -> None:
        """``destination`` holds ``task_id`` at its stashed version (it was sent there as a task)."""
        entry = self._entries.get(task_id)
        if entry is not None:
            self._holds(task_id, destination, entry.spec.version)

    def _holds(self, task_id: bytes, process: str, version: int) -> None:
        entry = self._entries.get(task_id)
        if entry is not None:
            entry.sent_to[process] = max(entry.sent_to.get(process, -1), version)

    def _store(self, entry: _Entry | None, spec: pb.TaskSpec) -> bool:
        if entry is not None:
            if entry.spec.version >= spec.version:
                return False
            # A newer version (e.g. its predecessor_id set by a nondeterministic receiver): the old
            # version's ack no longer commits it, and its dependencies may have changed.
            self._unlink(entry.spec)
            entry.spec = spec
            entry.sent_to.clear()
        else:
            self._entries[spec.task_id] = _Entry(spec)
        for dep in spec.dependencies:
            if dep:
                self._dependents.setdefault(dep, set()).add(spec.task_id)
        return True

    def _unlink(self, spec: pb.TaskSpec) -> None:
        for dep in spec.dependencies:
            waiting = self._dependents.get(dep)
            if waiting is not None:
                waiting.discard(spec.task_id)
                if not waiting:
                    del self._dependents[dep]

    def ack(self, task_id: bytes, version: int) -> list[bytes]:
        """The store holds ``version`` of ``task_id`` (or newer); returns the tasks evicted."""
        entry = self._entries.get(task_id)
        if entry is None:
            return []
        entry.committed = max(entry.committed, version)
        return self._try_evict(task_id)

    def _evictable(self, entry: _Entry) -> bool:
        return entry.is_committed and not any(d in self._entries for d in entry.spec.dependencies if d)

    def _try_evict(self, task_id: bytes) -> list[bytes]:
        evicted: list[bytes] = []
        todo = [task_id]
        while todo:
            tid = todo.pop()
            entry = self._entries.get(tid)
            if entry is None or not self._evictable(entry):
                continue
            del self._entries[tid]
            evicted.append(tid)
            self._gone[tid] = entry.committed
            if len(self._gone) > GONE_REMEMBERED:
                self._gone.popitem(last=False)
            self._unlink(entry.spec)
            todo.extend(self._dependents.get(tid, ()))
        self.evicted += len(evicted)
        return evicted

    # ---- lineage --------------------------------------------------------------------------------

    def uncommitted_lineage(self, spec: pb.TaskSpec) -> list[pb.TaskSpec]:
        """Every uncommitted stashed ancestor of ``spec`` (not ``spec`` itself)."""
        return [e.spec for e in self._walk(spec, None) if not e.is_committed]

    def lineage_for(self, spec: pb.TaskSpec, destination: str, include_self: bool = False) -> list[pb.TaskSpec]:
        """What to send along with ``spec`` to ``destination`` (``GetUncommittedLineage``).

        Skips ancestors ``destination`` already has at their current version (their own lineage
        went with them then) and ancestors forwarded ``max_forwards`` times; marks the rest sent.
        With ``include_self``, ``spec`` itself goes too if stashed and not there yet: a result
        travels back to its owner with the version of the task that produced it.
        """
        out: list[pb.TaskSpec] = []
        for entry in self._walk(spec, destination, include_self):
            if self.max_forwards is not None and entry.forwards >= self.max_forwards:
                continue
            entry.forwards += 1
            entry.sent_to[destination] = entry.spec.version
            out.append(entry.spec)
        if not include_self:
            self.forwarded_sizes.append(len(out))
        return out

    def _walk(self, spec: pb.TaskSpec, destination: str | None, include_self: bool = False) -> list[_Entry]:
        found: list[_Entry] = []
        seen: set[bytes] = set() if include_self else {spec.task_id}
        todo = [spec.task_id] if include_self else [d for d in spec.dependencies if d]
        while todo:
            tid = todo.pop()
            if tid in seen:
                continue
            seen.add(tid)
            entry = self._entries.get(tid)
            if entry is None:
                continue
            if destination is not None and entry.sent_to.get(destination, -1) >= entry.spec.version:
                continue  # sent before, with its lineage
            found.append(entry)
            todo.extend(d for d in entry.spec.dependencies if d)
        return found
