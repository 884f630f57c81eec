"""What an actor ran from each sender: to tell a re-sent task from a new one, and answer it.

Tasks of one sender run in counter order, so a task whose counter is not above the last one run
from its sender is a re-send (its sender is replaying, or was cut off); it gets the kept result.
Where senders may be replayed (lineage is logged) the ledger also keeps an 8-byte digest of each
call, so a replayed sender that re-sends a counter with another call is caught, not obeyed.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from actorrt.core.serialization import runtime_error
from actorrt.core.task_spec import call_digest, sender_replayed, sent_by_function
from actorrt.lineage import ids
from actorrt.objects.shared import SharedObjects
from actorrt.objects.store import shared_part, wire_size
from actorrt.rpc import checkpoint_pb2
from actorrt.rpc import common_pb2 as pb

log = logging.getLogger(__name__)

# Results of an actor's tasks are kept until its checkpoint covers them: its replay may await any
# of them again. A driver (or a node process outside any task) is never replayed, nor is anyone
# where lineage is not logged: such a sender re-sends only tasks it has no result for, and says
# with each call up to which counter it has them all (``TaskSpec.answered_upto``). Of the rest of
# its results the last 16 are kept, more while they fit in 256 KB.
RESULTS_KEPT_PER_PROCESS = 16
RESULT_BYTES_KEPT_PER_PROCESS = 256 * 1024
# Digests of the calls run per sender (8 bytes each), to tell a faithful re-send from a diverged one.
CALLS_KEPT_PER_SENDER = 1024
# A remote function's call that is run again asks its receivers for the results it had, under the
# same counters; it never checkpoints, so its receivers keep what they ran from the last this many
# such calls (all of each one's results, while they all fit in 64 MB).
FUNCTION_SENDERS_KEPT = 1024
FUNCTION_RESULT_BYTES_KEPT = 64 * 1024 * 1024
# A replay serializes and keeps the results of a process's last this many replayed tasks: a driver
# re-sends only the tasks it has no result for, the newest ones (a margin over what is kept).
REPLAYED_RESULTS_KEPT_PER_PROCESS = 4 * RESULTS_KEPT_PER_PROCESS


def results_unasked(order: list[pb.TaskSpec]) -> set[bytes]:
    """The tasks of a replay whose results no re-send can ask for again: a process's (a driver's),
    but its newest ones. (A replayed actor may await any of its results again: all are kept.)"""
    by_process: dict[bytes, list[pb.TaskSpec]] = {}
    for spec in order:
        if not spec.parent_id and spec.method != "__init__":
            by_process.setdefault(spec.sender, []).append(spec)
    unasked: set[bytes] = set()
    for specs in by_process.values():
        specs.sort(key=lambda s: s.task_counter)
        unasked.update(s.task_id for s in specs[:-REPLAYED_RESULTS_KEPT_PER_PROCESS])
    return unasked


class SenderLedger:
    def __init__(self, actor_id: bytes, who: str, senders_replay: bool, shared: SharedObjects | None = None,
                 functions_rerun: bool = True, sorts_senders: bool = False) -> None:
        self._actor_id = actor_id
        self._shared = shared  # kept results in shared memory are held while kept
        self._who = who  # "Class(actor id)", for messages
        self._senders_replay = senders_replay  # only where lineage is logged
        self._functions_rerun = functions_rerun  # a function's call is run again (not under global rollback)
        self.last_counter: dict[bytes, int] = {}
        # Per sender: counter -> (result, its wire size; measured once: ByteSize serializes).
        self.results: dict[bytes, OrderedDict[int, tuple[pb.ObjectValue, int]]] = {}
        self._kept_bytes: dict[bytes, int] = {}  # per sender, of ``results``
        self._calls: dict[bytes, OrderedDict[int, bytes]] = {}  # per sender: counter -> call_digest
        self._function_senders: OrderedDict[bytes, None] = OrderedDict()  # least recently run from first
        self._function_bytes = 0  # of their results
        # With ``sorts_senders`` (ft="checkpoint"): senders outside any actor task (drivers, node
        # processes), and whether a remote function's call called it: a rollback round tells
        # actors from the rest (core/freezing.py).
        self._sorts_senders = sorts_senders
        self.outside: set[bytes] = set()
        self.called_by_functions = False

    def is_resent(self, spec: pb.TaskSpec) -> bool:
        return spec.task_counter <= self.last_counter.get(spec.sender, 0)

    def ran(self, spec: pb.TaskSpec) -> None:
        """``spec`` runs now."""
        self.last_counter[spec.sender] = spec.task_counter
        if self._sorts_senders:
            if not spec.parent_id:
                self.outside.add(spec.sender)
            elif spec.from_function:
                self.called_by_functions = True
        if spec.answered_upto and not sender_replayed(spec, self._senders_replay):
            self.drop_results(spec.sender, spec.answered_upto)  # before it runs: its result may reuse their memory
        if self._senders_replay or self._reruns(spec):
            calls = self._calls.setdefault(spec.sender, OrderedDict())
            calls[spec.task_counter] = call_digest(spec)
            if len(calls) > CALLS_KEPT_PER_SENDER:
                calls.popitem(last=False)

    def keep(self, spec: pb.TaskSpec, value: pb.ObjectValue) -> None:
        """Keep ``value``, the result of ``spec``, to answer a re-send of it."""
        kept = self.results.setdefault(spec.sender, OrderedDict())
        replaced, replaced_size = kept.pop(spec.task_counter, (None, 0))
        if replaced is not None:
            self._let_go(replaced)
        value = self._held(value)
        size = wire_size(value)
        kept[spec.task_counter] = (value, size)
        self._kept_bytes[spec.sender] = self._kept_bytes.get(spec.sender, 0) + size - replaced_size
        if self._reruns(spec):
            self._function_bytes += size - replaced_size
            self._bound_function_senders(spec.sender)
        elif not sender_replayed(spec, self._senders_replay) or sent_by_function(spec):  # kept as a driver's are
            sender = spec.sender
            while len(kept) > RESULTS_KEPT_PER_PROCESS and self._kept_bytes[sender] > RESULT_BYTES_KEPT_PER_PROCESS:
                self._drop_oldest(sender, kept)

    def _reruns(self, spec: pb.TaskSpec) -> bool:
        """Whether ``spec`` comes from a function's call that may be run again and ask for its answers."""
        return self._functions_rerun and sent_by_function(spec)

    def _bound_function_senders(self, sender: bytes) -> None:
        """Keep the results and digests of the last ``FUNCTION_SENDERS_KEPT`` function calls that
        called this actor; older ones go whole (their counters stay: a late re-send is still told
        from a new call)."""
        self._function_senders[sender] = None
        self._function_senders.move_to_end(sender)
        while len(self._function_senders) > 1 and (len(self._function_senders) > FUNCTION_SENDERS_KEPT
                                                   or self._function_bytes > FUNCTION_RESULT_BYTES_KEPT):
            oldest = next(iter(self._function_senders))
            self.drop_results(oldest, self.last_counter.get(oldest, 0))
            del self._function_senders[oldest]
            self._calls.pop(oldest, None)
            self.results.pop(oldest, None)
            self._kept_bytes.pop(oldest, None)
        kept = self.results.get(sender)
        while self._function_bytes > FUNCTION_RESULT_BYTES_KEPT and kept and len(kept) > 1:
            self._drop_oldest(sender, kept)  # one call alone over the bound: its oldest results go

    def _held(self, value: pb.ObjectValue) -> pb.ObjectValue:
        shared = shared_part(value)
        if shared is not None and not self._shared.hold(shared):
            return self._shared.materialize(value)  # cannot happen to a result made here; then bytes
        return value

    def _let_go(self, value: pb.ObjectValue) -> None:
        shared = shared_part(value)
        if shared is not None:
            self._shared.unhold(shared)

    def kept_bytes(self) -> int:
        return sum(self._kept_bytes.values())

    def calls_run(self, sender: bytes) -> tuple[list[int], bytes]:
        """The counters of ``sender``'s calls whose digests are kept, and those digests (8 bytes each)."""
        calls = self._calls.get(sender, {})
        return list(calls), b"".join(calls.values())

    def drop_results(self, sender: bytes, upto: int) -> None:
        """``sender`` never awaits its tasks up to counter ``upto`` again (its checkpoint covers them,
        or it has their results)."""
        kept = self.results.get(sender)
        while kept and next(iter(kept)) <= upto:
            self._drop_oldest(sender, kept)

    def _drop_oldest(self, sender: bytes, kept: OrderedDict[int, tuple[pb.ObjectValue, int]]) -> None:
        dropped, dropped_size = kept.popitem(last=False)[1]
        self._let_go(dropped)
        self._kept_bytes[sender] -= dropped_size
        if sender in self._function_senders:
            self._function_bytes -= dropped_size

    def answer(self, spec: pb.TaskSpec) -> pb.ObjectValue:
        """The answer to a re-sent ``spec``: its kept result; an error if the call differs from
        the one that ran (a diverged replay) or if its result is no longer kept."""
        object_id = ids.object_id(spec.task_id)
        ran = self._calls.get(spec.sender, {}).get(spec.task_counter)
        if ran is not None and ran != call_digest(spec):
            msg = (f"the replay of {ids.short(spec.sender)} diverged: its task #{spec.task_counter} to "
                   f"{self._who} came again as {spec.method}() with other arguments than the call that ran. It "
                   f"depends on something its lineage does not record: read clocks, random draws and outside data "
                   f"through actorrt.record() (or more than max_forwards processes failed at once; a remote "
                   f"function that calls actors is run again after a failure, and must make the same calls)")
            log.error("%s", msg)
            return pb.ObjectValue(object_id=object_id, error=runtime_error(pb.REPLAY_DIVERGED, msg, self._actor_id))
        value, _ = self.results.get(spec.sender, {}).get(spec.task_counter, (None, 0))
        if value is None:  # an answer nonetheless: a replay that awaits it must not wait forever
            msg = (f"{self._who} ran task #{spec.task_counter} from {ids.short(spec.sender)} but no longer keeps "
                   f"its result: the sender's checkpoint covered it, or the sender is a driver (of whose results "
                   f"it keeps the last {RESULTS_KEPT_PER_PROCESS}, more while they fit in "
                   f"{RESULT_BYTES_KEPT_PER_PROCESS} bytes), or a remote function's call older than the last "
                   f"{FUNCTION_SENDERS_KEPT} that called it)")
            value = pb.ObjectValue(object_id=object_id, error=runtime_error(pb.RESULT_NOT_KEPT, msg))
        return value

    def progress(self, collected: dict[bytes, int]) -> list[checkpoint_pb2.SenderProgress]:
        """Per sender, what a checkpoint records: the last counter run and the results kept."""
        return [
            checkpoint_pb2.SenderProgress(
                sender=sender, last_counter=last, collected=collected.get(sender, 0),
                results=[checkpoint_pb2.KeptResult(counter=c, value=self._shared.materialize(v) if self._shared else v)
                         for c, (v, _) in self.results.get(sender, {}).items()],
            )
            for sender, last in self.last_counter.items()
        ]

    def restore(self, senders: list[checkpoint_pb2.SenderProgress]) -> None:
        for progress in senders:
            self.last_counter[progress.sender] = progress.last_counter
            self.results[progress.sender] = OrderedDict((r.counter, (r.value, wire_size(r.value)))
                                                        for r in progress.results)
            self._kept_bytes[progress.sender] = sum(size for _, size in self.results[progress.sender].values())
