"""Where an actor's standby goes (``choose_standby``), which standbys the head promotes when a node
fails (``promotions``), and where the tasks and objects of a moved actor go (``Membership``):
checked without processes."""

from __future__ import annotations

import pytest

from actorrt.cluster.promotions import promotions
from actorrt.core.membership import Membership
from actorrt.core.standbys import choose_standby
from actorrt.handles import ActorOptions
from actorrt.rpc import head_pb2
from actorrt.streaming import Dataflow


def _nodes(*hosts: str) -> list[head_pb2.NodeInfo]:
    return [head_pb2.NodeInfo(slot=i, host_id=h, state=head_pb2.ALIVE) for i, h in enumerate(hosts)]


def test_a_standby_never_shares_its_actors_slot_and_prefers_another_host():
    alive = _nodes("a", "a", "b", "b")
    for i in range(50):
        actor = b"actor-%d" % i
        assert choose_standby(actor, 0, "a", alive, None) in (2, 3)  # another host first
        assert choose_standby(actor, 1, "a", alive[:2], None) == 0  # else another slot of the same host
    assert choose_standby(b"x", 0, "a", alive[:1], None) is None  # no other slot lives


def test_a_standby_stays_where_it_is_while_its_node_lives():
    alive = _nodes("a", "b", "c")
    assert choose_standby(b"x", 0, "a", alive, 1) == 1
    assert choose_standby(b"x", 0, "a", [alive[0], alive[2]], 1) == 2  # its node died: another
    assert choose_standby(b"x", 0, "a", alive, 0) in (1, 2)  # never its own slot (an actor moved there)


def test_spread_over_the_other_nodes():
    alive = _nodes("a", "b", "c", "d")
    chosen = {choose_standby(b"actor-%d" % i, 0, "a", alive, None) for i in range(100)}
    assert chosen == {1, 2, 3}


def test_the_head_promotes_the_failed_slots_actors_whose_standby_lives():
    standbys = {b"x": 1, b"y": 2, b"z": 3}
    moves = promotions(0, 4, standbys, alive={1, 3}, moved={})
    assert [(m.actor, m.slot, m.from_slot, m.from_epoch, m.epoch) for m in moves] == [
        (b"x", 1, 0, 4, 1), (b"z", 3, 0, 4, 1)]  # y's standby died with it: its slot's restart rebuilds it


def test_an_actor_that_moved_away_is_not_promoted_from_its_old_slot_again():
    earlier = head_pb2.ActorMove(actor=b"x", slot=1, from_slot=0, epoch=1)
    assert promotions(0, 5, {b"x": 1}, alive={1, 2}, moved={b"x": earlier}) == []
    # x is on slot 1 now; slot 1 failing moves it on, its move epoch one more
    (again,) = promotions(1, 2, {b"x": 2}, alive={0, 2}, moved={b"x": earlier})
    assert (again.slot, again.from_slot, again.epoch) == (2, 1, 2)


def test_a_standby_on_the_failed_slot_itself_is_none():
    assert promotions(0, 1, {b"x": 0}, alive={0, 1}, moved={}) == []


@pytest.mark.parametrize("bad", [2, -1, True, "1", None])
def test_standby_takes_0_or_1(bad):
    with pytest.raises(ValueError, match="standby must be 0 or 1"):
        ActorOptions(standby=bad)


def test_a_moved_actors_tasks_and_objects_go_to_the_node_serving_it():
    membership = Membership()
    nodes = [head_pb2.NodeInfo(slot=0, epoch=2, state=head_pb2.STARTING, managed=True, former_addresses=["a:1"]),
             head_pb2.NodeInfo(slot=1, epoch=1, state=head_pb2.ALIVE, managed=True, address="b:1")]
    membership.apply(head_pb2.ClusterView(revision=1, nodes=nodes, moved_actors=[
        head_pb2.ActorMove(actor=b"x", slot=1, from_slot=0, from_epoch=1, epoch=1)]))
    assert membership.slot_for(b"x", 0) == 1  # its handles name slot 0
    assert membership.slot_for(b"y", 0) == 0  # the slot's other actors wait for its restart
    assert membership.current_owner("a:1", b"x") == "b:1"  # an object x's task made before the move
    assert membership.current_owner("a:1", b"y") == ""  # another actor's: the restart rebuilds it
    assert membership.current_owner("a:1") == ""


def test_a_stateful_stage_or_a_source_keeps_standbys_of_its_own_or_the_flows():  # (the plan: no cluster)
    flow = Dataflow("flow", standby=1)
    (flow.source([1, 2], standby=0)
     .map(str, parallelism=2)  # a stage of its own: the flow's
     .key_by(len)
     .fold(lambda: 0, lambda n, _: n + 1, standby=0)
     .key_by(str)
     .reduce(max))
    assert [stage.standby for stage in flow.plan.stages] == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="standby must be 0 or 1"):
        Dataflow("flow").source([1]).key_by(str).fold(list, max, standby=2)
