"""The head's round after a failure under ``ft="checkpoint"``: which nodes go back.

Every live node is frozen and reports where its actors stand (``Node.Freeze``, see
``core/freezing.py``), then every driver reports its own calls (after the nodes: nothing
answers a driver once they are frozen). The last global checkpoint gives the cuts the actors can
go back to. ``actorrt.lineage.rollback_plan`` finds the nodes that must go back; the head restarts
those (the failed ones among them) from the checkpoint and publishes the view that ends the
round, which thaws the rest. A node that does not answer counts as failed; a driver that does
not, sends every node back.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

from google.protobuf.message import DecodeError
from grpc import aio

from actorrt.core.timers import TIMERS_EXTRA
from actorrt.lineage.checkpoints import (
    actor_directory,
    latest_manifest,
    latest_restorable,
    marks_since,
    read_checkpoint,
)
from actorrt.lineage.rollback_plan import (
    DRIVER_SLOT,
    Present,
    Restorable,
    RollbackPlan,
    checkpoint_cut,
    plan,
    reported_cut,
)
from actorrt.net.auth import metadata
from actorrt.net.server import channel
from actorrt.net.tls import TlsFiles
from actorrt.rpc import node_pb2, node_pb2_grpc
from actorrt.rpc.checkpoint_pb2 import ActorCheckpoint

log = logging.getLogger("actorrt.head")

# How long a process may take to freeze and report; a node that takes longer counts as failed.
FREEZE_TIMEOUT_S = 5.0


async def decide(round_: int, nodes: dict[int, str], drivers: list[str], failed: set[int], checkpoint_dir: str,
                 token: str, tls: TlsFiles | None) -> RollbackPlan:
    """Freeze ``nodes`` (slot: address) for ``round_``, gather their reports and the drivers',
    and plan which slots go back (``failed`` among them)."""
    request = node_pb2.FreezeRequest(round=round_)

    async def freeze(address: str) -> node_pb2.FreezeReply | None:
        try:
            async with channel(address, tls) as chan:
                return await node_pb2_grpc.NodeStub(chan).Freeze(request, metadata=metadata(token),
                                                                  timeout=FREEZE_TIMEOUT_S)
        except aio.AioRpcError as exc:
            log.warning("%s did not report for rollback round %d: %s", address, round_, exc.code().name)
            return None

    present: dict[bytes, Present] = {}
    opaque: set[int] = set()
    failed = set(failed)
    replies = await asyncio.gather(*(freeze(a) for a in nodes.values()))
    for slot, reply in zip(nodes, replies, strict=True):
        if reply is None:
            failed.add(slot)
    driver_replies = await asyncio.gather(*(freeze(a) for a in drivers))
    if any(reply is None for reply in driver_replies):  # what it took, nobody can tell
        return await everyone_back(failed, "a driver did not report", checkpoint_dir)
    for slot, reply in [*zip(nodes, replies, strict=True), *((DRIVER_SLOT, r) for r in driver_replies)]:
        if reply is None or slot in failed:
            continue
        present.update((c.actor, reported_cut(c)) for c in reply.actors)
        if reply.opaque:
            opaque.add(slot)
    try:
        checkpoint, unusable, number = await asyncio.to_thread(checkpoint_cuts, checkpoint_dir)
    except (OSError, DecodeError, ValueError) as exc:
        checkpoint, unusable, number = {}, f"the last global checkpoint is unreadable here: {exc}", 0
    if unusable:
        return await everyone_back(failed, unusable, checkpoint_dir)
    return replace(plan(checkpoint, present, failed, opaque), manifest=number)


async def everyone_back(failed: set[int], why: str, checkpoint_dir: str) -> RollbackPlan:
    """Every node goes back, to the newest global checkpoint whose files are all there."""
    found = await asyncio.to_thread(latest_restorable, checkpoint_dir)
    return RollbackPlan(frozenset(failed), everyone=why, manifest=found["id"] if found else 0)


def checkpoint_cuts(directory: str | Path) -> tuple[dict[bytes, Restorable], str, int]:
    """The actors of the newest global checkpoint (``restorable``) and its number; or why it
    cannot be gone back to alone: there is none, or an actor of it has a newer checkpoint file (a
    global checkpoint is under way, and what others dropped on hearing of it, calls kept and
    results kept for a restore to ask for again, may be what this one's restore needs)."""
    found = latest_manifest(directory)
    if found is None:
        return {}, "no global checkpoint was taken yet", 0
    cuts = {}
    for actor_hex, entry in found["actors"].items():
        files = actor_directory(directory, bytes.fromhex(actor_hex)).glob("*.ckpt")
        if any(int(f.name.split("-", 1)[0]) > entry["seq"] for f in files):
            return {}, "a global checkpoint was being taken", 0
        actor = bytes.fromhex(actor_hex)
        cuts[actor] = restorable(read_checkpoint(entry["path"]), marks_since(directory, actor, entry["seq"]))
    return cuts, "", found["id"]


def restorable(checkpoint: ActorCheckpoint, since: set[str]) -> Restorable:
    """An actor's part of a global checkpoint, with what it marked it did since; deterministic if
    created ``nondeterministic=False``, taking one call at a time, with no timers."""
    creation = checkpoint.creation
    deterministic = (not creation.nondeterministic and creation.max_concurrency <= 1
                     and TIMERS_EXTRA not in checkpoint.extras)
    return Restorable(creation.slot, checkpoint_cut(checkpoint), deterministic, frozenset(since))
