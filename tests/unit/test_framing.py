"""Hand-framed batches must be exactly what protobuf would parse as a PeerBatch."""

from hypothesis import given
from hypothesis import strategies as st

from actorrt.net.peer_streams import FETCH, OBJECT, RESULT, SUBMIT, frame
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2


def _message(kind: int, blob: bytes):
    if kind == SUBMIT:
        return pb.TaskSpec(task_id=blob[:16], method="m", task_counter=len(blob),
                           args=[pb.Arg(value=pb.SerializedObject(data=blob, buffers=[blob]))])
    if kind == FETCH:
        return node_pb2.ObjectRequest(object_id=blob)
    return pb.ObjectValue(object_id=blob[:20], value=pb.SerializedObject(data=blob))


@given(st.lists(st.tuples(st.sampled_from([SUBMIT, RESULT, FETCH, OBJECT]), st.binary(max_size=3000)), max_size=20))
def test_concatenated_frames_parse_as_a_batch(items):
    messages = [(kind, _message(kind, blob)) for kind, blob in items]
    batch = node_pb2.PeerBatch.FromString(b"".join(frame(kind, m) for kind, m in messages))
    assert len(batch.messages) == len(messages)
    for got, (kind, sent) in zip(batch.messages, messages, strict=True):
        field = got.WhichOneof("kind")
        assert node_pb2.PeerMessage.DESCRIPTOR.fields_by_name[field].number == kind
        assert getattr(got, field) == sent
