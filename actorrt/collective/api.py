"""The calls of ``actorrt.collective``, shaped like Ray's ``ray.util.collective``.

The driver makes a group of actors; inside the members' ``async def`` methods, each collective is
awaited by every member, in the same order. See ``service.py`` for how a call runs and
``exchange.py`` for how it survives failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from actorrt import api
from actorrt.collective.group import EXTRAS_PREFIX, GroupMember, group_id
from actorrt.collective.ops import Op, check_array, reduce_op
from actorrt.collective.service import CallAborted, service
from actorrt.core import context
from actorrt.exceptions import ActorRTError, ReplayDivergedError
from actorrt.handles import ActorHandle
from actorrt.util import pickling

# How long a member's call waits for the other members by default, before the call is aborted on
# every member (``create_collective_group(call_timeout=)``; None waits for ever).
DEFAULT_CALL_TIMEOUT_S = 300.0
# A member checkpoints after its task once the results kept for its replay since its last
# checkpoint pass this fraction of ``pinned_budget_bytes`` (what a process keeps for replays).
KEEP_FRACTION = 4


def create_collective_group(actors: Sequence[ActorHandle], group_name: str = "default", *,
                            timeout: float | None = None,
                            call_timeout: float | None = DEFAULT_CALL_TIMEOUT_S) -> None:
    """Make ``actors`` a collective group named ``group_name``, ranked in list order; returns once
    every member has joined (or raises after ``timeout`` seconds). Each member's joining is a task
    of it (logged like any other), so a replayed member joins again and a checkpoint keeps its
    membership.

    ``call_timeout``: how long a member's call waits for the others by default (a call's own
    ``timeout=`` overrides it; None waits for ever). A call that some member has not made by then
    is aborted: it raises ``CollectiveError`` naming those members in every member (in one that
    calls it later, at once), and the group's next call is in step for all."""
    if call_timeout is not None and not call_timeout > 0:
        raise ValueError(f"call_timeout must be a positive number of seconds or None, not {call_timeout!r}")
    actors = list(actors)
    if not actors:
        raise ValueError("a collective group needs at least one actor")
    for handle in actors:
        if not isinstance(handle, ActorHandle):
            raise TypeError(f"create_collective_group takes actor handles, not a {type(handle).__name__}")
    members = [a.actor_id for a in actors]
    if len(set(members)) != len(members):
        raise ValueError("an actor appears twice in the collective group: each member has one rank")
    if not isinstance(group_name, str) or not group_name:
        raise ValueError(f"group_name must be a non-empty str, not {group_name!r}")
    gid, slots = group_id(group_name, members), [a.slot for a in actors]
    api.get([a.__actorrt_call__.remote(_join, group_name, gid, rank, members, slots, call_timeout)
             for rank, a in enumerate(actors)], timeout=timeout)


def _join(_instance: Any, name: str, gid: bytes, rank: int, members: list[bytes], slots: list[int],
          call_timeout: float | None) -> None:
    extras = context.current_sender.get().extras
    joined = extras.get(EXTRAS_PREFIX + name)
    if joined is not None and joined.gid != gid:
        raise ValueError(f"this actor is in another collective group named {name!r} already (of other members)")
    if joined is None:
        extras[EXTRAS_PREFIX + name] = GroupMember(name, gid, rank, members, slots, call_timeout)
    service(context.current().worker)  # listening from now on: other members may call first


async def allreduce(array: Any, group_name: str = "default", op: str = "sum", *,
                    timeout: float | None = None) -> np.ndarray:
    """The elementwise ``op`` (sum, prod, min, max, mean) of every member's ``array``, in rank
    order (the same bits in every run, and after any failure). ``array`` is left as it is; the
    result is a read-only array in shared memory (``.copy()`` it to write to it).

    Every call waits for the others up to ``timeout`` seconds (the group's ``call_timeout`` if
    None), then raises ``CollectiveError`` in every member (see ``create_collective_group``)."""
    return await _call(group_name, Op("allreduce", reduce=reduce_op(op)), array, "allreduce", timeout)


async def reduce_scatter(array: Any, group_name: str = "default", op: str = "sum", *,
                         timeout: float | None = None) -> np.ndarray:
    """This member's part of ``allreduce(array)``: rank r gets ``np.array_split(result, size)[r]``."""
    return await _call(group_name, Op("reduce_scatter", reduce=reduce_op(op)), array, "reduce_scatter", timeout)


async def allgather(array: Any, group_name: str = "default", *, timeout: float | None = None) -> list[np.ndarray]:
    """Every member's ``array`` (of one shape and dtype), in rank order."""
    return await _call(group_name, Op("allgather"), array, "allgather", timeout)


async def broadcast(array: Any, src_rank: int = 0, group_name: str = "default", *,
                    timeout: float | None = None) -> np.ndarray:
    """Member ``src_rank``'s ``array``, in every member (the others may pass None)."""
    member = _member(group_name, "broadcast")
    if not isinstance(src_rank, int) or not 0 <= src_rank < member.size:
        raise ValueError(f"src_rank must be a rank of the group (0 to {member.size - 1}), not {src_rank!r}")
    if member.rank == src_rank and array is None:
        raise ValueError(f"rank {src_rank} is the source of the broadcast: it passes the array")
    return await _call(group_name, Op("broadcast", src_rank=src_rank), array if member.rank == src_rank else None,
                       "broadcast", timeout)


async def barrier(group_name: str = "default", *, timeout: float | None = None) -> None:
    """Return once every member has called it."""
    await _call(group_name, Op("barrier"), None, "barrier", timeout)


def get_rank(group_name: str = "default") -> int:
    """This member's rank in the group."""
    return _member(group_name, "get_rank").rank


def get_collective_group_size(group_name: str = "default") -> int:
    return _member(group_name, "get_collective_group_size").size


def stats() -> dict[str, int]:
    """This process's collective counts: parts of results it ``computed``, results it
    ``fetched`` from another member's process (a replayed member's calls), and the bytes of other
    hosts' members' inputs it ``pulled_bytes`` (over TCP)."""
    return dict(service(context.current().worker).counts)


def _member(group_name: str, what: str) -> GroupMember:
    sender = context.current_sender.get(None)
    if sender is None or sender.function:
        raise ActorRTError(f"collective.{what}() is called inside a method of an actor that is a member of the "
                           f"group (an async def method, awaiting it), not in a driver or a remote function")
    member = sender.extras.get(EXTRAS_PREFIX + group_name)
    if member is None:
        groups = sorted(k[len(EXTRAS_PREFIX):] for k in sender.extras if k.startswith(EXTRAS_PREFIX))
        raise ValueError(f"this actor is not a member of a collective group named {group_name!r} (its groups: "
                         f"{groups or 'none'}); make one with actorrt.collective.create_collective_group(actors, "
                         f"group_name={group_name!r})")
    return member


async def _call(group_name: str, op: Op, array: Any, what: str, timeout: float | None) -> Any:
    member = _member(group_name, what)
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if member.in_call:
        raise RuntimeError(f"rank {member.rank} of collective group {group_name!r} called {what} while its "
                           f"{member.in_call} is under way: a member makes one collective call at a time, and "
                           f"every member makes them in the same order")
    arr = check_array(array, op, f"collective.{what}") if array is not None else None
    rt = context.current()
    seq = member.calls
    aborted_before = _logged_abort(member, seq)
    member.in_call = f"{what} (call #{seq})"
    try:
        if aborted_before is not None:  # a replay: the call failed so before, and fails so again
            raise CallAborted(aborted_before)
        value = await service(rt.worker).call(member, op, arr, timeout if timeout is not None else member.call_timeout)
    except CallAborted as exc:
        # Its outcome is an event of the member's task too: the processes that know of the abort
        # may be gone by the time this member is replayed.
        await _log_event(rt, (member.gid, seq, str(op), str(exc)))
        raise
    finally:
        member.in_call = ""
        member.calls = seq + 1
    if rt.worker.ft.logs_lineage:
        member.keep_limit = rt.worker.ft.options.pinned_budget_bytes // KEEP_FRACTION
    # The call is one event of the member's task, logged: a replay checks it makes the same call.
    event = (member.gid, seq, str(op))
    logged = await _log_event(rt, event)
    if logged != event:
        raise ReplayDivergedError(f"the replay of rank {member.rank} of collective group {group_name!r} made "
                                  f"{op} as call #{seq}; before the failure that call was {logged[2]} (call "
                                  f"#{logged[1]})")
    return value


async def _log_event(rt: Any, event: tuple) -> Any:
    """``event`` logged in the running task's log (WriteFirst: once the store has it), or the
    value logged in its place before a failure."""
    task = context.running_task.get(None)
    version = task.spec.version if task is not None else 0
    logged = context.record(lambda: event, rt.worker.ft.on_record)
    if task is not None and task.spec.version != version:  # logged now (not replayed)
        await rt.worker.ft.recorded(task.spec)
    return logged


def _logged_abort(member: GroupMember, seq: int) -> str | None:
    """In a replay, the reason call ``seq`` was aborted, if the member's log says it was."""
    task = context.running_task.get(None)
    entry = task.next_logged() if task is not None and task.replayed else None
    if entry is None:
        return None
    logged = pickling.loads(entry)
    if isinstance(logged, tuple) and len(logged) == 4 and logged[:2] == (member.gid, seq):
        return logged[3]
    return None
