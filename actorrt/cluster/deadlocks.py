"""Finding actors whose running tasks await each other in a cycle, from what the nodes report.

With its heartbeats each node reports the awaits of its actors that have lasted a while: actor X's
running task waits for an object that a task of actor Y makes. An actor runs one task at a time,
so if Y's running task waits in turn, directly or through others, for X, none of them can end.
An await may also last because a value that exists is slow to come (a large one, or a recovering
owner), so the head declares a cycle only once it is sure of it:

- every await of the cycle lasted ``DEADLOCK_AFTER_S``, in heartbeats at most ``FRESH_S`` old
  (so all were pending at one moment);
- then the head asks the nodes (a suspected ``Deadlock``), and the node of each producer confirms
  that the task making the awaited object is yet to end there: queued behind the running task, or
  the running task itself. Only a cycle confirmed whole is announced, once; each node fails the
  awaits of it that are still pending.

Pure logic over the reports, tested without sockets.
"""

from __future__ import annotations

from dataclasses import dataclass

from actorrt.rpc import head_pb2

# How long each await of a cycle must have lasted before the cycle is suspected.
DEADLOCK_AFTER_S = 1.0
# Reports older than this are not used (a node reports every heartbeat, 0.2 s).
FRESH_S = 0.6
# A suspected cycle not confirmed whole within this long is dropped (and may be suspected again).
CONFIRM_WITHIN_S = 2.0
# A cycle once announced is not announced again for this long (its awaits fail meanwhile).
ANNOUNCED_KEPT_S = 60.0


@dataclass
class _Report:
    awaits: list[head_pb2.Await]
    at: float  # when the head received it (the head's clock)


def _key(a: head_pb2.Await) -> tuple[bytes, bytes, bytes]:
    return a.waiter, a.task_id, a.object_id


class DeadlockDetector:
    def __init__(self) -> None:
        self._reports: dict[int, _Report] = {}
        self._confirmed: dict[bytes, float] = {}  # object id -> when its producer's node confirmed it
        self._suspected: dict[frozenset, float] = {}  # cycle -> when the nodes were asked
        self._announced: dict[frozenset, float] = {}

    def observe(self, slot: int, awaits: list[head_pb2.Await], confirmed: list[bytes], now: float) -> None:
        """Node ``slot``'s heartbeat, received at ``now``."""
        self._reports[slot] = _Report(list(awaits), now)
        for object_id in confirmed:
            self._confirmed[object_id] = now

    def check(self, now: float) -> list[head_pb2.Deadlock]:
        """What to broadcast now: cycles to confirm (``suspected``), and cycles confirmed whole."""
        for table, kept in ((self._announced, ANNOUNCED_KEPT_S), (self._suspected, CONFIRM_WITHIN_S),
                            (self._confirmed, 2 * CONFIRM_WITHIN_S)):
            for key, at in list(table.items()):
                if now - at > kept:
                    del table[key]
        graph: dict[bytes, list[head_pb2.Await]] = {}
        for report in self._reports.values():
            if now - report.at <= FRESH_S:
                for a in report.awaits:
                    if a.waited_s >= DEADLOCK_AFTER_S:
                        graph.setdefault(a.waiter, []).append(a)
        out = []
        for cycle in _cycles(graph):
            key = frozenset(map(_key, cycle))
            if key in self._announced:
                continue
            asked = self._suspected.get(key)
            if asked is None:
                self._suspected[key] = now
                out.append(head_pb2.Deadlock(cycle=cycle, suspected=True))
            elif all(self._confirmed.get(a.object_id, asked) > asked for a in cycle):
                del self._suspected[key]
                self._announced[key] = now
                out.append(head_pb2.Deadlock(cycle=cycle, message=describe(cycle)))
        return out


def _cycles(graph: dict[bytes, list[head_pb2.Await]]) -> list[list[head_pb2.Await]]:
    """Cycles of ``graph`` (waiter -> its awaits, each naming a producer), at most one through
    each actor; each starts at its smallest waiter."""
    done: set[bytes] = set()
    cycles = []
    for start in sorted(graph):
        if start in done:
            continue
        path: list[head_pb2.Await] = []
        on_path: dict[bytes, int] = {}  # actor -> its position on the path
        stack = [(start, iter(graph.get(start, ())))]
        on_path[start] = 0
        while stack:
            actor, edges = stack[-1]
            edge = next(edges, None)
            if edge is None:
                stack.pop()
                done.add(actor)
                del on_path[actor]
                if path:
                    path.pop()
                continue
            if edge.producer in on_path:  # back to an actor on the path: a cycle
                cycle = path[on_path[edge.producer]:] + [edge]
                first = min(range(len(cycle)), key=lambda i: cycle[i].waiter)
                cycles.append(cycle[first:] + cycle[:first])
                done.update(a.waiter for a in cycle)
                continue
            if edge.producer in done or edge.producer not in graph:
                continue
            path.append(edge)
            on_path[edge.producer] = len(stack)
            stack.append((edge.producer, iter(graph[edge.producer])))
    return cycles


def describe(cycle: list[head_pb2.Await]) -> str:
    """What the cycle is, for the error each of its awaits raises."""
    steps = []
    for i, a in enumerate(cycle):
        running = cycle[(i + 1) % len(cycle)].waiter_name
        steps.append(f"{a.waiter_name} awaits a result of {running.rsplit('.', 1)[0]}, which is running {running}")
    return (f"a cycle of awaits: {'; '.join(steps)}. An actor runs one task at a time, so none of these tasks can "
            f"end: await the result outside the cycle, or make one of these calls without awaiting it")
