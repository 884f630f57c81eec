"""Which tasks a lost actor re-executes, and in which order (no sockets)."""

from __future__ import annotations

import pytest

from actorrt.core.task_spec import SenderContext, build_task
from actorrt.exceptions import ActorRTError
from actorrt.lineage import ids
from actorrt.lineage.replay import replay_order
from actorrt.lineage.strategies import reordered
from actorrt.rpc import checkpoint_pb2
from actorrt.rpc import common_pb2 as pb

ACTOR = ids.actor_id(b"creator", 1)


def _creation(creator: SenderContext, nondeterministic: bool) -> pb.TaskSpec:
    creation = pb.ActorCreation(class_name="A", nondeterministic=nondeterministic)
    return build_task(creator, ACTOR, "__init__", [], [], "driver", creation)


def _send(sender: SenderContext, n: int) -> list[pb.TaskSpec]:
    return [build_task(sender, ACTOR, "m", [], [], "driver") for _ in range(n)]


def test_a_nondeterministic_actor_replays_its_recorded_order_and_stops_where_the_record_ends():
    driver, s1, s2 = (SenderContext(ids.actor_id(b"x", i)) for i in range(3))
    creation = _creation(driver, nondeterministic=True)
    a, b = _send(s1, 2), _send(s2, 2)
    ran = [creation, b[0], a[0], a[1], b[1]]  # the order the lost actor ran them in
    executed = [creation] + [reordered(t, ran[i].task_id) for i, t in enumerate(ran[1:])]
    # The order of the last task never reached the store: it is still at the sender's version.
    stored = {t.task_id: t for t in executed[:-1]} | {b[1].task_id: b[1]}
    assert [t.task_id for t in replay_order(ACTOR, stored)] == [t.task_id for t in ran[:-1]]


def _executed_deterministically(ran: list[pb.TaskSpec]) -> list[pb.TaskSpec]:
    """What a deterministic actor's AssignTask records for ``ran``: a new version naming the task
    before it wherever the sender changes."""
    out = [ran[0]]
    for before, task in zip(ran, ran[1:], strict=False):
        out.append(reordered(task, before.task_id) if task.sender != before.sender else task)
    return out


def test_a_deterministic_actor_replays_its_senders_interleaving_and_stops_at_a_gap():
    driver, s1 = SenderContext(ids.actor_id(b"x", 0)), SenderContext(ids.actor_id(b"x", 1))
    creation = _creation(driver, nondeterministic=False)
    d, a = _send(driver, 3), _send(s1, 4)
    ran = [creation, a[0], a[1], d[0], a[2], d[1], d[2], a[3]]  # not (counter, sender) order
    executed = _executed_deterministically(ran)
    assert sum(t.version for t in executed) == 5  # only the five changes of sender are recorded
    stored = {t.task_id: t for t in executed}
    assert [t.task_id for t in replay_order(ACTOR, stored)] == [t.task_id for t in ran]
    # d[1] never reached the store: it and what ran after it come again from their senders.
    del stored[d[1].task_id]
    assert [t.task_id for t in replay_order(ACTOR, stored)] == [t.task_id for t in ran[:5]]
    # A single sender records nothing: its counters are its order.
    alone = [creation, *d]
    assert _executed_deterministically(alone) == alone
    assert replay_order(ACTOR, {t.task_id: t for t in alone}) == alone


def test_an_actor_without_a_stored_constructor_is_a_clear_error():
    with pytest.raises(ActorRTError, match="no constructor"):
        replay_order(ACTOR, {t.task_id: t for t in _send(SenderContext(b"s" * 16), 2)})


def _checkpoint(creation: pb.TaskSpec, last: pb.TaskSpec, done: dict[bytes, int]) -> checkpoint_pb2.ActorCheckpoint:
    return checkpoint_pb2.ActorCheckpoint(
        actor_id=ACTOR, seq=1, creation=creation.actor_creation, last_executed=last.task_id,
        senders=[checkpoint_pb2.SenderProgress(sender=s, last_counter=n) for s, n in done.items()],
    )


def test_a_nondeterministic_actor_restored_from_a_checkpoint_replays_the_chain_after_it():
    driver, s1, s2 = (SenderContext(ids.actor_id(b"x", i)) for i in range(3))
    creation = _creation(driver, nondeterministic=True)
    a, b = _send(s1, 3), _send(s2, 2)
    ran = [creation, b[0], a[0], a[1], b[1], a[2]]
    executed = [creation] + [reordered(t, ran[i].task_id) for i, t in enumerate(ran[1:])]
    # Checkpointed after a[1]; the constructor's record and the two first tasks were collected.
    ckpt = _checkpoint(creation, a[1], {driver.sender_id: 1, s1.sender_id: 2, s2.sender_id: 1})
    stored = {t.task_id: t for t in executed[3:]}
    assert [t.task_id for t in replay_order(ACTOR, stored, ckpt)] == [b[1].task_id, a[2].task_id]
    # Nothing ran after the checkpoint: nothing to replay, and no constructor needed.
    assert replay_order(ACTOR, {}, ckpt) == []


def test_a_deterministic_actor_restored_from_a_checkpoint_replays_the_interleaving_after_its_cut():
    driver, s1 = SenderContext(ids.actor_id(b"x", 0)), SenderContext(ids.actor_id(b"x", 1))
    creation = _creation(driver, nondeterministic=False)
    d, a = _send(driver, 3), _send(s1, 4)
    ran = [creation, a[0], d[0], a[1], a[2], d[1], a[3], d[2]]
    executed = _executed_deterministically(ran)
    # Checkpointed after a[1]; records the checkpoint covers may still be in the store.
    ckpt = _checkpoint(creation, a[1], {driver.sender_id: 2, s1.sender_id: 2})
    ckpt.last_sender = s1.sender_id
    stored = {t.task_id: t for t in executed}
    assert [t.task_id for t in replay_order(ACTOR, stored, ckpt)] == [t.task_id for t in ran[4:]]
