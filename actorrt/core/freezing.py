"""A process frozen for a rollback round (``ft="checkpoint"``), and where its actors stand.

After a failure the head freezes every live node (``Node.Freeze``): its lease is suspended, so
it starts no task and sends nothing, and it reports each actor's cut: what it ran per sender
(its ledger), its calls per receiver, the last call per receiver whose answer it took (an
acknowledgement aside), and the first call per receiver the process still keeps to send again.
A driver is not frozen (nothing answers it meanwhile: every node is frozen); it reports its own
calls. The head plans which nodes go back (``actorrt.lineage.rollback_plan``); the view that
counts the round thaws the others (``thaw``), which first drop the tasks that the restarted
nodes' old incarnations sent them and had not run: those actors go back to before they sent them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from actorrt.rpc import head_pb2, node_pb2

if TYPE_CHECKING:
    from actorrt.core.worker import Worker


def freeze(worker: Worker, round_: int) -> node_pb2.FreezeReply:
    if worker.slot >= 0:
        worker.lease.suspend(round_)
    outbox = worker.outbox
    kept = outbox.kept_from()
    reply = node_pb2.FreezeReply(opaque=worker.channels.in_use or worker.fetches.took_fetched)
    if worker.host is not None:
        for actor in worker.host.actors.values():
            if actor.death is None:
                reply.actors.append(_cut(actor.actor_id, worker.slot, actor.ledger.last_counter,
                                         actor.context.counters, outbox.answered_upto, kept))
    if worker.slot < 0:
        own = worker.submitter.process_context
        reply.actors.append(_cut(own.sender_id, worker.slot, {}, own.counters, outbox.answered_upto, kept))
    return reply


def thaw(worker: Worker, view: head_pb2.ClusterView, gone: list[str]) -> None:
    """``view`` ended the incarnations at ``gone``; once it counts the round this process is
    frozen for, it acts again."""
    if gone and worker.host is not None:
        worker.host.drop_tasks_from(set(gone))
    worker.lease.resume(view.rollback_rounds)


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
