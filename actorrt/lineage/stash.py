"""The lineage stash of one process (paper §4.2): recent task specs, until they are safe to drop.

A synchronous, in-memory structure with no I/O, so its rules are tested without sockets:

- ``add`` keeps the newest version of a task (Definition 4.1); the caller flushes what it returns.
- ``ack`` records that the store holds a version; ``TryEvict`` then drops a task once it (or a newer
  version) is committed and no stashed ancestor of it is uncommitted, cascading to dependents.
- ``committed_upto`` records a channel's commit watermark (announced by the receiver): every task
  of that sender to that receiver up to a counter is committed at its final version.
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

from actorrt.rpc import common_pb2 as pb

GONE_REMEMBERED = 100_000


Channel = tuple[bytes, bytes]  # (receiver, sender): the tasks of a sender to a receiver, by counter


class _Entry:
    """A stashed spec and what the stash reads of it, read once: every protobuf field read
    allocates, and walks and evictions read the same fields again and again."""

    __slots__ = ("spec", "task_id", "version", "deps", "channel", "counter", "committed", "forwards", "sent_to",
                 "blocked_by")

    def __init__(self, spec: pb.TaskSpec) -> None:
        self.task_id: bytes = spec.task_id
        self.channel: Channel = (spec.receiver, spec.sender)
        self.counter: int = spec.task_counter
        self.committed = -1  # highest version the store acknowledged
        self.forwards = 0  # how many times this task was forwarded as lineage
        self.sent_to: dict[str, int] = {}  # destination -> version sent there
        self.blocked_by = b""  # an uncommitted ancestor found last time (checked again first)
        self.take(spec)

    def take(self, spec: pb.TaskSpec) -> None:
        """Hold ``spec``, a version of this task (a newer one may change its dependencies)."""
        self.spec = spec
        self.version: int = spec.version
        self.deps: tuple[bytes, ...] = tuple(d for d in spec.dependencies if d)


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
        # Per channel, the counter up to which its receiver announced every task committed at its
        # final version, and the stashed tasks of the channel by counter (to apply the next one).
        self._upto: dict[Channel, int] = {}
        self._by_channel: dict[Channel, dict[int, bytes]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, task_id: bytes) -> bool:
        return task_id in self._entries

    def get(self, task_id: bytes) -> pb.TaskSpec | None:
        entry = self._entries.get(task_id)
        return entry.spec if entry is not None else None

    def specs(self) -> list[pb.TaskSpec]:
        return [e.spec for e in self._entries.values()]

    def uncommitted(self) -> list[pb.TaskSpec]:
        return [e.spec for e in self._entries.values() if e.committed < e.version]

    def is_committed(self, task_id: bytes) -> bool:
        entry = self._entries.get(task_id)
        return entry is not None and entry.committed >= entry.version

    def committed_version(self, task_id: bytes) -> int:
        """The newest version of ``task_id`` known to be in the store (-1: none known)."""
        entry = self._entries.get(task_id)
        return entry.committed if entry is not None else self._gone.get(task_id, -1)

    # ---- adding and acknowledging ---------------------------------------------------------------

    def add(self, spec: pb.TaskSpec, source: str | None = None) -> bool:
        """Stash ``spec`` unless a same-or-newer version is here or was committed; True if it was
        stored (flush it). ``source``, the process it came from, has it: it is never sent back."""
        task_id, version = spec.task_id, spec.version
        entry = self._entries.get(task_id)
        if entry is None:
            if self._gone.get(task_id, -1) >= version or (self._upto and self.marked(spec)):
                return False
            entry = self._entries[task_id] = _Entry(spec)
            self._by_channel.setdefault(entry.channel, {})[entry.counter] = task_id
            self._link(entry)
            stored = True
        elif entry.version < version:
            # A newer version (e.g. its predecessor_id set by a nondeterministic receiver): the old
            # version's ack no longer commits it, and its dependencies may have changed.
            self._unlink(entry)
            entry.take(spec)
            entry.sent_to.clear()
            self._link(entry)
            stored = True
        else:
            stored = False
        if source is not None:  # it holds the version it sent, which may be older than ours
            sent = entry.sent_to
            if sent.get(source, -1) < version:
                sent[source] = version
        return stored

    def mark_sent(self, task_id: bytes, destination: str) -> None:
        """``destination`` holds ``task_id`` at its stashed version (it was sent there as a task)."""
        entry = self._entries.get(task_id)
        if entry is not None and entry.sent_to.get(destination, -1) < entry.version:
            entry.sent_to[destination] = entry.version

    def _link(self, entry: _Entry) -> None:
        for dep in entry.deps:
            waiting = self._dependents.get(dep)
            if waiting is None:
                self._dependents[dep] = {entry.task_id}
            else:
                waiting.add(entry.task_id)

    def _unlink(self, entry: _Entry) -> None:
        for dep in entry.deps:
            waiting = self._dependents.get(dep)
            if waiting is not None:
                waiting.discard(entry.task_id)
                if not waiting:
                    del self._dependents[dep]

    def ack(self, task_id: bytes, version: int) -> list[bytes]:
        """The store holds ``version`` of ``task_id`` (or newer); returns the tasks evicted."""
        entry = self._entries.get(task_id)
        if entry is None:
            return []
        if version > entry.committed:
            entry.committed = version
        return self._try_evict(entry) if entry.committed >= entry.version else []

    def marked(self, spec: pb.TaskSpec) -> bool:
        """Whether a commit mark of ``spec``'s channel covers it (committed at its final version)."""
        return spec.task_counter <= self._upto.get((spec.receiver, spec.sender), -1)

    def covered(self, receiver: bytes, covered: dict[bytes, int]) -> list[tuple[bytes, int]]:
        """The uncommitted tasks of ``receiver`` here that a checkpoint of it covers (per sender,
        up to a counter), with their versions: found through their channels, not the whole stash."""
        found = []
        for sender, upto in covered.items():
            for counter, task_id in self._by_channel.get((receiver, sender), {}).items():
                entry = self._entries.get(task_id)
                if counter <= upto and entry is not None and entry.committed < entry.version:
                    found.append((task_id, entry.version))
        return found

    def committed_upto(self, receiver: bytes, sender: bytes, counter: int) -> list[bytes]:
        """The receiver says every task ``sender`` sent it up to ``counter`` is committed at its
        final version (it ran them, and the store holds what they ran as); returns the evicted."""
        channel = (receiver, sender)
        if counter <= self._upto.get(channel, 0):
            return []
        self._upto[channel] = counter
        evicted: list[bytes] = []
        for c, task_id in sorted(self._by_channel.get(channel, {}).items()):
            if c > counter:
                break
            entry = self._entries.get(task_id)
            if entry is not None:  # (evicted meanwhile, as a dependent of an earlier one)
                entry.committed = max(entry.committed, entry.version)
                evicted += self._try_evict(entry)
        return evicted

    def _try_evict(self, first: _Entry) -> list[bytes]:
        """TryEvict: drop ``first`` if committed with no stashed dependency, then its dependents."""
        entries = self._entries
        evicted: list[bytes] = []
        todo = [first]
        while todo:
            entry = todo.pop()
            tid = entry.task_id
            if (entries.get(tid) is not entry or entry.committed < entry.version
                    or self._uncommitted_ancestor(entry)):
                continue
            del entries[tid]
            evicted.append(tid)
            in_channel = self._by_channel.get(entry.channel, {})
            if in_channel.get(entry.counter) == tid:
                del in_channel[entry.counter]
                if not in_channel:
                    del self._by_channel[entry.channel]
            self._gone[tid] = entry.committed
            if len(self._gone) > GONE_REMEMBERED:
                self._gone.popitem(last=False)
            self._unlink(entry)
            for dependent in self._dependents.get(tid, ()):
                if (waiting := entries.get(dependent)) is not None:
                    todo.append(waiting)
        self.evicted += len(evicted)
        return evicted

    def _uncommitted_ancestor(self, entry: _Entry) -> bool:
        """Whether a stashed ancestor of ``entry`` is uncommitted: then the walk from its
        dependents must pass through it. Ancestors that are all committed go, cycles among them
        too (a concurrent actor's steps depend on each other's tasks, both ways).

        The uncommitted ancestor found is remembered by every task on the path to it, and looked
        at first next time: a chain behind one uncommitted task costs one step per try, not its
        length (its commit frees the path through the usual cascade to dependents)."""
        entries = self._entries
        if not any(d in entries for d in entry.deps):
            return False
        if self._still_blocks(entry.blocked_by):
            return True
        parent: dict[bytes, bytes] = {}
        todo = [d for d in entry.deps if d in entries]
        for d in todo:
            parent.setdefault(d, entry.task_id)
        seen: set[bytes] = set()
        while todo:
            tid = todo.pop()
            if tid in seen:
                continue
            seen.add(tid)
            ancestor = entries.get(tid)
            if ancestor is None:
                continue
            blocker = tid if ancestor.committed < ancestor.version else (
                ancestor.blocked_by if self._still_blocks(ancestor.blocked_by) else b"")
            if blocker:
                node = tid
                while node != entry.task_id:  # the path from ``entry`` to it
                    entries[node].blocked_by = blocker
                    node = parent[node]
                entry.blocked_by = blocker
                return True
            for d in ancestor.deps:
                if d in entries and d not in seen:
                    parent.setdefault(d, tid)
                    todo.append(d)
        return False

    def _still_blocks(self, tid: bytes) -> bool:
        blocker = self._entries.get(tid) if tid else None
        return blocker is not None and blocker.committed < blocker.version

    # ---- lineage --------------------------------------------------------------------------------

    def uncommitted_lineage(self, spec: pb.TaskSpec) -> list[pb.TaskSpec]:
        """Every uncommitted stashed ancestor of ``spec`` (not ``spec`` itself)."""
        return [e.spec for e in self._walk(spec, None) if e.committed < e.version]

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
            entry.sent_to[destination] = entry.version
            out.append(entry.spec)
        if not include_self:
            self.forwarded_sizes.append(len(out))
        return out

    def _walk(self, spec: pb.TaskSpec, destination: str | None, include_self: bool = False) -> list[_Entry]:
        entries = self._entries
        found: list[_Entry] = []
        if include_self:
            seen: set[bytes] = set()
            todo = [spec.task_id]
        else:
            if not entries:
                return found
            todo = [d for d in spec.dependencies if d]
            seen = {spec.task_id}
        while todo:
            tid = todo.pop()
            if tid in seen:
                continue
            seen.add(tid)
            entry = entries.get(tid)
            if entry is None:
                continue
            if destination is not None and entry.sent_to.get(destination, -1) >= entry.version:
                continue  # sent before, with its lineage
            found.append(entry)
            todo.extend(entry.deps)
        return found
