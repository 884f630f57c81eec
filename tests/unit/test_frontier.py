"""The rollback frontier: named cases, and random executions checked against a brute-force
search of every choice of cuts."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorrt.lineage.frontier import Actor, Channel, Cut, Resend, consistent, cuts, solve


@dataclass
class Run:
    """An execution of actors exchanging messages over FIFO channels, with checkpoints: what the
    runtime would hand the solver after some of them fail."""

    channels: list[tuple[str, str]]
    logs: set[str] = field(default_factory=set)  # actors whose lineage is logged (their inputs are durable)
    sent: dict[tuple[str, str], int] = field(default_factory=dict)
    taken: dict[tuple[str, str], int] = field(default_factory=dict)
    answered: dict[tuple[str, str], int] = field(default_factory=dict)  # answers the sender took
    checkpoints: dict[str, list[tuple[int, Cut]]] = field(default_factory=dict)  # (step, cut)
    step: int = 0

    def send(self, s: str, r: str, n: int = 1) -> None:
        self.step += 1
        self.sent[s, r] = self.sent.get((s, r), 0) + n

    def take(self, s: str, r: str, n: int = 1) -> None:
        self.step += 1
        assert self.taken.get((s, r), 0) + n <= self.sent.get((s, r), 0), "a message is taken after it is sent"
        self.taken[s, r] = self.taken.get((s, r), 0) + n

    def answer(self, s: str, r: str, n: int = 1) -> None:
        """``s`` takes the answers to its next ``n`` calls to ``r`` (answers that say more than
        that the call ran; an acknowledgement is not counted)."""
        self.step += 1
        assert self.answered.get((s, r), 0) + n <= self.taken.get((s, r), 0), "an answer before its call ran"
        self.answered[s, r] = self.answered.get((s, r), 0) + n

    def checkpoint(self, a: str, resends: bool = True) -> None:
        """``resends``: the cut holds copies of what it sent and was not taken yet (its calls not
        yet answered), as a runtime checkpoint does."""
        self.step += 1
        self.checkpoints.setdefault(a, []).append((self.step, self.cut(a, resends)))

    def cut(self, a: str, resends: bool = True) -> Cut:
        pending = {r: self.taken.get((a, r), 0) + 1 for s, r in self.channels
                   if s == a and self.sent.get((a, r), 0) > self.taken.get((a, r), 0)}
        return Cut(received={s: self.taken.get((s, a), 0) for s, r in self.channels if r == a},
                   sent={r: self.sent.get((a, r), 0) for s, r in self.channels if s == a},
                   resends=pending if resends else {},
                   answered={r: self.answered.get((a, r), 0) for s, r in self.channels if s == a})

    def actors(self) -> set[str]:
        return {a for ch in self.channels for a in ch}

    def recovery(self, failed: set[str]) -> tuple[dict[str, Actor], list[Channel], dict[str, list[int]]]:
        """The solver's input after ``failed`` fail, and each actor's cuts' steps (START at 0)."""
        actors, steps = {}, {}
        for a in sorted(self.actors()):
            taken = self.checkpoints.get(a, [])
            mine = [cut for _, cut in taken]
            steps[a] = [0, *(step for step, _ in taken)]
            if a not in failed or a in self.logs:  # a present survives, or replay rebuilds it (and sends)
                mine.append(self.cut(a, resends=a not in failed))
                steps[a].append(self.step + 1)
            # A survivor keeps what it sent until the receiver's newest checkpoint covers it.
            kept_from = {r: (self.checkpoints[r][-1][1].received.get(a, 0) if self.checkpoints.get(r) else 0) + 1
                         for s, r in self.channels if s == a}
            actors[a] = Actor(mine, alive=a not in failed, kept_from=kept_from, replays=a in failed and a in self.logs)
        return actors, [Channel(s, r, logged=r in self.logs) for s, r in self.channels], steps


def allowed(run: Run, failed: set[str], actors: dict[str, Actor], choice: dict[str, int]) -> bool:
    """The rules, checked from the execution itself: every message a receiver keeps was sent by
    its sender's chosen state, and every one the sender's state sent and the receiver's does not
    keep is somewhere to send again (a durable log, a surviving sender that holds what the
    receiver's newest checkpoint does not cover, or the sender's checkpoint); and every answer a
    sender keeps was given by the receiver's chosen state."""
    for s, r in run.channels:
        took = cuts(actors[r])[choice[r]].received.get(s, 0)
        sender = cuts(actors[s])[choice[s]]
        made = sender.sent.get(r, 0)
        if took > made or sender.answered.get(r, 0) > took:
            return False
        if took == made or r in run.logs:
            continue
        covered = run.checkpoints[r][-1][1].received.get(s, 0) if run.checkpoints.get(r) else 0
        kept_alive = s not in failed and covered < took + 1
        in_cut = sender.resends.get(r, made + 1) <= took + 1
        # A failed sender whose lineage is logged, at its present: its replay from its newest
        # checkpoint sends again what it sent after that checkpoint.
        since = run.checkpoints[s][-1][1].sent.get(r, 0) if run.checkpoints.get(s) else 0
        replayed = s in failed and s in run.logs and choice[s] == len(cuts(actors[s])) - 1 and since < took + 1
        if not (kept_alive or in_cut or replayed):
            return False
    return True


def brute_force(run: Run, failed: set[str], actors: dict[str, Actor], channels: list[Channel]) -> list[dict[str, int]]:
    """Every allowed choice of cuts; checks the solver's own ``consistent`` agrees on each."""
    names = sorted(actors)
    found = []
    for picked in itertools.product(*(range(len(cuts(actors[a]))) for a in names)):
        choice = dict(zip(names, picked, strict=True))
        ok = allowed(run, failed, actors, choice)
        assert consistent(actors, channels, choice) == ok, choice
        if ok:
            found.append(choice)
    return found


# ---- named cases ------------------------------------------------------------------------------

def chain_with_barrier_checkpoints(logs: set[str] = frozenset(), eager: set[str] = frozenset()) -> Run:
    """src -> a -> b -> sink, ten messages per hop; a global checkpoint after the fourth, taken
    (as a barrier does) when every actor has taken what came before it; ``eager`` actors also
    checkpoint after every message they take."""
    run = Run([("src", "a"), ("a", "b"), ("b", "sink")], logs=set(logs))
    for i in range(10):
        for s, r in run.channels:
            run.send(s, r)
            run.take(s, r)
            if r in eager:
                run.checkpoint(r)
        if i == 3:
            for a in ("src", "a", "b", "sink"):
                if a not in eager:
                    run.checkpoint(a)
    return run


def test_global_checkpoints_roll_back_only_the_failed_actor_and_what_took_its_output() -> None:
    run = chain_with_barrier_checkpoints()
    actors, channels, _ = run.recovery({"b"})
    frontier = solve(actors, channels)
    assert frontier.rolled_back == {"b", "sink"}  # global rollback would take all four back
    assert frontier.kept == {"src", "a"}
    assert frontier.cut("b").received == {"a": 4} and frontier.cut("sink").received == {"b": 4}
    # a survived: it sends b's messages 5..10 again; b's own re-run sends sink's again.
    assert frontier.resends == [Resend("a", "b", 5, 10, "sender")]


def test_a_caller_that_took_an_answer_its_receiver_will_not_give_again_goes_back_too() -> None:
    """a called b after the checkpoint and took b's answer: b's re-run may answer otherwise. An
    acknowledgement (not counted in ``answered``) would leave a where it is."""
    run = chain_with_barrier_checkpoints()
    run.answer("a", "b", 6)
    actors, channels, _ = run.recovery({"b"})
    frontier = solve(actors, channels)
    assert frontier.rolled_back == {"a", "b", "sink"} and frontier.kept == {"src"}
    assert frontier.cut("a").answered == {"b": 0}  # its checkpoint had taken none


def test_an_eager_sink_goes_back_only_to_the_last_message_it_may_keep() -> None:
    run = chain_with_barrier_checkpoints(eager={"sink"})
    actors, channels, _ = run.recovery({"b"})
    frontier = solve(actors, channels)
    assert frontier.rolled_back == {"b", "sink"}
    assert frontier.cut("sink").received == {"b": 4}  # the sink's checkpoint after b's fourth message


def test_a_lineage_stash_actor_replays_and_nobody_else_moves() -> None:
    run = chain_with_barrier_checkpoints(logs={"b"})
    actors, channels, _ = run.recovery({"b"})
    frontier = solve(actors, channels)
    assert frontier.replayed == {"b"} and frontier.rolled_back == set()
    assert frontier.kept == {"src", "a", "sink"} and frontier.resends == []


def test_two_failures_at_once_roll_back_from_both() -> None:
    run = chain_with_barrier_checkpoints()
    actors, channels, _ = run.recovery({"a", "sink"})
    frontier = solve(actors, channels)
    # a's re-run may send b other messages than it took: b goes back too; src survives.
    assert frontier.rolled_back == {"a", "b", "sink"} and frontier.kept == {"src"}
    assert frontier.resends == [Resend("src", "a", 5, 10, "sender")]


def sender_checkpointed_with_messages_in_flight(resends: bool) -> Run:
    """b sent sink five messages; sink took two and checkpointed, then b checkpointed (three in
    flight: its cut holds them if ``resends``); then sink took them and b sent two more."""
    run = Run([("b", "sink")])
    run.send("b", "sink", 5)
    run.take("b", "sink", 2)
    run.checkpoint("sink")
    run.checkpoint("b", resends=resends)
    run.take("b", "sink", 3)
    run.send("b", "sink", 2)
    return run


def test_a_receiver_keeps_what_the_senders_cut_sent() -> None:
    actors, channels, _ = sender_checkpointed_with_messages_in_flight(resends=True).recovery({"b"})
    frontier = solve(actors, channels)
    assert frontier.cut("b").sent == {"sink": 5} and frontier.kept == {"sink"}  # it took 5; b's cut sent 5


def test_when_both_fail_the_senders_cut_sends_its_messages_in_flight_again() -> None:
    actors, channels, _ = sender_checkpointed_with_messages_in_flight(resends=True).recovery({"b", "sink"})
    frontier = solve(actors, channels)
    assert frontier.cut("b").sent == {"sink": 5} and frontier.cut("sink").received == {"b": 2}
    assert frontier.resends == [Resend("b", "sink", 3, 5, "cut")]


def test_without_copies_in_the_cut_the_sender_goes_back_further() -> None:
    actors, channels, _ = sender_checkpointed_with_messages_in_flight(resends=False).recovery({"b", "sink"})
    frontier = solve(actors, channels)
    # 3..5 are nowhere, so b starts again; its new run may send other messages than the two
    # sink's checkpoint took, so sink starts again too.
    assert frontier.position == {"b": 0, "sink": 0}


def test_uncoordinated_checkpoints_on_a_cycle_domino_back_to_the_start() -> None:
    run = Run([("x", "y"), ("y", "x")])
    run.send("x", "y")
    run.take("x", "y")
    run.checkpoint("y")  # y took x's first message, sent nothing
    run.send("y", "x")
    run.take("y", "x")
    run.checkpoint("x")  # x took y's first message
    run.send("x", "y")
    run.take("x", "y")
    run.send("y", "x")
    run.take("y", "x")
    actors, channels, _ = run.recovery({"y"})
    frontier = solve(actors, channels)
    assert frontier.position == {"x": 0, "y": 0}  # each checkpoint took a message the other's did not send


def test_a_logged_cycle_stops_the_domino() -> None:
    run = Run([("x", "y"), ("y", "x")], logs={"y"})
    run.send("x", "y")
    run.take("x", "y")
    run.send("y", "x")
    run.take("y", "x")
    run.checkpoint("x")
    run.send("x", "y")
    run.take("x", "y")
    actors, channels, _ = run.recovery({"y"})
    frontier = solve(actors, channels)
    assert frontier.replayed == {"y"} and frontier.kept == {"x"}


def test_a_replaying_sender_sends_again_what_it_sent_after_its_checkpoint() -> None:
    run = Run([("s", "r")], logs={"s"})
    run.send("s", "r", 3)
    run.take("s", "r", 1)
    run.checkpoint("r")
    actors, channels, _ = run.recovery({"s", "r"})
    frontier = solve(actors, channels)
    assert frontier.replayed == {"s"} and frontier.cut("r").received == {"s": 1}
    assert frontier.resends == [Resend("s", "r", 2, 3, "replay")]


def test_cuts_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="not in order"):
        solve({"a": Actor([Cut(sent={"b": 2}), Cut(sent={"b": 1})]), "b": Actor([])}, [Channel("a", "b")])


def test_a_channel_to_an_unknown_actor_is_refused() -> None:
    with pytest.raises(ValueError, match="'ghost', which is not an actor"):
        solve({"a": Actor([])}, [Channel("a", "ghost")])


# ---- random executions ------------------------------------------------------------------------

@st.composite
def runs(draw: st.DrawFn) -> tuple[Run, set[str]]:
    names = ["p", "q", "r", "s"][:draw(st.integers(2, 4))]
    pairs = [(a, b) for a in names for b in names if a != b]
    channels = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=len(pairs), unique=True))
    run = Run(channels, logs=set(draw(st.lists(st.sampled_from(names), unique=True, max_size=2))))
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["send", "take", "take", "answer", "checkpoint"]))
        if kind == "checkpoint":
            a = draw(st.sampled_from(names))
            if len(run.checkpoints.get(a, [])) < 2:  # keeps the brute force small
                run.checkpoint(a, resends=draw(st.booleans()))
            continue
        s, r = draw(st.sampled_from(channels))
        if kind == "send":
            run.send(s, r, draw(st.integers(1, 3)))
        elif kind == "answer":
            if run.taken.get((s, r), 0) > run.answered.get((s, r), 0):
                run.answer(s, r, draw(st.integers(1, run.taken[s, r] - run.answered.get((s, r), 0))))
        elif run.sent.get((s, r), 0) > run.taken.get((s, r), 0):
            run.take(s, r, draw(st.integers(1, run.sent[s, r] - run.taken.get((s, r), 0))))
    failed = set(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
    return run, failed


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(runs())
def test_the_frontier_is_the_greatest_consistent_choice(case: tuple[Run, set[str]]) -> None:
    run, failed = case
    actors, channels, _ = run.recovery(failed)
    frontier = solve(actors, channels)
    every = brute_force(run, failed, actors, channels)
    assert frontier.position in every
    for choice in every:
        assert all(choice[a] <= frontier.position[a] for a in actors), (choice, frontier.position)
    for resend in frontier.resends:  # each comes from somewhere that has it
        assert resend.source in ("log", "sender", "cut", "replay") and resend.first <= resend.last


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(runs(), st.data())
def test_a_checkpoint_more_never_moves_anyone_back(case: tuple[Run, set[str]], data: st.DataObject) -> None:
    """For actors that do not replay: a replay starts at the newest checkpoint, so one more can
    change what a replay sends again (what a checkpoint holds of its calls in flight covers it)."""
    run, failed = case
    actors, channels, steps = run.recovery(failed)
    with_all = solve(actors, channels)
    taken = [(a, i) for a in sorted(run.checkpoints) if a not in run.logs for i in range(len(run.checkpoints[a]))]
    if not taken:
        return
    a, i = data.draw(st.sampled_from(taken))
    fewer = Run(run.channels, run.logs, run.sent, run.taken, run.answered,
                {**run.checkpoints, a: run.checkpoints[a][:i] + run.checkpoints[a][i + 1:]}, run.step)
    fewer_actors, _, fewer_steps = fewer.recovery(failed)
    without = solve(fewer_actors, channels)
    for b in actors:  # compared by when each chosen cut was taken
        assert fewer_steps[b][without.position[b]] <= steps[b][with_all.position[b]]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(runs(), st.data())
def test_one_more_failure_never_moves_anyone_forward(case: tuple[Run, set[str]], data: st.DataObject) -> None:
    run, failed = case
    others = sorted(run.actors() - failed)
    if not others:
        return
    more = failed | {data.draw(st.sampled_from(others))}
    actors, channels, steps = run.recovery(failed)
    more_actors, _, more_steps = run.recovery(more)
    fewer, worse = solve(actors, channels), solve(more_actors, channels)
    for b in actors:
        assert more_steps[b][worse.position[b]] <= steps[b][fewer.position[b]]
