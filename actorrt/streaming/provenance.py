"""Record lineage of one operator instance (``Dataflow(lineage=True)``): pure logic, no sockets.

``StageLogic`` says where each record it emits came from (``Out.origins``: positions in the task's
input batch, or earlier records as ``(code, seq)``); ``Capture`` numbers the records each task
emits, in port order (the numbers are state: a replay numbers them alike, so it writes the same
relations again, which the store takes once), and makes what the instance writes: the task's
relation, the forward entries that find it from its inputs, and fold keys' histories.

A fold does not repeat its key's past in every update: each task that folds records into a key
adds an entry to that key's history (``records.history_entry``: the records, and the updates it
emitted), and an update names the length of its key's history (``records.HISTORY``). A window
keeps its records' IDs until it closes, and names them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from actorrt.lineage import records
from actorrt.lineage.records import HISTORY
from actorrt.store.relations import InstanceWrites, forward_key
from actorrt.streaming.plan import Plan, Session


@dataclass
class FoldHistory:
    """Per fold key: its number (in order of first sight) and its history's length."""

    numbers: dict[Any, int] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)
    folded: list[tuple[int, int, list[int]]] = field(default_factory=list)  # this task's: (number, position, positions)
    carried: dict[Any, list[tuple[int, int, int, int]]] = field(default_factory=dict)  # key -> histories before moves

    def fold(self, key: Any, positions: list[int]) -> tuple[int, int, int] | list[tuple[int, ...]]:
        """Records at ``positions`` of this task's batch were folded into ``key``: the origin of
        the update that emits its state now (its history, this task's entry included, and where
        a rescale moved it from, its history there)."""
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = len(self.lengths)
            self.lengths.append(0)
        position = self.lengths[number]
        self.folded.append((number, position, positions))
        self.lengths[number] = position + 1
        moved = self.carried.get(key)
        return (HISTORY, number, position + 1) if not moved else [(HISTORY, number, position + 1), *moved]

    def so_far(self, key: Any) -> list[tuple[int, ...]]:
        """The origins of ``key``'s state now: its whole history (a final fold's one update)."""
        number = self.numbers.get(key)
        here = [] if number is None else [(HISTORY, number, self.lengths[number])]
        return here + self.carried.get(key, [])

    def forget(self, key: Any) -> None:
        """``key``'s state expired: its next records start a history of their own."""
        self.numbers.pop(key, None)
        self.carried.pop(key, None)

    def take(self) -> list[tuple[int, int, list[int]]]:
        taken, self.folded = self.folded, []
        return taken


@dataclass
class Capture:
    """Numbers an instance's output records and makes the relations it writes; ``keep``: the
    newest records whose relations retention keeps (None: all); ``relates``: whether it relates
    them (else it numbers them only, for a stage after it that captures)."""

    prefix: bytes
    keep: int | None = None
    relates: bool = True  # False: it only numbers its records (a stage after it captures)
    seq: int = 0  # the next output record's number
    tasks: int = 0  # the tasks it related (a task that emitted nothing is named by its number)
    forward_last: dict[tuple[int, int], int] = field(default_factory=dict)  # (code, bucket) -> last task that used it
    floor: int = 0

    def relate(self, code: int, in_seqs: Sequence[int], outs: Sequence[Any],
               folded: list[tuple[int, int, list[int]]]) -> tuple[list[range], InstanceWrites | None]:
        """Number the records of ``outs`` (per port, in order) of a task that took records
        ``in_seqs`` from sender ``code`` (none: a timer, an end); returns the numbers per port, and
        what to write (None: nothing)."""
        first = self.seq
        numbers, origins = [], []
        for out in outs:
            n = len(out.records)
            numbers.append(range(self.seq, self.seq + n))
            self.seq += n
            if n and self.relates:
                origins += out.origins
        if not origins and not folded:
            return numbers, None
        writes = InstanceWrites(self.prefix, keep_history=self.keep or 0)
        self.tasks += 1
        name = str(first) if origins else f"{first}.{self.tasks}"
        writes.tasks.append((first, name, records.encode(first, code, in_seqs, origins, folded)))
        emitted = self._emitted(first, origins)
        if folded:
            writes.history = [(number, position, records.history_entry(emitted.pop((number, position), []), code,
                                                                        [in_seqs[p] for p in positions]))
                              for number, position, positions in folded]
        # Records of a key's state made by no entry of this task (a timer's, a final fold's): by
        # the length of the history they come of, for forward queries.
        writes.history += [(number, f"x:{seq}", b"%d" % (length + 1)) for (number, length), seqs in emitted.items()
                           for seq in seqs]
        for code_bucket in self._buckets(code, in_seqs, origins):
            writes.forward.append((*code_bucket, name))
            self.forward_last[code_bucket] = first
        if self.keep is not None and self.seq - self.keep > self.floor + self.keep // 8:
            self._drop_below(self.seq - self.keep, writes)
        return numbers, writes

    @staticmethod
    def _emitted(first: int, origins: list[Any]) -> dict[tuple[int, int], list[int]]:
        """Per fold key history entry ``(number, position)``, the records emitted of the key's
        state as of it."""
        out: dict[tuple[int, int], list[int]] = {}
        for j, o in enumerate(origins):
            head = o[0] if type(o) is list and o else o
            if type(head) is tuple and head[0] == HISTORY:
                out.setdefault((head[1], head[2] - 1), []).append(first + j)
        return out

    @staticmethod
    def _buckets(code: int, in_seqs: Sequence[int], origins: list[Any]) -> set[tuple[int, int]]:
        """The (sender, bucket) pairs of the records the task names: its batch's, and the earlier
        records a window names."""
        used: set[tuple[int, int]] = set()
        if in_seqs:
            low, high = records.bucket(min(in_seqs)), records.bucket(max(in_seqs))
            used.update((code, b) for b in range(low, high + 1))
        for o in origins:
            if type(o) is list:
                used.update((x[0], records.bucket(x[1])) for x in o if type(x) is tuple and len(x) == 2)
        return used

    def _drop_below(self, floor: int, writes: InstanceWrites) -> None:
        """Retention: relations of records below ``floor`` go, and forward entries only they used."""
        self.floor = writes.floor = floor
        for code_bucket, last in list(self.forward_last.items()):
            if last < floor:
                writes.deletes.append(forward_key(self.prefix, *code_bucket))
                del self.forward_last[code_bucket]


def check_captured(plan: Plan) -> None:
    """Refuse to capture record lineage of a step it does not follow yet (a flow would otherwise
    answer queries about it wrongly): session windows, whose merges it does not track."""
    for s, stage in enumerate(plan.stages):
        step = stage.keyed
        if not plan.captures(s) or step is None:
            continue
        if isinstance(step.window, Session):
            raise ValueError(f"record lineage does not capture session windows yet (stage {stage.name!r} of "
                             f"dataflow {plan.name}): capture the other stages with Dataflow(lineage=[names])")


def flow_shape(plan: Plan, id_kinds: dict[int, str], layouts: list[list[list[int]]] | None = None,
               instances: list[int] | None = None) -> dict[str, Any]:
    """What queries need of a flow: per stage its name, its instances (every one it had), the
    (stage, instance) behind each of its channels (``layouts``, after rescales; else the plan's),
    whether it captures, and for a source its name and how it names records."""
    stages = []
    for s, stage in enumerate(plan.stages):
        channels = layouts[s] if layouts is not None else [list(plan.producer(s, c))
                                                            for c in range(len(plan.channels(s)))]
        parallelism = instances[s] if instances is not None else stage.parallelism
        stages.append({"name": stage.name, "parallelism": parallelism, "channels": channels,
                       "captured": plan.captures(s), "source": stage.source_name if stage.is_source else None,
                       "ids": id_kinds.get(s, "row")})
    return {"format": records.FORMAT, "name": plan.name, "keep": plan.lineage_keep, "stages": stages}
