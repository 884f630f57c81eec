"""What a restarted head does with each slot its predecessor's last view names (pure)."""

from actorrt.cluster.takeover import Takeover, takeover_plan
from actorrt.rpc import head_pb2


def test_each_slot_is_followed_adopted_restarted_or_failed_by_what_the_dead_head_last_saved():
    view = head_pb2.ClusterView(nodes=[
        head_pb2.NodeInfo(slot=0, epoch=2, state=head_pb2.ALIVE, managed=True, pid=10, process_started=5),
        head_pb2.NodeInfo(slot=1, epoch=3, state=head_pb2.DEAD, managed=True, pid=11),  # death saved, not restarted
        head_pb2.NodeInfo(slot=2, epoch=4, state=head_pb2.STARTING, managed=True, pid=0),  # epoch taken, no process
        head_pb2.NodeInfo(slot=3, epoch=1, state=head_pb2.STARTING, managed=True, pid=12),  # started, not registered
        head_pb2.NodeInfo(slot=4, epoch=1, state=head_pb2.ALIVE, managed=False, pid=13),  # added by hand
        head_pb2.NodeInfo(slot=5, epoch=1, state=head_pb2.DEAD, managed=False, heir=0),
    ])
    assert [(info.slot, action) for info, action in takeover_plan(view)] == [
        (0, Takeover.ADOPT), (1, Takeover.LAUNCH), (2, Takeover.FAIL), (3, Takeover.ADOPT),
        (4, Takeover.FOLLOW), (5, Takeover.FOLLOW),
    ]


def test_a_standby_on_another_host_follows_the_processes_it_cannot_watch():
    view = head_pb2.ClusterView(nodes=[
        head_pb2.NodeInfo(slot=0, epoch=2, state=head_pb2.ALIVE, managed=True, pid=10, host_id="a"),
        head_pb2.NodeInfo(slot=1, epoch=2, state=head_pb2.ALIVE, managed=True, pid=11, host_id="b"),  # its own host
        head_pb2.NodeInfo(slot=2, epoch=3, state=head_pb2.DEAD, managed=True, pid=12, host_id="a"),
        head_pb2.NodeInfo(slot=3, epoch=4, state=head_pb2.STARTING, managed=True, pid=0, host_id="a"),
    ])
    assert [(info.slot, action) for info, action in takeover_plan(view, host_id="b")] == [
        (0, Takeover.FOLLOW), (1, Takeover.ADOPT), (2, Takeover.LAUNCH), (3, Takeover.FAIL),
    ]
