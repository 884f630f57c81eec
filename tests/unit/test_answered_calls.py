"""A sender that is never replayed says up to which counter it has its results; the receiver's
ledger keeps none of those for re-sends."""

from hypothesis import given, settings
from hypothesis import strategies as st

from actorrt.core import ledger as ledger_module
from actorrt.core.answered_calls import AnsweredCalls
from actorrt.core.ledger import RESULTS_KEPT_PER_PROCESS, SenderLedger
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb

DRIVER, ACTOR = b"d" * 16, b"a" * 16


def _spec(counter: int, answered_upto: int = 0, parent: bytes = b"") -> pb.TaskSpec:
    return pb.TaskSpec(task_id=ids.task_id(ACTOR, DRIVER, counter), receiver=ACTOR, sender=DRIVER,
                       task_counter=counter, parent_id=parent, answered_upto=answered_upto)


@settings(max_examples=200, deadline=None)
@given(st.permutations(range(1, 31)), st.integers(0, 30))
def test_the_watermark_is_the_longest_prefix_of_answered_counters(order, answered):
    calls = AnsweredCalls()
    done = set()
    for counter in order[:answered]:
        calls.answered(_spec(counter))
        done.add(counter)
        prefix = 0
        while prefix + 1 in done:
            prefix += 1
        assert calls.upto(DRIVER, ACTOR) == prefix
    assert calls.upto(ACTOR, DRIVER) == 0  # channels are apart


def _value(counter: int, size: int = 1000) -> pb.ObjectValue:
    oid = ids.object_id(ids.task_id(ACTOR, DRIVER, counter))
    return pb.ObjectValue(object_id=oid, value=pb.SerializedObject(data=bytes(size)))


def test_a_drivers_results_go_once_it_says_it_has_them():
    ledger = SenderLedger(ACTOR, "A", senders_replay=True)
    for counter in range(1, 6):
        spec = _spec(counter, answered_upto=counter - 1)  # each call after the last one's result came
        ledger.ran(spec)
        ledger.keep(spec, _value(counter))
        assert list(ledger.results[DRIVER]) == [counter]
    assert ledger.kept_bytes() == ledger.results[DRIVER][5][1]
    assert ledger.answer(_spec(5)).value.data == bytes(1000)
    assert ledger.answer(_spec(4)).error.kind == pb.RESULT_NOT_KEPT


def test_without_a_watermark_a_drivers_last_results_are_kept():
    ledger = SenderLedger(ACTOR, "A", senders_replay=True)
    for counter in range(1, 41):
        spec = _spec(counter)
        ledger.ran(spec)
        ledger.keep(spec, _value(counter, 100_000))
    assert list(ledger.results[DRIVER]) == list(range(41 - RESULTS_KEPT_PER_PROCESS, 41))


def test_an_actor_sender_that_is_replayed_keeps_every_result_whatever_it_says():
    ledger = SenderLedger(ACTOR, "A", senders_replay=True)
    for counter in range(1, 6):
        spec = _spec(counter, answered_upto=counter - 1, parent=b"p" * 16)
        ledger.ran(spec)
        ledger.keep(spec, _value(counter))
    assert list(ledger.results[DRIVER]) == [1, 2, 3, 4, 5]  # its replay may await any again


def test_a_function_calls_results_are_all_kept_for_its_re_run_and_the_oldest_calls_go_whole(monkeypatch):
    monkeypatch.setattr(ledger_module, "FUNCTION_SENDERS_KEPT", 3)
    ledger = SenderLedger(ACTOR, "A", senders_replay=True)
    calls = [ids.task_id(ids.FUNCTIONS, DRIVER, n) for n in range(1, 5)]  # four calls of a remote function

    def spec(call: bytes, counter: int) -> pb.TaskSpec:
        sender = ids.function_call(call)  # what a call's sends carry: a re-run sends the same
        return pb.TaskSpec(task_id=ids.task_id(ACTOR, sender, counter), receiver=ACTOR, sender=sender,
                           task_counter=counter, parent_id=call, from_function=True)

    for call in calls:
        for counter in range(1, 41):  # more than a driver's last results
            ledger.ran(spec(call, counter))
            ledger.keep(spec(call, counter), _value(counter, 100_000))
    first, *rest = calls
    for call in rest:
        assert list(ledger.results[ids.function_call(call)]) == list(range(1, 41))
        assert ledger.answer(spec(call, 1)).value.data == bytes(100_000)
    assert ledger.is_resent(spec(first, 7))  # a late re-send of the oldest is still not run again
    assert ledger.answer(spec(first, 7)).error.kind == pb.RESULT_NOT_KEPT
    assert ledger.kept_bytes() == 3 * 40 * ledger.results[ids.function_call(calls[1])][1][1]
