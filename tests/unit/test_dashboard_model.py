"""What the dashboard makes of the head's stats, without sockets: failures joined with their
recoveries, flows read as graphs, the history's series and restarts, store shards' INFO."""

from __future__ import annotations

import json

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from actorrt.dashboard import pages
from actorrt.dashboard.auth import Door
from actorrt.dashboard.flows import flows_of
from actorrt.dashboard.history import History, Series
from actorrt.dashboard.recoveries import FailureLog
from actorrt.rpc import head_pb2, node_pb2


def _node(slot: int, epoch: int = 1, actors=(), recoveries=()) -> node_pb2.NodeStatsReply:
    return node_pb2.NodeStatsReply(slot=slot, epoch=epoch, actors=list(actors), recoveries=list(recoveries))


def _operator(label: str, inputs=(), actor_id: bytes = b"", **metrics: float) -> node_pb2.ActorStats:
    return node_pb2.ActorStats(actor_id=actor_id or label.encode(), class_name="Operator", label=label,
                               inputs=list(inputs), metrics=metrics)


def _recovery(slots=(), replay_ms: float = 0.0, **values) -> node_pb2.RecoveryStats:
    return node_pb2.RecoveryStats(slots=list(slots), replay_ms=replay_ms, **values)


# ---- failures and recoveries ------------------------------------------------------------------------

def test_a_restarted_node_s_recovery_joins_its_slot_s_failure_and_updates_until_its_replay_is_done():
    log = FailureLog()
    failure = log.failed(1, 1, "its process exited", at=100.0, detection_ms=4.0)
    log.observe([_node(1, 2, recoveries=[_recovery(restart_ms=30.0, flush_ms=5.0, fetch_ms=7.0)])])
    assert not failure.done and failure.recovery["restart_ms"] == 30.0
    log.observe([_node(1, 2, recoveries=[_recovery(restart_ms=30.0, flush_ms=5.0, fetch_ms=7.0, replay_ms=20.0,
                                                  tasks_replayed=40)])])
    assert failure.done
    assert failure.phases() == [("detection", 4.0), ("restart", 30.0), ("survivors' flush", 5.0),
                                ("reading lineage", 7.0), ("replay", 20.0)]
    assert failure.as_json()["total_ms"] == 66.0 and failure.as_json()["tasks_replayed"] == 40
    # Once done, later heartbeats change nothing.
    log.observe([_node(1, 2, recoveries=[_recovery(replay_ms=99.0)])])
    assert failure.recovery["replay_ms"] == 20.0


def test_each_failure_of_a_slot_gets_its_own_recovery_and_an_heir_s_recovery_joins_the_dead_slot():
    log = FailureLog()
    first = log.failed(1, 1, "killed", 100.0, 1.0)
    log.observe([_node(1, 2, recoveries=[_recovery(replay_ms=5.0)])])
    second = log.failed(1, 2, "killed", 200.0, 1.0)
    log.observe([_node(1, 2, recoveries=[_recovery(replay_ms=5.0)]),
                 _node(1, 3, recoveries=[_recovery(replay_ms=7.0)])])
    assert first.recovery["replay_ms"] == 5.0 and second.recovery["replay_ms"] == 7.0
    # A node added by hand died: node 0 inherits its actors and rebuilds them.
    orphan = log.failed(4, 1, "missed heartbeats", 300.0, 10_000.0)
    log.observe([_node(0, 1, recoveries=[_recovery(slots=[4], replay_ms=3.0)])])
    assert orphan.done and orphan.recovery["slots"] == [4]


def test_a_rollback_round_records_its_time_and_the_nodes_it_sent_back():
    log = FailureLog()
    failure = log.failed(2, 1, "its process exited", 100.0, 3.0)
    log.rolled_back(2, {0: 1, 2: 1}, at=100.1, round_ms=40.0)
    assert failure.round_ms == 40.0
    went = log.recent(5)[0]
    assert (went.slot, went.with_slot, went.round_ms) == (0, 2, 40.0)
    assert [name for name, _ in went.phases()] == ["detection", "rollback round", "restart", "replay"]
    assert went.phases()[0] == ("detection", 0.0)  # it did not fail: nothing to detect
    log.observe([_node(0, 2, recoveries=[_recovery(replay_ms=9.0)])])
    assert went.done and not failure.done


def test_reports_of_failures_before_the_head_restarted_join_no_later_failure():
    log = FailureLog()  # a restarted head's: empty, while node 1 (epoch 2) still reports its recovery
    log.observe([_node(1, 2, recoveries=[_recovery(replay_ms=5.0)])])
    failure = log.failed(1, 2, "killed", 100.0, 1.0)
    log.observe([_node(1, 2, recoveries=[_recovery(replay_ms=5.0)])])
    assert failure.recovery is None and not failure.done
    log.observe([_node(1, 3, recoveries=[_recovery(replay_ms=8.0)])])
    assert failure.recovery["replay_ms"] == 8.0


def test_a_failure_recovered_by_standbys_and_by_its_restart_shows_its_restart():
    log = FailureLog()
    failure = log.failed(2, 1, "killed", 100.0, 1.0)
    promoted = _recovery(slots=[2], promoted=True, from_standby=3, replay_ms=2.0)
    log.observe([_node(0, 1, recoveries=[promoted])])
    log.observe([_node(0, 1, recoveries=[promoted]),
                 _node(2, 2, recoveries=[_recovery(restart_ms=400.0, replay_ms=50.0, actors=1)])])
    shown = failure.as_json()
    assert [p["ms"] for p in shown["phases"] if p["name"] in ("restart", "replay")] == [400.0, 50.0]
    assert shown["promoted"] and shown["from_standby"] == 3 and shown["actors"] == 1


def test_the_log_keeps_the_latest_failures():
    log = FailureLog(kept=3)
    for i in range(5):
        log.failed(0, i + 1, "killed", float(i), 1.0)
    assert [f.epoch for f in log.recent(10)] == [5, 4, 3]


# ---- flows ----------------------------------------------------------------------------------------

def _wordcount_nodes() -> list[node_pb2.NodeStatsReply]:
    return [
        _node(0, actors=[_operator("wc/0 source0#0", records_in_per_s=100.0, records_out_per_s=100.0),
                         _operator("wc/1 flat_map#0", ["wc/0 source0"], records_in_per_s=50.0, records_out_per_s=400.0,
                                   backlog_batches=2.0),
                         node_pb2.ActorStats(actor_id=b"x", class_name="Counter", label="not an operator")]),
        _node(1, actors=[_operator("wc/1 flat_map#1", ["wc/0 source0"], records_in_per_s=50.0,
                                   records_out_per_s=410.0, backlog_batches=1.0),
                         _operator("wc/2 fold#0", ["wc/1 flat_map"], records_out_per_s=300.0, latency_p99_ms=12.0),
                         _operator("wc/2 fold#1", ["wc/1 flat_map"], records_out_per_s=310.0, latency_p99_ms=30.0)]),
    ]


def test_operators_make_a_graph_of_stages_with_their_parallelism_edges_and_rates():
    flows = flows_of(_wordcount_nodes())
    assert list(flows) == ["wc"]
    flow = flows["wc"].as_json()
    assert [(s["name"], s["parallelism"], s["inputs"], s["slots"]) for s in flow["stages"]] == [
        ("source0", 1, [], [0]), ("flat_map", 2, ["wc/0 source0"], [0, 1]), ("fold", 2, ["wc/1 flat_map"], [1])]
    assert flow["stages"][1]["records_out_per_s"] == 810.0
    # The flow: what its source reads, what its sink emits, what waits, its worst latency.
    assert (flow["records_in_per_s"], flow["records_out_per_s"], flow["backlog_batches"]) == (100.0, 610.0, 3.0)
    assert flow["latency_p99_ms"] == 30.0 and flow["latency_p50_ms"] is None


# ---- history --------------------------------------------------------------------------------------

def _stats(nodes) -> head_pb2.ClusterStatsReply:
    return head_pb2.ClusterStatsReply(nodes=nodes)


def test_history_counts_an_actor_seen_on_another_node_incarnation_as_a_restart_and_forgets_the_gone():
    history = History(FailureLog(), window_s=100.0)
    counter = node_pb2.ActorStats(actor_id=b"c", class_name="Counter")
    history.sample(1.0, _stats([_node(0, 1, [counter])]))
    history.sample(2.0, _stats([_node(0, 1, [counter])]))
    assert history.restarts.get(b"c", 0) == 0
    history.sample(3.0, _stats([_node(0, 2, [counter])]))  # its node's next incarnation
    history.sample(4.0, _stats([_node(0, 2, [counter])]))
    history.sample(5.0, _stats([_node(3, 1, [counter])]))  # an heir, or where its standby was
    assert history.restarts[b"c"] == 2
    history.sample(200.0, _stats([]))
    assert b"c" not in history.restarts


def test_history_keeps_each_flow_s_series_over_its_window_and_names_the_flows_a_failure_touched():
    log = FailureLog()
    history = History(log, window_s=10.0)
    for t in range(15):
        history.sample(float(t), _stats(_wordcount_nodes()))
    columns = history.flow_columns("wc")
    assert columns["t"] == [float(t) for t in range(4, 15)]  # ten seconds back from the last
    assert columns["records_out_per_s"][-1] == 610.0
    assert history.flow_columns("wc", since=12.0)["t"] == [12.0, 13.0, 14.0]
    log.failed(1, 1, "killed", 15.0, 1.0)
    log.failed(7, 1, "killed", 15.0, 1.0)
    history.sample(16.0, _stats(_wordcount_nodes()[:1]))
    assert [f.flows for f in log.recent(2)] == [[], ["wc"]]
    # A flow gone from a node long before its failure was not touched by it; a flow gone from the
    # whole window is forgotten.
    log.failed(1, 2, "killed", 16.0 + 60.0, 1.0)
    history.sample(16.0 + 60.0, _stats([]))
    assert log.recent(1)[0].flows == [] and history.flow_columns("wc") == {"t": []}


def test_the_lineage_page_shows_each_node_s_stash_and_each_driver_s():
    node = _node(0, 2)
    node.lineage.CopyFrom(node_pb2.LineageStats(stash_size=3, flushed=10, store_bytes_written=1000, store_writes=2))
    driver = head_pb2.DriverLineage(address="127.0.0.1:5000",
                                    lineage=node_pb2.LineageStats(stash_size=7, flushed=4, store_bytes_written=600))
    stats = head_pb2.ClusterStatsReply(nodes=[node, _node(1)], drivers=[driver])  # node 1 logs no lineage
    history = History(FailureLog(), window_s=100.0)
    history.sample(1.0, stats)
    page = pages.lineage(stats, history, now=1.0)
    rows = {p["process"]: p for p in page["processes"]}
    assert list(rows) == ["node 0", "driver 127.0.0.1:5000"]
    assert (rows["node 0"]["epoch"], rows["node 0"]["bytes_per_task"], rows["node 0"]["specs_per_write"]) == (2, 100, 5)
    assert rows["driver 127.0.0.1:5000"]["epoch"] is None and rows["driver 127.0.0.1:5000"]["bytes_per_task"] == 150
    key = rows["driver 127.0.0.1:5000"]["key"]
    assert page["series"][f"stash {key}"] == [7] and page["series"]["stash 0"] == [3]


def test_a_series_leaves_a_gap_where_a_name_had_no_value():
    series = Series()
    series.add(1.0, {"a": 1.0})
    series.add(2.0, {"a": 2.0, "b": 5.0})
    assert series.columns() == {"t": [1.0, 2.0], "a": [1.0, 2.0], "b": [None, 5.0]}


# ---- store shards and the door --------------------------------------------------------------------

def test_a_shard_s_info_gives_its_memory_keys_rates_and_replication_lag():
    info = {"used_memory": 2048, "instantaneous_ops_per_sec": 120, "instantaneous_input_kbps": 3.5,
            "master_repl_offset": 1000, "db0": {"keys": 7, "expires": 0}, "db1": {"keys": 3},
            "slave0": {"ip": "127.0.0.1", "port": 7001, "state": "online", "offset": 900, "lag": 0},
            "slave1": {"ip": "127.0.0.1", "port": 7002, "state": "online", "offset": 1000, "lag": 0}}
    row = pages.shard(head_pb2.StoreShard(address="a:1", replicas=["r:1", "r:2"]), info)
    assert (row["used_memory_bytes"], row["keys"], row["ops_per_s"], row["write_kb_per_s"]) == (2048, 10, 120, 3.5)
    assert row["replication_lag_bytes"] == 100
    assert pages.shard(head_pb2.StoreShard(address="a:1"), {"used_memory": 1})["replication_lag_bytes"] is None
    assert pages.shard(head_pb2.StoreShard(address="a:1"), "unreachable: timeout")["error"] == "unreachable: timeout"


def _request(**headers: str):
    return make_mocked_request("GET", "/", headers=headers)


def test_the_door_lets_in_its_cookie_or_the_token_as_a_bearer_and_nothing_else():
    door = Door("s3cret-token", 8265, secure=False)
    assert door.is_token("s3cret-token") and not door.is_token("s3cret-tokem") and not door.is_token("")
    cookie = door.admit(web.Response()).cookies[door.cookie_name]
    assert cookie.value != "s3cret-token" and cookie["httponly"] and cookie["samesite"] == "Lax"
    assert not cookie["secure"]  # plain HTTP (loopback): a Secure cookie would never come back
    assert door.lets_in(_request(Cookie=f"{door.cookie_name}={cookie.value}"))
    assert door.lets_in(_request(Authorization="Bearer s3cret-token"))
    for refused in ({}, {"Cookie": f"{door.cookie_name}=s3cret-token"},
                    {"Cookie": f"actorrt_dashboard_1={cookie.value}"},  # another port's dashboard
                    {"Authorization": "Bearer s3cret-tokem"}, {"Authorization": "Basic s3cret-token"}):
        assert not door.lets_in(_request(**refused)), refused
    assert not door.is_token("caf\udce9")  # bytes that were not UTF-8, as aiohttp decodes them: refused, no error
    assert Door("s3cret-token", 8265, secure=True).admit(web.Response()).cookies[door.cookie_name]["secure"]


def test_nan_and_infinite_metrics_never_reach_the_pages():
    nodes = [_node(0, actors=[_operator("f/0 source0#0", records_in_per_s=float("nan"), records_out_per_s=5.0,
                                        latency_p99_ms=float("inf"))])]
    history = History(FailureLog())
    history.sample(1.0, _stats(nodes))
    snapshot = pages.snapshot(_stats(nodes), history, {"heartbeats": {}}, {}, 2.0)
    assert snapshot["actors"][0]["metrics"] == {"records_out_per_s": 5.0}
    json.dumps(snapshot, allow_nan=False)  # raises on NaN or infinity
