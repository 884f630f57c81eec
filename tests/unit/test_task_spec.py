import numpy as np
import pytest

from actorrt.core.object_ref import ObjectRef
from actorrt.core.serialization import deserialize
from actorrt.core.task_spec import SenderContext, attach_large_args, build_task, call_digest, encode_args
from actorrt.lineage import ids
from actorrt.lineage.application_log import MAX_RECORD_BYTES, RunningTask
from actorrt.lineage.options import MAX_SPEC_BYTES
from actorrt.lineage.strategies import reordered


def test_counters_predecessor_and_dependencies():
    ctx = SenderContext(b"sender")
    ctx.current_task = b"parent"
    first = build_task(ctx, b"recv", "f", [], [], "owner:1")
    second = build_task(ctx, b"recv", "f", [], [], "owner:1")
    other = build_task(ctx, b"other", "f", [], [], "owner:1")

    assert (first.task_counter, second.task_counter, other.task_counter) == (1, 2, 1)
    assert first.task_id == ids.task_id(b"recv", b"sender", 1)
    assert first.predecessor_id == b""
    assert second.predecessor_id == first.task_id
    assert list(second.dependencies) == [b"parent", first.task_id]
    assert second.parent_id == b"parent" and second.sender == b"sender" and second.receiver == b"recv"


def test_reference_arguments_become_dependencies():
    producer = ids.task_id(b"x", b"y", 4)
    ref = ObjectRef(ids.object_id(producer), "owner:2")
    encoded = encode_args([ref, 5], {"k": "v"}, inline_max_bytes=1024)
    spec = build_task(SenderContext(b"s"), b"r", "f", encoded.args, encoded.refs, "owner:1")

    assert encoded.refs == [ref] and not encoded.large
    assert list(spec.argument_ids) == [ref.object_id]
    assert spec.dependencies[-1] == producer
    assert spec.args[0].WhichOneof("kind") == "ref" and spec.args[0].ref.owner_address == "owner:2"
    assert deserialize(spec.args[1].value) == 5
    assert spec.args[2].keyword == "k" and deserialize(spec.args[2].value) == "v"


def test_replayed_sender_recomputes_the_same_ids():
    def run():
        ctx = SenderContext(ids.actor_id(b"driver", 1))
        return [build_task(ctx, b"recv", "f", [], [], "o").task_id for _ in range(3)]

    assert run() == run()


def call(method, *args, owner="owner:1", **kwargs):
    encoded = encode_args(args, kwargs, inline_max_bytes=1024)
    return build_task(SenderContext(b"s"), b"r", method, encoded.args, encoded.refs, owner)


def test_a_large_argument_is_named_by_an_id_the_replay_recomputes_not_carried_nor_a_dependency():
    def submit():
        ctx = SenderContext(ids.actor_id(b"driver", 1))
        ctx.current_task = b"parent"
        encoded = encode_args([b"x" * 5000, 7], {"big": b"y" * 5000}, inline_max_bytes=1024)
        spec = build_task(ctx, b"r", "f", encoded.args, encoded.refs, "owner:1")
        return spec, attach_large_args(spec, encoded.large, "owner:1")

    spec, values = submit()
    again, _ = submit()
    assert [v.object_id for v in values] == list(spec.argument_ids) == list(again.argument_ids)
    assert len(set(spec.argument_ids)) == 2 and spec.ByteSize() < 1024  # the spec holds ids, not the bytes
    assert list(spec.dependencies) == [b"parent", b""]  # made by the sender's running task: its parent
    assert spec.args[0].ref.object_id == values[0].object_id and spec.args[0].ref.owner_address == "owner:1"
    assert deserialize(values[0].value) == b"x" * 5000 and deserialize(spec.args[1].value) == 7
    assert spec.args[2].keyword == "big" and deserialize(values[1].value) == b"y" * 5000


def test_a_call_digest_names_the_method_and_plain_arguments_whatever_the_version():
    first = call("f", 1.5, "s", k=b"v")
    assert call_digest(first) == call_digest(call("f", 1.5, "s", k=b"v"))
    assert call_digest(first) == call_digest(reordered(first, b"another task ran before it"))
    variants = [first, call("g", 1.5, "s", k=b"v"), call("f", 1.25, "s", k=b"v"), call("f", 1.5, "t", k=b"v"),
                call("f", 1.5, "s", k=b"w"), call("f", 1.5, "s", j=b"v")]
    assert len({call_digest(c) for c in variants}) == len(variants)


def test_a_call_digest_leaves_out_values_whose_bytes_another_process_may_pickle_differently():
    """A ref inside a value names its owner's address, which a restart changes; other values may
    hold a class made at run time or undefined bytes. Comparing them could stop a faithful replay."""
    object_id = ids.object_id(ids.task_id(b"x", b"y", 4))
    before = call("f", ObjectRef(object_id, "10.0.0.1:5000"), [ObjectRef(object_id, "10.0.0.1:5000")], np.zeros(9))
    after = call("f", ObjectRef(object_id, "10.0.0.1:6001"), [ObjectRef(object_id, "10.0.0.1:6001")], np.ones(9))
    assert call_digest(before) == call_digest(after)
    other = ObjectRef(ids.object_id(ids.task_id(b"x", b"y", 5)), "10.0.0.1:5000")  # another ref passed
    assert call_digest(before) != call_digest(call("f", other, [], np.zeros(9)))


def test_arguments_that_would_make_a_spec_too_large_are_refused_naming_the_limit():
    half = b"x" * (MAX_SPEC_BYTES // 2)
    encoded = encode_args([half, half, half], {}, inline_max_bytes=1024)  # beside the task: fine
    assert len(encoded.large) == 3
    with pytest.raises(ValueError, match=f"over the limit of {MAX_SPEC_BYTES}"):
        encode_args([half, half, half], {}, inline_max_bytes=MAX_SPEC_BYTES // 2 + 100)


def test_a_recorded_value_over_the_limit_is_refused_and_logs_nothing():
    spec = build_task(SenderContext(b"s" * 16), b"r" * 16, "m", [], [], "driver")
    task, versions = RunningTask(spec), []
    with pytest.raises(ValueError, match=f"over the limit of {MAX_RECORD_BYTES}"):
        task.record(lambda: b"x" * (MAX_RECORD_BYTES + 1), versions.append)
    assert versions == [] and task.spec.version == 0
    assert task.record(lambda: 7, versions.append) == 7 and len(versions) == 1
