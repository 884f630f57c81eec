"""Nexmark's queries computed in plain Python over a list of events, with nothing of the engine:
the answers the dataflows of ``actorrt.streaming.nexmark_queries`` are checked against. Each
oracle and each ``answer`` (what a run's outputs say) is a ``Counter``, so duplicates and losses
both show."""

from __future__ import annotations

import collections
from dataclasses import replace
from typing import Any

from actorrt.streaming import nexmark_queries as queries
from actorrt.streaming.nexmark import Auction, Bid, Event, Person


def _starts(window_s: float, t: float) -> float:
    return t // window_s * window_s


def highest_per_window(events: list[Event], window_s: float) -> collections.Counter:
    best: dict[float, Bid] = {}
    for bid in (e for e in events if isinstance(e, Bid)):
        start = _starts(window_s, bid.date_time)
        held = best.get(start)
        if held is None or (bid.price, -bid.auction, -bid.bidder) > (held.price, -held.auction, -held.bidder):
            best[start] = bid
    return collections.Counter(best.items())


def local_items(events: list[Event]) -> collections.Counter:
    persons = {e.id: e for e in events if isinstance(e, Person)}
    return collections.Counter(
        (p.name, p.city, p.state, a.id) for a in events if isinstance(a, Auction) and a.category == queries.Q3_CATEGORY
        for p in [persons[a.seller]] if p.state in queries.Q3_STATES)


def winners(events: list[Event]) -> list[tuple[Auction, Bid]]:
    """Each auction's winning bid, in closing order (then by auction id)."""
    bids: dict[int, list[Bid]] = collections.defaultdict(list)
    for bid in (e for e in events if isinstance(e, Bid)):
        bids[bid.auction].append(bid)
    won = []
    for auction in (e for e in events if isinstance(e, Auction)):
        valid = [b for b in bids[auction.id]
                 if auction.date_time <= b.date_time < auction.expires and b.price >= auction.reserve]
        if valid:  # the highest price, then the earliest, then the lowest bidder id
            won.append((auction, max(valid, key=lambda b: (b.price, -b.date_time, -b.bidder))))
    return sorted(won, key=lambda w: (w[0].expires, w[0].id))


def closing_prices(events: list[Event]) -> collections.Counter:
    prices: dict[int, list[int]] = collections.defaultdict(list)
    for auction, bid in winners(events):
        prices[auction.category].append(bid.price)
    return collections.Counter({(c, sum(p) / len(p)): 1 for c, p in prices.items()})


def hot_items(events: list[Event]) -> collections.Counter:
    window = queries.Q5_WINDOW
    counts: dict[float, collections.Counter] = collections.defaultdict(collections.Counter)
    for bid in (e for e in events if isinstance(e, Bid)):
        for start in window.starts(round(bid.date_time * 1e6)):
            counts[start / 1e6][bid.auction] += 1
    out = collections.Counter()
    for start, per_auction in counts.items():
        most = max(per_auction.values())
        out[(start, start + window.size_s, most, tuple(sorted(a for a, n in per_auction.items() if n == most)))] += 1
    return out


def seller_prices(events: list[Event]) -> collections.Counter:
    sales: dict[int, list[int]] = collections.defaultdict(list)
    for auction, bid in winners(events):
        sales[auction.seller].append(bid.price)
    return collections.Counter({(s, sum(p[-queries.Q6_LAST:]) / len(p[-queries.Q6_LAST:])): 1
                                for s, p in sales.items()})


def new_sellers(events: list[Event]) -> collections.Counter:
    window = queries.Q8_WINDOW_S
    opened = {(a.seller, _starts(window, a.date_time)) for a in events if isinstance(a, Auction)}
    return collections.Counter((p.id, p.name, _starts(window, p.date_time)) for p in events
                               if isinstance(p, Person) and (p.id, _starts(window, p.date_time)) in opened)


def oracle(name: str, events: list[Event]) -> collections.Counter:
    bids = [e for e in events if isinstance(e, Bid)]
    return {
        "q0": lambda: collections.Counter(events),
        "q1": lambda: collections.Counter(replace(b, price=round(b.price * queries.DOLLAR_TO_EURO)) for b in bids),
        "q2": lambda: collections.Counter((b.auction, b.price) for b in bids
                                          if b.auction % queries.Q2_AUCTION_MODULUS == 0),
        "q3": lambda: local_items(events),
        "q4": lambda: closing_prices(events),
        "q5": lambda: hot_items(events),
        "q6": lambda: seller_prices(events),
        "q7": lambda: highest_per_window(events, queries.Q7_WINDOW_S),
        "q8": lambda: new_sellers(events),
    }[name]()


def answer(name: str, outputs: list[Any]) -> collections.Counter:
    """What a run's outputs say, in the oracle's terms: Q4 and Q6 emit updates, the last per key
    is the answer."""
    if name == "q7":
        return collections.Counter((start, bid) for _, start, _, bid in outputs)
    if name in ("q4", "q6"):
        return collections.Counter({(key, value): 1 for key, value in dict(outputs).items()})
    return collections.Counter(outputs)


QUERIES = queries.QUERIES
