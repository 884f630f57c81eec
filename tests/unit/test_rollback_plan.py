"""Which nodes go back after a failure under ft="checkpoint": the frontier's answer, a node at a time."""

from __future__ import annotations

from pathlib import Path

from actorrt.cluster.rollback_round import checkpoint_cuts
from actorrt.lineage import checkpoints
from actorrt.lineage.frontier import Cut
from actorrt.lineage.rollback_plan import Present, Restorable, checkpoint_cut, plan, reported_cut
from actorrt.rpc import checkpoint_pb2, node_pb2
from actorrt.rpc import common_pb2 as pb

SRC, A, B, C, DRIVER, TIMER = b"src", b"a", b"b", b"c", b"driver", b"node process"


def chain(answered: int = 0) -> tuple[dict, dict]:
    """driver -> src (slot 0) -> a (slot 1) -> b (slot 2): four calls per hop before the global
    checkpoint, ten by now; src keeps its calls to a from the fifth on (a's checkpoint covers four)."""
    checkpoint = {SRC: Restorable(0, Cut(received={DRIVER: 4}, sent={A: 4})),
                  A: Restorable(1, Cut(received={SRC: 4}, sent={B: 4})),
                  B: Restorable(2, Cut(received={A: 4}))}
    present = {DRIVER: Present(-1, Cut(sent={SRC: 10}, answered={SRC: answered})),
               SRC: Present(0, Cut(received={DRIVER: 10}, sent={A: 10}), kept_from={A: 5}),
               A: Present(1, Cut(received={SRC: 10}, sent={B: 10}), kept_from={B: 5}),
               B: Present(2, Cut(received={A: 10}))}
    return checkpoint, present


def test_a_failed_node_takes_back_only_the_nodes_that_took_its_output() -> None:
    checkpoint, present = chain()
    del present[A]
    got = plan(checkpoint, present, failed={1})
    assert got.everyone == "" and got.restart == {1, 2}
    assert got.frontier.kept == {SRC, DRIVER}
    assert [(r.sender, r.receiver, r.first, r.last, r.source) for r in got.frontier.resends] == [
        (SRC, A, 5, 10, "sender")]


def test_the_last_node_of_a_chain_goes_back_alone() -> None:
    checkpoint, present = chain()
    del present[B]
    got = plan(checkpoint, present, failed={2})
    assert got.restart == {2} and got.everyone == ""


def test_a_sender_that_gave_up_its_copies_goes_back_with_its_receiver() -> None:
    """src let its calls to a go up to the eighth (a newer checkpoint of a's covered them, which
    the global checkpoint does not): a's restore could not get 5..8 again."""
    checkpoint, present = chain()
    del present[A]
    present[SRC] = Present(0, present[SRC].cut, kept_from={A: 9})
    got = plan(checkpoint, present, failed={1})
    assert got.restart == {0, 1, 2}


def test_a_caller_that_took_an_answer_goes_back_and_a_driver_that_did_takes_everyone() -> None:
    checkpoint, present = chain()
    del present[A]
    present[SRC] = Present(0, Cut(received={DRIVER: 10}, sent={A: 10}, answered={A: 7}), kept_from={A: 5})
    assert plan(checkpoint, present, failed={1}).restart == {0, 1, 2}
    checkpoint, present = chain(answered=6)  # the driver took src's answer to its sixth call
    del present[A]
    present[SRC] = Present(0, present[SRC].cut, kept_from={A: 9})  # src goes back, and the driver with it
    got = plan(checkpoint, present, failed={1})
    assert "driver" in got.everyone


def test_an_acknowledged_driver_stays_where_it_is() -> None:
    checkpoint, present = chain(answered=4)  # answers before the checkpoint: src's cut gave them
    del present[A]
    present[SRC] = Present(0, present[SRC].cut, kept_from={A: 9})
    assert plan(checkpoint, present, failed={1}).everyone == ""


def test_a_node_goes_back_whole() -> None:
    """Node 2 hosts b and c. b took a's output, so node 2 goes back, c with it; c's checkpoint
    sent src one call of the three src ran, so src's node goes back too."""
    checkpoint, present = chain()
    checkpoint[C] = Restorable(2, Cut(sent={SRC: 1}))
    present[C] = Present(2, Cut(sent={SRC: 3}))
    present[SRC] = Present(0, Cut(received={DRIVER: 10, C: 3}, sent={A: 10}), kept_from={A: 5})
    del present[A]
    assert plan(checkpoint, present, failed={1}).restart == {0, 1, 2}


def test_an_actor_made_after_the_checkpoint_on_a_survivor_stays() -> None:
    checkpoint, present = chain()
    present[C] = Present(0, Cut(received={SRC: 2}))  # src's calls to it are not in the checkpoint
    present[SRC] = Present(0, Cut(received={DRIVER: 10}, sent={A: 10, C: 2}), kept_from={A: 5, C: 3})
    del present[B]
    got = plan(checkpoint, present, failed={2})
    assert got.restart == {2} and C in got.frontier.kept


def test_calls_from_outside_any_actor_never_move_anyone_back() -> None:
    checkpoint, present = chain()
    present[B] = Present(2, Cut(received={A: 10, TIMER: 3}), outside=frozenset({TIMER}))
    del present[A]
    assert plan(checkpoint, present, failed={1}).restart == {1, 2}


def test_an_actor_nobody_knows_takes_everyone_back() -> None:
    """b took calls (or a's caller answers) from an actor made after the checkpoint on the failed
    node: it is lost, and what it did nobody can tell."""
    lost = b"made after the checkpoint"
    checkpoint, present = chain()
    present[B] = Present(2, Cut(received={A: 10, lost: 3}))
    del present[A]
    assert "nobody knows" in plan(checkpoint, present, failed={1}).everyone
    checkpoint, present = chain()
    present[SRC] = Present(0, Cut(received={DRIVER: 10}, sent={A: 10, lost: 1}, answered={lost: 1}), kept_from={A: 5})
    del present[A]
    assert "nobody knows" in plan(checkpoint, present, failed={1}).everyone


def test_what_the_frontier_does_not_see_takes_everyone_back() -> None:
    checkpoint, present = chain()
    del present[B]
    got = plan(checkpoint, present, failed={2}, opaque={0})
    assert "does not see" in got.everyone


def test_a_checkpoint_an_actor_cannot_go_back_to_takes_everyone() -> None:
    """b's checkpoint took more of a than a's checkpoint had sent: not a consistent checkpoint."""
    checkpoint, present = chain()
    checkpoint[B] = Restorable(2, Cut(received={A: 5}))
    del present[A]
    assert "before the checkpoint" in plan(checkpoint, present, failed={1}).everyone


def test_cuts_read_from_a_checkpoint_and_a_report() -> None:
    ckpt = checkpoint_pb2.ActorCheckpoint(
        senders=[checkpoint_pb2.SenderProgress(sender=SRC, last_counter=4)],
        counters=[checkpoint_pb2.SubmitCounter(receiver=B, count=6)],
        pending=[checkpoint_pb2.PendingTask(spec=pb.TaskSpec(receiver=B, task_counter=n)) for n in (6, 5)])
    assert checkpoint_cut(ckpt) == Cut(received={SRC: 4}, sent={B: 6}, resends={B: 5})
    count = node_pb2.PeerCount
    report = node_pb2.ActorCut(actor=A, slot=1, received=[count(peer=SRC, count=9)], sent=[count(peer=B, count=8)],
                               answered=[count(peer=B, count=2)], kept_from=[count(peer=B, count=5)])
    report.outside.append(DRIVER)
    assert reported_cut(report) == Present(1, Cut(received={SRC: 9}, sent={B: 8}, answered={B: 2}), {B: 5},
                                           frozenset({DRIVER}))


def test_a_global_checkpoint_under_way_cannot_be_gone_back_to_alone(tmp_path) -> None:
    """Once an actor's next checkpoint file is written, others may have dropped what a restore of
    the last global checkpoint needs: every node goes back instead."""
    taken = []
    for seq in (1, 2):
        creation = pb.ActorCreation(slot=1, nondeterministic=True)
        ckpt = checkpoint_pb2.ActorCheckpoint(actor_id=A, seq=seq, creation=creation,
                                              senders=[checkpoint_pb2.SenderProgress(sender=SRC, last_counter=seq)])
        path = checkpoints.checkpoint_path(tmp_path, A, seq, "n1")
        path.parent.mkdir(parents=True, exist_ok=True)
        checkpoints.write_checkpoint(path, ckpt)
        taken.append({"actor_id": A.hex(), "seq": seq, "path": str(path)})
    assert checkpoint_cuts(tmp_path) == ({}, "no global checkpoint was taken yet", 0)
    checkpoints.write_manifest(tmp_path, taken[:1])
    assert checkpoint_cuts(tmp_path) == ({}, "a global checkpoint was being taken", 0)
    assert checkpoints.latest_restorable(tmp_path)["id"] == 1
    checkpoints.write_manifest(tmp_path, taken[1:])
    assert checkpoint_cuts(tmp_path) == ({A: Restorable(1, Cut(received={SRC: 2}))}, "", 2)
    Path(taken[0]["path"]).unlink()  # dropped once two newer ones were taken
    checkpoints.write_manifest(tmp_path, [{**taken[0], "seq": 3, "path": str(tmp_path / "gone")}])
    assert checkpoints.latest_restorable(tmp_path)["id"] == 2  # the newest whose files are all there


# ---- selective re-execution -----------------------------------------------------------------------

W, V = b"worker", b"other worker"
FROM_DRIVER = frozenset({f"from-{DRIVER.hex()}"})


def training(**worker: object) -> tuple[dict, dict]:
    """A driver's iterations to two workers (slots 1 and 0), nine each; the checkpoint after the
    fourth; the driver took every answer (the gradients) and keeps its calls since the checkpoint."""
    checkpoint = {W: Restorable(1, Cut(received={DRIVER: 4}), **worker),
                  V: Restorable(0, Cut(received={DRIVER: 4}), **worker)}
    present = {DRIVER: Present(-1, Cut(sent={W: 9, V: 9}, answered={W: 9, V: 9}), kept_from={W: 5, V: 5}),
               V: Present(0, Cut(received={DRIVER: 9}), outside=frozenset({DRIVER}))}
    return checkpoint, present


def test_a_deterministic_worker_is_done_again_and_the_driver_and_the_others_keep_their_iterations() -> None:
    checkpoint, present = training(deterministic=True, since=FROM_DRIVER)
    got = plan(checkpoint, present, failed={1})
    assert got.everyone == "" and got.restart == {1}
    assert got.frontier.replayed == {W} and got.frontier.kept == {DRIVER, V}
    assert got.first == {W: (DRIVER, 9)}  # restored, it takes the driver's calls up to the ninth first


def test_a_worker_that_took_nothing_since_its_checkpoint_stays_there() -> None:
    checkpoint, present = training(deterministic=True)
    present[DRIVER] = Present(-1, Cut(sent={W: 4, V: 9}, answered={W: 4, V: 9}), kept_from={W: 5, V: 5})
    got = plan(checkpoint, present, failed={1})
    assert got.everyone == "" and got.restart == {1} and got.first == {}


def test_a_worker_that_may_not_do_the_same_again_takes_everyone_back() -> None:
    for worker in ({"deterministic": False, "since": FROM_DRIVER},  # created nondeterministic
                   {"deterministic": True, "since": FROM_DRIVER | {"more"}}):  # took another's calls, or called
        checkpoint, present = training(**worker)
        assert "driver" in plan(checkpoint, present, failed={1}).everyone
    checkpoint, present = training(deterministic=True, since=FROM_DRIVER)
    present[DRIVER] = Present(-1, present[DRIVER].cut, kept_from={W: 7, V: 5})  # calls 5 and 6 are gone
    assert "driver" in plan(checkpoint, present, failed={1}).everyone


def test_calls_another_sent_and_the_worker_had_not_taken_wait_for_the_driver_s() -> None:
    checkpoint, present = training(deterministic=True, since=FROM_DRIVER)
    present[V] = Present(0, Cut(received={DRIVER: 9}, sent={W: 1}), outside=frozenset({DRIVER}))
    got = plan(checkpoint, present, failed={1})
    assert got.everyone == "" and got.first == {W: (DRIVER, 9)}


def test_a_stage_that_called_since_its_checkpoint_is_not_done_again() -> None:
    checkpoint, present = chain()
    checkpoint[A] = Restorable(1, checkpoint[A].cut, deterministic=True, since=frozenset({f"from-{SRC.hex()}", "more"}))
    del present[A]
    got = plan(checkpoint, present, failed={1})
    assert got.restart == {1, 2} and got.frontier.replayed == set()
