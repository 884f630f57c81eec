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


def test_a_deterministic_actor_replays_each_senders_unbroken_run():
    driver, s1 = SenderContext(ids.actor_id(b"x", 0)), SenderContext(ids.actor_id(b"x", 1))
    creation = _creation(driver, nondeterministic=False)
    from_driver, from_s1 = _send(driver, 3), _send(s1, 4)
    missing = from_s1[1]  # never reached the store: it and what follows come again from s1
    stored = {t.task_id: t for t in [creation, *from_driver, *from_s1] if t is not missing}
    order = replay_order(ACTOR, stored)
    assert order[0] is stored[creation.task_id]
    assert {t.task_id for t in order[1:]} == {t.task_id for t in [*from_driver, from_s1[0]]}
    driver_counters = [t.task_counter for t in order if t.sender == driver.sender_id]
    assert driver_counters == sorted(driver_counters) == [1, 2, 3, 4]


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


def test_a_deterministic_actor_restored_from_a_checkpoint_replays_each_sender_after_its_cut():
    driver, s1 = SenderContext(ids.actor_id(b"x", 0)), SenderContext(ids.actor_id(b"x", 1))
    creation = _creation(driver, nondeterministic=False)
    from_driver, from_s1 = _send(driver, 3), _send(s1, 4)
    ckpt = _checkpoint(creation, from_s1[1], {driver.sender_id: 2, s1.sender_id: 2})
    # Records the checkpoint covers may still be in the store (collected one checkpoint later).
    stored = {t.task_id: t for t in [creation, *from_driver, *from_s1]}
    order = replay_order(ACTOR, stored, ckpt)
    assert {(t.sender, t.task_counter) for t in order} == {
        (driver.sender_id, 3), (driver.sender_id, 4), (s1.sender_id, 3), (s1.sender_id, 4)}
