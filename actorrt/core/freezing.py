"""A process frozen for a rollback round (``ft="checkpoint"``), and where its actors stand.

After a failure the head freezes every live node (``Node.Freeze``): its lease is suspended, so
it starts no task and sends nothing, and it reports each actor's cut: what it ran per sender
(its ledger), its calls per receiver, the last call per receiver whose answer it took (an
acknowledgement aside), and the first call per receiver the process still keeps to send again.
While frozen, what other processes send it waits: a node frozen later in the round may still
answer it, and after the thaw a batch from a process the round ended is refused. A driver is
frozen the same way, but goes on sending (what it sends waits at the frozen nodes); it reports
its own calls, after every node did. The head plans which nodes go back
(``actorrt.lineage.rollback_plan``); the view that counts the round thaws the others (``thaw``),
which first drop the tasks that the restarted nodes' old incarnations sent them and had not run:
those actors go back to before they sent them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from actorrt.core.timers import TIMERS_EXTRA, TimerTable
from actorrt.lineage import ids
from actorrt.rpc import head_pb2, node_pb2

if TYPE_CHECKING:
    from actorrt.core.actor import ActorInstance
    from actorrt.core.worker import Worker


def freeze(worker: Worker, round_: int) -> node_pb2.FreezeReply:
    if worker.membership.view.rollback_rounds >= round_:
        return node_pb2.FreezeReply()  # it came late: the round is decided, and nobody reads this
    worker.frozen_for = max(worker.frozen_for, round_)  # what arrives waits for the thaw
    if worker.slot >= 0:
        worker.lease.suspend(round_)
    outbox = worker.outbox
    kept = outbox.kept_from()
    reply = node_pb2.FreezeReply(opaque=worker.channels.in_use or worker.fetches.took_fetched)
    if worker.host is not None:
        for actor in worker.host.actors.values():
            if actor.death is None:
                reply.opaque |= actor.ledger.called_by_functions
                cut = _cut(actor.actor_id, worker.slot, _received(actor), actor.context.counters,
                           outbox.answered_upto, kept)
                cut.outside.extend(actor.ledger.outside)
                reply.actors.append(cut)
    if worker.slot < 0:
        own = worker.submitter.process_context
        reply.actors.append(_cut(own.sender_id, worker.slot, {}, own.counters, outbox.answered_upto, kept))
    return reply


def thaw(worker: Worker, view: head_pb2.ClusterView, gone: list[str]) -> None:
    """``view`` ended the incarnations at ``gone``; once it counts the round this process is
    frozen for, it acts again."""
    if gone and worker.host is not None:
        worker.host.drop_tasks_from(set(gone))
    if view.rollback_rounds >= worker.frozen_for:
        worker.frozen_for = 0  # what waited is taken now (the caller's next step), but from processes gone
    worker.lease.resume(view.rollback_rounds)


def _received(actor: ActorInstance) -> dict[bytes, int]:
    """What ``actor`` ran per sender, but from its own timers (their firings go with it)."""
    own = timer_senders(actor.actor_id, actor.context.extras.get(TIMERS_EXTRA))
    return {s: n for s, n in actor.ledger.last_counter.items() if s not in own}


def timer_senders(actor: bytes, table: TimerTable | None) -> set[bytes]:
    """The senders of the firings of ``actor``'s timers (its own)."""
    return {ids.timer_sender(actor, n) for n in range(1, table.created + 1)} if table is not None else set()


def _cut(actor: bytes, slot: int, received: Mapping[bytes, int], sent: Mapping[bytes, int],
         answered: Mapping[bytes, Mapping[bytes, int]], kept: Mapping[tuple[bytes, bytes], int]) -> node_pb2.ActorCut:
    count = node_pb2.PeerCount
    return node_pb2.ActorCut(
        actor=actor, slot=slot,
        received=[count(peer=s, count=n) for s, n in received.items()],
        sent=[count(peer=r, count=n) for r, n in sent.items()],
        answered=[count(peer=r, count=n) for r, n in answered.get(actor, {}).items()],
        kept_from=[count(peer=r, count=kept.get((actor, r), n + 1)) for r, n in sent.items()],
    )
