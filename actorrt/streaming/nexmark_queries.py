"""Nexmark's queries on ``actorrt.streaming``: each takes the stream of Nexmark's events
(``nexmark.py``, in event time) and returns the stream of its results, which the caller collects
or sinks. As in Beam's and Flink's Nexmark suites:

- Q0, pass-through: every event, unchanged (what the engine costs with nothing to do);
- Q1, currency conversion: every bid, its price from dollars to euros;
- Q2, selection: ``(auction, price)`` of the bids on every ``Q2_AUCTION_MODULUS``-th auction;
- Q3, local item suggestion: ``(name, city, state, auction)`` for each auction in category
  ``Q3_CATEGORY`` whose seller lives in one of ``Q3_STATES`` (an incremental join of persons and
  auctions on the seller);
- Q4, average closing price per category: each auction's winning bid (the highest at or above
  the reserve while it is open, found when it closes), then per category ``(category, average)``;
- Q5, hot items: per sliding window, the auctions with the most bids ``(start, end, count,
  auctions)``;
- Q6, average selling price per seller: ``(seller, average)`` of the seller's last
  ``Q6_LAST`` winning bids (last by closing time);
- Q7, highest bid: per tumbling window of event time, the highest bid;
- Q8, monitor new users: ``(person, name, window start)`` for each person who opened an auction
  in the tumbling window they were created in (a window join).

Where results tie, a rule picks one (or all) the same way in every run, so answers can be
compared with a plain-Python computation. The joins keep state only as long as a record to come
can need it: a person as long as a seller can be that old, an auction until it closes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from actorrt.streaming.nexmark import (
    ACTIVE_PERSONS,
    AUCTION_PROPORTION,
    IN_FLIGHT_AUCTIONS,
    PROPORTION,
    Auction,
    Bid,
    Event,
    Person,
)
from actorrt.streaming.plan import Sliding, Tumbling
from actorrt.streaming.process import Context, KeyedProcess
from actorrt.streaming.streams import Stream

DOLLAR_TO_EURO = 0.908
Q2_AUCTION_MODULUS = 123
Q3_STATES = ("OR", "ID", "CA")
Q3_CATEGORY = 10
Q5_WINDOW = Sliding(10.0, 2.0)
Q6_LAST = 10
Q7_WINDOW_S = 10.0
Q8_WINDOW_S = 10.0
KINDS = ("person", "auction", "bid")


def by_kind(event: Event) -> list[tuple[str, Event]]:
    return [(type(event).__name__.lower(), event)]


def split(events: Stream) -> dict[str, Stream]:
    """The persons, auctions and bids of ``events``, as three streams (side outputs)."""
    return events.route(by_kind, KINDS, name="nexmark-split")


def seller_reach_s(rate: float) -> float:
    """How old (in event time) a person can be when they open an auction or bid, at ``rate``
    events per second: they are among the newest ``ACTIVE_PERSONS``."""
    return ACTIVE_PERSONS * PROPORTION / rate


def auction_reach_s(rate: float) -> float:
    """How long an auction can stay open, at ``rate`` events per second (1.5 times the mean)."""
    return 1.5 * IN_FLIGHT_AUCTIONS * PROPORTION / AUCTION_PROPORTION / rate


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


def _person_id(person: Person) -> int:
    return person.id


def _seller(auction: Auction) -> int:
    return auction.seller


def _auction_id(auction: Auction) -> int:
    return auction.id


def _bid_auction(bid: Bid) -> int:
    return bid.auction


def in_q3_states(person: Person) -> bool:
    return person.state in Q3_STATES


def in_q3_category(auction: Auction) -> bool:
    return auction.category == Q3_CATEGORY


class SellerJoin(KeyedProcess):
    """Q3's join, per seller: the person (once seen) and the auctions that came before them."""

    def init(self) -> tuple[Person | None, tuple[Auction, ...]]:
        return None, ()

    def on_left(self, ctx: Context, person: Person) -> Iterator[tuple[str, str, str, int]]:
        _, waiting = ctx.state
        ctx.state = person, ()
        for auction in waiting:
            yield person.name, person.city, person.state, auction.id

    def on_right(self, ctx: Context, auction: Auction) -> Iterator[tuple[str, str, str, int]]:
        person, waiting = ctx.state
        if person is None:
            ctx.state = None, (*waiting, auction)
        else:
            yield person.name, person.city, person.state, auction.id


def q3(events: Stream, rate: float, parallelism: int = 2) -> Stream:
    """A person is kept for as long as a seller can be that old (``seller_reach_s``), then forgotten."""
    kinds = split(events)
    persons = kinds["person"].filter(in_q3_states, name="q3-states")
    auctions = kinds["auction"].filter(in_q3_category, name="q3-category")
    return (persons.key_by(_person_id).connect(auctions.key_by(_seller))
            .process(SellerJoin(), parallelism=parallelism, ttl_s=1.1 * seller_reach_s(rate), name="q3-join"))


def better_bid(auction: Auction, best: Bid | None, bid: Bid) -> Bid | None:
    """The winner of ``auction`` between ``best`` and ``bid``: a bid counts while the auction is
    open and at its reserve or above; the higher price wins, then the earlier bid, then the lower
    bidder id."""
    if not (auction.date_time <= bid.date_time < auction.expires and bid.price >= auction.reserve):
        return best
    if best is None or (bid.price, -bid.date_time, -bid.bidder) > (best.price, -best.date_time, -best.bidder):
        return bid
    return best


class WinningBid(KeyedProcess):
    """Per auction: its best bid so far, and when it closes (a timer at ``expires``), the winner
    ``(auction, bid)``. Bids that came before their auction wait for it."""

    def init(self) -> tuple[Auction | None, Bid | None, tuple[Bid, ...]]:
        return None, None, ()

    def on_left(self, ctx: Context, auction: Auction) -> None:
        _, _, early = ctx.state
        best = None
        for bid in early:
            best = better_bid(auction, best, bid)
        ctx.state = auction, best, ()
        ctx.timer(auction.expires)

    def on_right(self, ctx: Context, bid: Bid) -> None:
        auction, best, early = ctx.state
        if auction is None:
            ctx.state = None, None, (*early, bid)
            return
        better = better_bid(auction, best, bid)
        if better is not best:
            ctx.state = auction, better, ()

    def on_timer(self, ctx: Context, t: float) -> Iterator[tuple[Auction, Bid]]:
        auction, best, _ = ctx.state
        if auction is not None:
            if best is not None:
                yield auction, best
            ctx.clear()


def winning_bids(events: Stream, rate: float, parallelism: int = 2) -> Stream:
    """``(auction, winning bid)`` as each auction closes (Nexmark's WinningBids, Q4's and Q6's
    first half); bids for a closed auction are kept only for twice the longest an auction is open."""
    kinds = split(events)
    return (kinds["auction"].key_by(_auction_id).connect(kinds["bid"].key_by(_bid_auction))
            .process(WinningBid(), parallelism=parallelism, ttl_s=2 * auction_reach_s(rate), name="winning-bids"))


def _category_price(won: tuple[Auction, Bid]) -> tuple[int, int]:
    return won[0].category, won[1].price


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _add_price(total: tuple[int, int], category_price: tuple[int, int]) -> tuple[int, int]:
    return total[0] + category_price[1], total[1] + 1


def _zero() -> tuple[int, int]:
    return 0, 0


def _average(keyed: tuple[Any, tuple[int, int]]) -> tuple[Any, float]:
    key, (total, count) = keyed
    return key, total / count


def q4(events: Stream, rate: float, parallelism: int = 2) -> Stream:
    """Updates ``(category, average closing price)``: a category's last is its average."""
    return (winning_bids(events, rate, parallelism).map(_category_price, name="q4-category-price")
            .key_by(_first).fold(_zero, _add_price, parallelism=parallelism, name="q4-average")
            .map(_average, name="q4-divide"))


def _count(n: int, bid: Bid) -> int:
    return n + 1


def _zero_count() -> int:
    return 0


def _window_start(counted: tuple[int, float, float, int]) -> float:
    return counted[1]


def _empty_hot() -> tuple[int, tuple[int, ...]]:
    return 0, ()


def _hotter(hot: tuple[int, tuple[int, ...]], counted: tuple[int, float, float, int]) -> tuple[int, tuple[int, ...]]:
    auction, _, _, count = counted
    if count > hot[0]:
        return count, (auction,)
    if count == hot[0]:
        return count, tuple(sorted((*hot[1], auction)))
    return hot


def _hot_items(windowed: tuple[float, float, float, tuple[int, tuple[int, ...]]]) -> tuple[float, float, int, tuple]:
    start, _, _, (count, auctions) = windowed
    return start, start + Q5_WINDOW.size_s, count, auctions


def q5(events: Stream, parallelism: int = 2) -> Stream:
    """Bids per auction per sliding window, then per window (one closes per slide) the most."""
    every = Q5_WINDOW.every_s
    return (events.filter(is_bid, name="q5-bids")
            .key_by(_bid_auction).window(Q5_WINDOW, _zero_count, _count, parallelism=parallelism, name="q5-count")
            .key_by(_window_start).window(Tumbling(every), _empty_hot, _hotter, parallelism=parallelism,
                                           name="q5-hottest")
            .map(_hot_items, name="q5-result"))


def _seller_price(won: tuple[Auction, Bid]) -> tuple[int, tuple[float, int, int]]:
    auction, bid = won
    return auction.seller, (auction.expires, auction.id, bid.price)


def _no_sales() -> tuple[tuple[float, int, int], ...]:
    return ()


def _last_sales(sales: tuple, seller_sale: tuple[int, tuple[float, int, int]]) -> tuple:
    """The seller's ``Q6_LAST`` latest sales by closing time (then auction id): the same set in any
    order of arrival."""
    return tuple(sorted((*sales, seller_sale[1]))[-Q6_LAST:])


def _average_sale(keyed: tuple[int, tuple]) -> tuple[int, float]:
    seller, sales = keyed
    return seller, sum(price for _, _, price in sales) / len(sales)


def q6(events: Stream, rate: float, parallelism: int = 2) -> Stream:
    """Updates ``(seller, average of their last Q6_LAST sales)``: a seller's last is the answer."""
    return (winning_bids(events, rate, parallelism).map(_seller_price, name="q6-seller-price")
            .key_by(_first).fold(_no_sales, _last_sales, parallelism=parallelism, name="q6-last-sales")
            .map(_average_sale, name="q6-average"))


def _new_sellers(group: tuple[int, float, float, list[Person], list[Auction]]) -> list[tuple[int, str, float]]:
    person_id, start, _, persons, auctions = group
    return [(person_id, persons[0].name, start)] if persons and auctions else []


def q8(events: Stream, parallelism: int = 2, window_s: float = Q8_WINDOW_S) -> Stream:
    """Persons and auctions by seller in the same tumbling window (a window co-group)."""
    kinds = split(events)
    return (kinds["person"].key_by(_person_id).connect(kinds["auction"].key_by(_seller))
            .window_cogroup(Tumbling(window_s), parallelism=parallelism, name="q8-window")
            .flat_map(_new_sellers, name="q8-new-sellers"))


QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8")


def query(name: str, events: Stream, rate: float, parallelism: int = 2) -> Stream:
    """Query ``name`` (``"q0"`` to ``"q8"``) on ``events``, a stream of Nexmark's events at
    ``rate`` events per second of event time (how long its joins keep state depends on it)."""
    if name in ("q3", "q4", "q6"):
        return globals()[name](events, rate, parallelism=parallelism)
    if name in ("q5", "q7", "q8"):
        return globals()[name](events, parallelism=parallelism)
    if name in ("q0", "q1", "q2"):
        return globals()[name](events)
    raise ValueError(f"Nexmark's queries are {', '.join(QUERIES)}, not {name!r}")
