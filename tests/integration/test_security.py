"""Tokens and malformed messages: rejected with the right status, everyone else still served."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

import actorrt
from actorrt.core import context
from actorrt.net.auth import metadata
from actorrt.rpc import head_pb2, head_pb2_grpc, node_pb2, node_pb2_grpc


@actorrt.remote
class Echo:
    def echo(self, x):
        return x


def _token_and_head():
    driver = context.current()
    return driver.token, driver.head_address


def _node_address(slot=0):
    return actorrt.nodes()[slot]["address"]


def _raw_unary(address, method, payload, md):
    with grpc.insecure_channel(address) as chan:
        call = chan.unary_unary(method, request_serializer=None, response_deserializer=None)
        return call(payload, metadata=md, timeout=10)


def _still_serving():
    a, b = Echo.options(node=0).remote(), Echo.options(node=1).remote()
    assert actorrt.get([a.echo.remote(1), b.echo.remote(2)], timeout=30) == [1, 2]


@pytest.mark.parametrize("md", [(), (("x-actorrt-token", "wrong"),)])
def test_head_and_node_reject_a_missing_or_wrong_token(cluster, md):
    _, head = _token_and_head()
    with grpc.insecure_channel(head) as chan:
        with pytest.raises(grpc.RpcError) as info:
            head_pb2_grpc.HeadStub(chan).ClusterStats(head_pb2.ClusterStatsRequest(), metadata=md, timeout=10)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with grpc.insecure_channel(_node_address()) as chan:
        with pytest.raises(grpc.RpcError) as info:
            node_pb2_grpc.NodeStub(chan).Stats(node_pb2.NodeStatsRequest(), metadata=md, timeout=10)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    _still_serving()


def test_wrong_token_on_a_stream_is_rejected(cluster):
    with grpc.insecure_channel(_node_address(1)) as chan:
        replies = node_pb2_grpc.NodeStub(chan).Connect(
            iter([node_pb2.PeerBatch()]), metadata=metadata("wrong", x_actorrt_peer="127.0.0.1:1"), timeout=10
        )
        with pytest.raises(grpc.RpcError) as info:
            list(replies)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    _still_serving()


@pytest.mark.parametrize("target", ["head", "node"])
def test_malformed_unary_request_is_invalid_argument(cluster, target):
    token, head = _token_and_head()
    address, method = (head, "/actorrt.Head/ClusterStats") if target == "head" else (
        _node_address(), "/actorrt.Node/Stats")
    with pytest.raises(grpc.RpcError) as info:
        _raw_unary(address, method, b"\xff\xff\xff\xff", metadata(token))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    _still_serving()


def test_request_that_parses_but_makes_no_sense_is_invalid_argument(cluster):
    token, head = _token_and_head()
    with grpc.insecure_channel(head) as chan:
        stub = head_pb2_grpc.HeadStub(chan)
        with pytest.raises(grpc.RpcError) as info:
            stub.RegisterNode(head_pb2.RegisterNodeRequest(slot=0, address=""), metadata=metadata(token), timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as info:  # a slot that is not waiting for this process
            stub.RegisterNode(head_pb2.RegisterNodeRequest(slot=0, address="127.0.0.1:1", pid=1),
                              metadata=metadata(token), timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as info:
            stub.KillNode(head_pb2.KillNodeRequest(slot=42), metadata=metadata(token), timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [n["state"] for n in actorrt.nodes()] == ["ALIVE", "ALIVE"]
    _still_serving()


def test_malformed_stream_message_aborts_only_that_stream(cluster):
    token, _ = _token_and_head()
    with grpc.insecure_channel(_node_address(0)) as chan:
        connect = chan.stream_stream("/actorrt.Node/Connect", request_serializer=None, response_deserializer=None)
        replies = connect(iter([b"\xff\xff\xff\xff"]), metadata=metadata(token, x_actorrt_peer="127.0.0.1:1"),
                          timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            list(replies)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # A stream without the peer header is refused too.
        replies = node_pb2_grpc.NodeStub(chan).Connect(iter([node_pb2.PeerBatch()]), metadata=metadata(token),
                                                       timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            list(replies)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    _still_serving()


def test_driver_with_a_wrong_token_cannot_connect(cluster):
    _, head = _token_and_head()
    code = (
        "import actorrt\n"
        f"try:\n    actorrt.init(address={head!r}, token='wrong', timeout=10)\n"
        "except actorrt.ClusterError as exc:\n    print('refused:', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "refused:" in out.stdout and "token" in out.stdout, out.stdout + out.stderr
    _still_serving()


def test_session_file_is_private(cluster):
    driver = context.current()
    path = Path(driver.head_process.session.session_dir) / "session.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert driver.token in path.read_text()
