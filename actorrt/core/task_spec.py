"""Building TaskSpecs: who submits, the per-receiver counters, arguments, dependencies.

Pure protocol logic (no I/O), shared by drivers and actors. The lineage stash hooks in right after
``build_task`` (SubmitTask) and right before execution (AssignTask).
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actorrt.core.object_ref import ObjectRef
from actorrt.core.serialization import SHARED_MIN_BYTES, fill, pickled, pickled_size
from actorrt.lineage import ids
from actorrt.lineage.options import MAX_SPEC_BYTES
from actorrt.rpc import common_pb2 as pb

# The task that checkpoints an actor (``actorrt.checkpoint(handles)``): a barrier in its mailbox.
CHECKPOINT_METHOD = "__checkpoint__"
# The task that stops an actor (``actorrt.kill``): after it, every task of the actor fails.
KILL_METHOD = "__kill__"
# A call applied at most once per (source, batch, seq) mark, whichever driver sends it:
# ``__once__(source, batch, seq, method, *args)`` runs ``method(*args)`` unless the actor already
# applied that mark or a later one of the source (marks of a source only grow).
ONCE_METHOD = "__once__"
# ``handle.__actorrt_call__.remote(fn, *args)`` runs ``fn(instance, *args)`` as a task of the actor
# (as Ray's ``__ray_call__``): how a library on top of the runtime acts inside actors it did not
# write (``actorrt.collective`` joins them to a group this way).
CALL_METHOD = "__actorrt_call__"


@dataclass
class SenderContext:
    """A submitter (an actor, or a driver) and its counters.

    ``counters[receiver]`` is the number of tasks this sender has submitted to ``receiver``; it is
    part of the actor's state, so a replayed actor recomputes the same task IDs.
    """

    sender_id: bytes
    counters: dict[bytes, int] = field(default_factory=dict)
    actors_created: int = 0
    current_task: bytes = b""  # the parent of tasks submitted now
    function: str = ""  # the remote function whose call this sender is (run again, not replayed)
    running: str = ""  # what runs now, for messages: "Class(id).method", "remote function f"
    # What libraries on top of the runtime keep per actor, by name: checkpointed with it
    # (cloudpickled) and restored before its replay. A value may have, for the checkpointer:
    # ``covered()``, the ``(sender, counter)`` pairs a checkpoint covers (what others may stop
    # keeping for it); ``wants_checkpoint()``, true when the actor should checkpoint after this
    # task (what others keep for it grew too large); ``checkpointed()``, called when it did.
    extras: dict[str, Any] = field(default_factory=dict)
    # Told before each call it makes to another actor (or function), if set.
    on_call: Callable[[], None] | None = field(default=None, repr=False)
    # Drivers submit from many threads; counter order must equal queueing order.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def next_counter(self, receiver: bytes) -> int:
        n = self.counters.get(receiver, 0) + 1
        self.counters[receiver] = n
        return n

    def next_actor_id(self) -> bytes:
        self.actors_created += 1
        return ids.actor_id(self.sender_id, self.actors_created)


class CallSender:
    """One of a concurrent actor's calls, as a sender: the actor's counters, extras and lock, and
    its own running task (the parent of what it submits, what its awaits are reported for)."""

    _OWN = frozenset({"current_task", "running", "has_free_slot"})

    def __init__(self, actor: SenderContext, current_task: bytes, running: str,
                 has_free_slot: Callable[[], bool]) -> None:
        object.__setattr__(self, "_actor", actor)
        object.__setattr__(self, "current_task", current_task)
        object.__setattr__(self, "running", running)
        object.__setattr__(self, "has_free_slot", has_free_slot)  # its awaits block nobody while true

    def __getattr__(self, name: str) -> Any:
        return getattr(self._actor, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self._actor, name, value)

    next_counter = SenderContext.next_counter
    next_actor_id = SenderContext.next_actor_id


def sender_replayed(spec: pb.TaskSpec, lineage_logged: bool) -> bool:
    """Whether ``spec``'s sender may be replayed, and await its results again: an actor's task
    (not a driver's, nor a node process's outside any task), where lineage is logged; or a call
    of a remote function, which is run again after a failure in every mode."""
    return bool(spec.parent_id) and (lineage_logged or sent_by_function(spec))


def sent_by_function(spec: pb.TaskSpec) -> bool:
    """Whether ``spec`` comes from a call of a remote function: run again after a failure, never
    replayed or checkpointed, so what its receivers keep for it is bounded otherwise."""
    return spec.from_function


def call_digest(spec: pb.TaskSpec) -> bytes:
    """What a task asks of its receiver, whatever its version: the method, the keywords, the
    refs passed and the plain arguments (numbers, strings, bytes: a clock reading or a random
    draw). A replayed sender re-sends the same call under the same counter, so a different digest
    means its replay diverged from the past.

    Other values are left out: the same value can pickle to other bytes in another process (a ref
    names its owner's address, which a restart changes; cloudpickle tags a class made at run time
    with a random ID; Arrow leaves the slots of nulls undefined), and a false alarm would stop an
    actor whose replay is faithful.
    """
    parts = [spec.method.encode()]
    for arg in spec.args:  # each part length-prefixed; hashed at once (it runs for every task)
        keyword = arg.keyword.encode()
        data = arg.ref.object_id if arg.HasField("ref") else arg.value.data if arg.value.plain else b""
        parts += (len(keyword).to_bytes(8, "little"), keyword, len(data).to_bytes(8, "little"), data)
    return hashlib.blake2b(b"".join(parts), digest_size=8).digest()


@dataclass
class EncodedArgs:
    """A call's arguments in wire form: inline values, refs, and values too large to inline."""

    args: list[pb.Arg]
    refs: list[ObjectRef]  # top-level ObjectRefs, passed as references
    large: list[tuple[int, pb.ObjectValue]]  # (position in args, value): named by id once the task has one


def encode_args(args: Iterable[Any], kwargs: Mapping[str, Any], inline_max_bytes: int,
                to_shared: bool = True) -> EncodedArgs:
    """Wire form of a call's arguments. A value that serializes to more than ``inline_max_bytes``
    is left out of the spec: ``attach_large_args`` names it there by id once the task has one.
    Its buffers go to shared memory, unless not ``to_shared`` (a replay's call, which is mostly
    not sent: the process keeps the value, and moves it to shared memory if it sends it)."""
    out = EncodedArgs([], [], [])
    items = [("", a) for a in args] + list(kwargs.items())
    inline = 0
    for keyword, value in items:
        if isinstance(value, ObjectRef):
            out.refs.append(value)
            out.args.append(pb.Arg(keyword=keyword, ref=value.to_proto()))
            continue
        try:
            parts = pickled(value)
        except Exception as exc:  # noqa: BLE001 - pickle raises many types; the caller needs to know which argument
            which = f"argument {keyword!r}" if keyword else f"argument {len(out.args) + 1}"
            raise TypeError(f"{which} (a {type(value).__name__}) cannot be pickled to go with the task: "
                            f"{exc}") from exc
        if pickled_size(parts) > inline_max_bytes:
            # Only what travels beside the task may be in shared memory: the spec goes to the store whole.
            large = pb.ObjectValue()
            fill(large.value, parts, max(SHARED_MIN_BYTES, inline_max_bytes + 1) if to_shared else sys.maxsize)
            out.large.append((len(out.args), large))
            out.args.append(pb.Arg(keyword=keyword, ref=pb.ObjectRefProto()))
        else:
            arg = pb.Arg(keyword=keyword)
            inline += fill(arg.value, parts, sys.maxsize)
            out.args.append(arg)
    if inline > MAX_SPEC_BYTES:
        raise ValueError(f"this call's arguments put {inline} bytes into its task spec, over the limit of "
                         f"{MAX_SPEC_BYTES} (MAX_SPEC_BYTES: a spec is written to the lineage store whole); "
                         f"each argument over inline_max_bytes ({inline_max_bytes}) travels beside the task "
                         f"instead: pass fewer, larger arguments, or lower inline_max_bytes")
    return out


def attach_large_args(spec: pb.TaskSpec, large: list[tuple[int, pb.ObjectValue]],
                      owner_address: str) -> list[pb.ObjectValue]:
    """Name the large arguments of ``spec`` by id (``argument_ids``); returns their values, which
    travel beside the task. The ids derive from the task's, so a replayed sender recreates them;
    they are not dependencies: the sender's own execution (the parent) made them."""
    values = []
    for position, value in large:
        value.object_id = ids.object_id(spec.task_id, 1 + position)
        ref = spec.args[position].ref
        ref.object_id, ref.owner_address = value.object_id, owner_address
        spec.argument_ids.append(value.object_id)
        values.append(value)
    return values


def build_task(
    ctx: SenderContext,
    receiver: bytes,
    method: str,
    args: list[pb.Arg],
    arg_refs: list[ObjectRef],
    owner_address: str,
    actor_creation: pb.ActorCreation | None = None,
    function: bytes = b"",
) -> pb.TaskSpec:
    """The next task from ``ctx`` to ``receiver`` (call with ``ctx.lock`` held on drivers)."""
    counter = ctx.next_counter(receiver)
    predecessor = ids.task_id(receiver, ctx.sender_id, counter - 1) if counter > 1 else b""
    argument_ids = [ref.object_id for ref in arg_refs]
    return pb.TaskSpec(
        task_id=ids.task_id(receiver, ctx.sender_id, counter),
        version=0,
        receiver=receiver,
        sender=ctx.sender_id,
        task_counter=counter,
        parent_id=ctx.current_task,
        predecessor_id=predecessor,
        argument_ids=argument_ids,
        dependencies=[ctx.current_task, predecessor] + [ids.producer_task(o) for o in argument_ids],
        method=method,
        args=args,
        owner_address=owner_address,
        actor_creation=actor_creation,
        function=function,
        from_function=bool(ctx.function),
    )
