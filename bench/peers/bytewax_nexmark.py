"""Nexmark's queries of bench/nexmark.py on Bytewax (``bytewax==0.21.1``), for comparison.

Run by bench/nexmark.py in the peers' environment (scripts/setup-peers.sh), as
``python -m bytewax.run bench/peers/bytewax_nexmark.py:flow -w 1`` with the parameters in the
environment: the query ``QUERY``, ``COUNT`` events of the stream of ``SEED`` at ``RATE`` events per
second of event time. The events are made by the same generator as actorrt's (its module file is
loaded alone: the peers' environment has no actorrt), in the source, as actorrt's source makes
them. It writes ``OUT``: the wall-clock times of the first batch and of the end, and the number of
outputs.

Each query says what actorrt's says (``actorrt/streaming/nexmark_queries.py``). Q4 and Q6 are not
here: their winning bids close each auction at its expiry in event time, a per-key event-time
timer, and Bytewax 0.21 has event time only inside its window operators. Q5's second half (the
most bids per window) runs as a ``fold_final``, at the end of the input.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bytewax.operators as op
import bytewax.operators.windowing as win
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition

_spec = importlib.util.spec_from_file_location(
    "nexmark", Path(__file__).parents[2] / "actorrt" / "streaming" / "nexmark.py")
nexmark = importlib.util.module_from_spec(_spec)
sys.modules["nexmark"] = nexmark  # (its dataclasses look their module up)
_spec.loader.exec_module(nexmark)

QUERY = os.environ["QUERY"]
COUNT = int(os.environ["COUNT"])
SEED = int(os.environ.get("SEED", "0"))
RATE = float(os.environ["RATE"])
OUT = Path(os.environ["OUT"])
BATCH = 1000
STARTED: list[float] = []


class Events(StatefulSourcePartition):
    def __init__(self, made: int | None) -> None:
        self.n = made or 0
        self.generator = nexmark.Generator(SEED, RATE)

    def next_batch(self) -> list:
        if not STARTED:
            STARTED.append(time.time())
        if self.n >= COUNT:
            raise StopIteration
        end = min(COUNT, self.n + BATCH)
        out = list(self.generator.events(end - self.n, self.n))
        self.n = end
        return out

    def snapshot(self) -> int:
        return self.n


class NexmarkEvents(FixedPartitionedSource):
    def list_parts(self) -> list[str]:
        return ["events"]

    def build_part(self, step_id, for_part, resume_state):
        return Events(resume_state)


class Counted(StatelessSinkPartition):
    def __init__(self) -> None:
        self.outputs = 0

    def write_batch(self, items) -> None:
        self.outputs += len(items)

    def close(self) -> None:
        OUT.write_text(f"{STARTED[0] if STARTED else float('nan')} {time.time()} {self.outputs}\n")


class Count(DynamicSink):
    def build(self, step_id, worker_index, worker_count):
        return Counted()


def _is(kind):
    return lambda event: isinstance(event, kind)


def _at(event) -> datetime:
    return datetime.fromtimestamp(event.date_time, tz=UTC)


ALIGN = datetime(2015, 7, 15, tzinfo=UTC)  # window starts at multiples of their size, as actorrt's
CLOCK = win.EventClock(_at, wait_for_system_duration=timedelta(0))


class SellerJoin:
    """Q3's join per seller, as actorrt's: the person once seen, auctions that came before them."""

    @staticmethod
    def step(state, tagged):
        person, waiting = state or (None, ())
        side, event = tagged
        if side == "person":
            return (event, ()), [(event.name, event.city, event.state, a.id) for a in waiting]
        if person is None:
            return (None, (*waiting, event)), []
        return state, [(person.name, person.city, person.state, event.id)]


def _more(hot, counted):
    auction, count = counted
    if hot is None or count > hot[0]:
        return count, (auction,)
    if count == hot[0]:
        return count, tuple(sorted((*hot[1], auction)))
    return hot


def _higher(best, bid):
    if best is None or (bid.price, -bid.auction, -bid.bidder) > (best.price, -best.auction, -best.bidder):
        return bid
    return best


def build() -> Dataflow:
    flow = Dataflow(f"nexmark-{QUERY}")
    events = op.input("events", flow, NexmarkEvents())
    bids = op.filter("bids", events, _is(nexmark.Bid))
    if QUERY == "q0":
        out = op.map("same", events, lambda e: e)
    elif QUERY == "q1":
        out = op.map("euros", bids, lambda b: (b.auction, b.bidder, round(b.price * 0.908), b.date_time))
    elif QUERY == "q2":
        out = op.map("project", op.filter("selected", bids, lambda b: b.auction % 123 == 0),
                     lambda b: (b.auction, b.price))
    elif QUERY == "q3":
        persons = op.filter("states", op.filter("persons", events, _is(nexmark.Person)),
                            lambda p: p.state in ("OR", "ID", "CA"))
        auctions = op.filter("category", op.filter("auctions", events, _is(nexmark.Auction)),
                             lambda a: a.category == 10)
        tagged = op.merge("both", op.map("tag-p", persons, lambda p: (str(p.id), ("person", p))),
                          op.map("tag-a", auctions, lambda a: (str(a.seller), ("auction", a))))
        out = op.stateful_flat_map("join", tagged, SellerJoin.step)
    elif QUERY == "q5":
        counts = win.count_window("bids-per-auction", bids, CLOCK,
                                  win.SlidingWindower(timedelta(seconds=10), timedelta(seconds=2), ALIGN),
                                  lambda b: str(b.auction))
        by_window = op.map("by-window", counts.down, lambda kv: (str(kv[1][0]), (kv[0], kv[1][1])))
        out = op.fold_final("hottest", by_window, lambda: None, _more)
    elif QUERY == "q7":
        keyed = op.key_on("one-key", bids, lambda b: "0")
        out = win.fold_window("highest", keyed, CLOCK, win.TumblingWindower(timedelta(seconds=10), ALIGN),
                              lambda: None, _higher, lambda a, b: a).down
    elif QUERY == "q8":
        persons = op.key_on("person-id", op.filter("persons", events, _is(nexmark.Person)), lambda p: str(p.id))
        auctions = op.key_on("seller", op.filter("auctions", events, _is(nexmark.Auction)), lambda a: str(a.seller))
        joined = win.join_window("new-sellers", CLOCK, win.TumblingWindower(timedelta(seconds=10), ALIGN),
                                 persons, auctions, insert_mode="first", emit_mode="final")
        out = op.filter_map("both", joined.down,
                            lambda kv: (kv[1][1][0].id, kv[1][1][0].name, kv[1][0])
                            if kv[1][1][0] is not None and kv[1][1][1] is not None else None)
    else:
        raise SystemExit(f"bytewax_nexmark: no query {QUERY} here (Q4 and Q6 need event-time timers per key)")
    op.output("count", out, Count())
    return flow


flow = build()
