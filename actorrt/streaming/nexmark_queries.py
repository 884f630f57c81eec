"""Nexmark's queries on ``actorrt.streaming``: each takes the stream of Nexmark's events
(``nexmark.py``) and returns the stream of its results, which the caller collects or sinks.

- Q0, pass-through: every event, unchanged (what the engine costs with nothing to do);
- Q1, currency conversion: every bid, its price from dollars to euros;
- Q2, selection: ``(auction, price)`` of the bids on every ``Q2_AUCTION_MODULUS``-th auction;
- Q7, highest bid: per tumbling window of event time, the highest bid (ties: the lower auction
  id, then the lower bidder id, so that every run picks the same one).

Q3, Q4, Q5, Q6 and Q8 need a join of two inputs, or a window over windows' results.
"""

from __future__ import annotations

from dataclasses import replace

from actorrt.streaming.dataflow import Stream
from actorrt.streaming.nexmark import Bid, Event
from actorrt.streaming.plan import Tumbling

DOLLAR_TO_EURO = 0.908
Q2_AUCTION_MODULUS = 123
Q7_WINDOW_S = 10.0


def is_bid(event: Event) -> bool:
    return isinstance(event, Bid)


def _same(event: Event) -> Event:
    return event


def in_euros(bid: Bid) -> Bid:
    return replace(bid, price=round(bid.price * DOLLAR_TO_EURO))


def on_selected_auction(event: Event) -> bool:
    return isinstance(event, Bid) and event.auction % Q2_AUCTION_MODULUS == 0


def auction_and_price(bid: Bid) -> tuple[int, int]:
    return bid.auction, bid.price


def _rank(bid: Bid) -> tuple[int, int, int]:
    return bid.price, -bid.auction, -bid.bidder


def higher(best: Bid | None, bid: Bid) -> Bid:
    return bid if best is None or _rank(bid) > _rank(best) else best


def _nothing() -> None:
    return None


def _whole_stream(bid: Bid) -> int:
    return 0


def q0(events: Stream) -> Stream:
    return events.map(_same, name="q0-pass-through")


def q1(events: Stream) -> Stream:
    return events.filter(is_bid, name="q1-bids").map(in_euros, name="q1-to-euros")


def q2(events: Stream) -> Stream:
    return events.filter(on_selected_auction, name="q2-selection").map(auction_and_price, name="q2-project")


def q7(events: Stream, window_s: float = Q7_WINDOW_S, parallelism: int = 2) -> Stream:
    """Records ``(0, window start, window end, highest bid)``: one key, so one instance holds a
    window (the others have none); the events must come with their time (``EventTime``)."""
    return (events.filter(is_bid, name="q7-bids")
            .key_by(_whole_stream)
            .window(Tumbling(window_s), _nothing, higher, parallelism=parallelism, name="q7-highest"))
