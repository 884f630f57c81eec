"""Fault-tolerance policies: their names and options, and what a checkpointing actor holds."""

from __future__ import annotations

import pytest

from actorrt.core.held_outputs import HeldOutputs
from actorrt.lineage import ids, policies
from actorrt.lineage.policies import Policy
from actorrt.rpc import common_pb2 as pb


def test_names_and_builders_give_the_same_policies() -> None:
    assert policies.policy(None) == policies.policy("lineage_stash") == Policy()
    assert policies.policy("checkpoint") == policies.checkpoint() == Policy("checkpoint", None, 1.0)
    assert policies.policy("eager") == policies.checkpoint(eager=True) == Policy("eager")
    assert policies.policy("ephemeral").kind == "ephemeral"
    lazy = policies.checkpoint(every_tasks=50)
    assert (lazy.every_tasks, lazy.every_s) == (50, None) and str(lazy) == "checkpoint(every_tasks=50)"
    for policy in (Policy(), lazy, policies.checkpoint(every_s=0.25), policies.EPHEMERAL, policies.policy("eager")):
        assert Policy.from_proto(policy.to_proto()) == policy


@pytest.mark.parametrize(("call", "error"), [
    (lambda: policies.policy("lazy"), "ft= must be one of"),
    (lambda: policies.policy(3), "takes a policy or its name"),
    (lambda: policies.checkpoint(every_tasks=0), "every_tasks must be"),
    (lambda: policies.checkpoint(every_s=-1), "every_s must be"),
    (lambda: policies.checkpoint(every_s=float("inf")), "every_s must be"),
    (lambda: policies.checkpoint(every_s=1, eager=True), "takes no every_tasks or every_s"),
])
def test_bad_policies_are_refused(call, error) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        call()


def _spec(counter: int) -> pb.TaskSpec:
    return pb.TaskSpec(task_id=ids.task_id(b"r" * 16, b"s" * 16, counter), receiver=b"r" * 16, sender=b"s" * 16,
                       task_counter=counter)


def test_held_outputs_leave_in_order_up_to_a_checkpoints_mark_or_all_at_an_escape() -> None:
    held, sent = HeldOutputs(), []
    for n in (1, 2):
        held.hold_call(_spec(n), 0, [], lambda n=n: sent.append(("call", n)))
    held.hold_result(lambda: sent.append(("result", 2)))
    mark = held.mark()  # a checkpoint snapshotted now covers these three
    held.hold_call(_spec(3), 0, [], lambda: sent.append(("call", 3)))
    assert [c.spec.task_counter for c in held.calls()] == [1, 2, 3]
    assert held.holds([ids.object_id(_spec(3).task_id)]) and not held.holds([b"other"])
    held.release(mark)  # that checkpoint is durable
    assert sent == [("call", 1), ("call", 2), ("result", 2)] and len(held) == 1
    held.release(mark)  # (an older mark again: nothing)
    assert len(held) == 1
    held.release()  # an escape: all of it
    assert sent[-1] == ("call", 3) and len(held) == 0 and not held.holds([ids.object_id(_spec(3).task_id)])
