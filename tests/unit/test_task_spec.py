from actorrt import ids
from actorrt.object_ref import ObjectRef
from actorrt.serialization import deserialize
from actorrt.task_spec import SenderContext, build_task, encode_args


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
    wire, refs = encode_args([ref, 5], {"k": "v"})
    spec = build_task(SenderContext(b"s"), b"r", "f", wire, refs, "owner:1")

    assert refs == [ref]
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
