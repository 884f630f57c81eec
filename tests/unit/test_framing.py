"""Hand-framed batches must be exactly what protobuf would parse as a PeerBatch, trailer included."""

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from actorrt.net.auth import PEER_METADATA
from actorrt.net.peer_streams import FETCH, OBJECT, RESULT, SUBMIT, Router, frame
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2
from actorrt.util.lease import Lease


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


async def test_each_new_stream_to_a_peer_stamps_its_batches_with_the_next_serial():
    """A stream's batches carry its serial, from 1 per peer address: a receiver tells a new
    stream from the data (objects/traffic.py ``LostNotices``)."""
    router = Router("c:1", "token", lambda peer, batch: None, lambda peer: None, lambda: 7, Lease(), (42, "h"))
    written: list[tuple[str, bytes]] = []

    async def run(address: str) -> None:
        async def write(data: bytes) -> None:
            written.append((address, data))

        before = len(written)
        link = router._link(address, write)
        pumping = asyncio.ensure_future(link.run())
        link.send(FETCH, node_pb2.ObjectRequest(object_id=b"x"))
        while len(written) == before:
            await asyncio.sleep(0)
        pumping.cancel()

    for address in ["p:1", "p:1", "q:1", "p:1"]:
        await run(address)
    batches = [(a, node_pb2.PeerBatch.FromString(data)) for a, data in written]
    assert [(a, b.sender_serial) for a, b in batches] == [("p:1", 1), ("p:1", 2), ("q:1", 1), ("p:1", 3)]
    assert all(b.sender_pid == 42 and b.sender_host == "h" and b.view_revision == 7 and len(b.messages) == 1
               for _, b in batches)


async def test_a_stream_this_process_only_reads_reports_its_end():
    """Both processes dialled at once: this one writes on its own stream, and reads the peer's.
    When the peer's ends, batches on it may be lost: its end is reported all the same."""
    lost: list[str] = []
    router = Router("c:1", "token", lambda peer, batch: None, lost.append, lambda: 0, Lease())

    class Context:
        def invocation_metadata(self):
            return [(PEER_METADATA, "p:1")]

        async def write(self, data: bytes) -> None:
            pass

    own = router._link("p:1", Context().write)

    async def requests():
        return
        yield

    await router.serve(requests(), Context())
    assert lost == ["p:1"] and router._links["p:1"] is own
