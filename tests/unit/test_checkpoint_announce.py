"""What a checkpoint tells the receivers of its actor's calls: which results they may drop. A
call the actor had sent without an answer when it checkpointed is sent again by a restore, and
its receiver answers from its ledger, so that result must stay (a stream operator's batch in
flight: once, a replayed source found the result of a batch the survivor had run dropped, and
stopped with ObjectLostError)."""

from __future__ import annotations

from actorrt.core.checkpointer import covered_sends
from actorrt.rpc import checkpoint_pb2
from actorrt.rpc import common_pb2 as pb

A, B, C = b"a" * 16, b"b" * 16, b"c" * 16


def _pending(receiver: bytes, counter: int) -> checkpoint_pb2.PendingTask:
    return checkpoint_pb2.PendingTask(spec=pb.TaskSpec(receiver=receiver, task_counter=counter))


def test_a_checkpoint_covers_the_calls_it_sent_but_not_those_a_restore_sends_again():
    snapshot = checkpoint_pb2.ActorCheckpoint(
        counters=[checkpoint_pb2.SubmitCounter(receiver=r, count=n) for r, n in ((A, 510), (B, 40), (C, 7))],
        pending=[_pending(A, 506), _pending(A, 508), _pending(A, 510), _pending(C, 7)])
    assert covered_sends(snapshot) == {A: 505, B: 40, C: 6}
