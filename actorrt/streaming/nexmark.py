"""Nexmark's events: the persons, auctions and bids of an online auction site, generated
deterministically, for the queries the streaming literature measures engines on (Beam's and
Flink's Nexmark suites, the Clonos paper).

``events(count)`` yields the first ``count`` events of a seeded stream in Nexmark's proportions (of
every 50 events: 1 person, 3 auctions, 46 bids), each with an event time (``date_time``, seconds)
spaced by the configured rate. As in Nexmark's generator:

- ids start at 1000 (categories at 10), so joins find matches even on small inputs;
- an auction is opened by a recent person, a quarter of the time by one of few "hot" sellers, and
  stays open for about as long as it takes to open ``IN_FLIGHT_AUCTIONS`` more;
- a bid goes half of the time to the newest "hot" auction, else to one of the auctions opened
  lately; three bids in four come from a hot bidder, the rest from a recent person.

Event ``n`` depends on the seed and ``n`` alone (``event(n)``), so instances of a source can each
make their own share of one stream.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
CATEGORIES = 5
ACTIVE_PERSONS = 1000  # sellers and bidders are among the newest persons
IN_FLIGHT_AUCTIONS = 100  # bids go to the newest auctions
HOT_AUCTION_RATIO = 2  # one bid in this many goes to the hot auction
HOT_BIDDER_RATIO = 4  # all but one bid in this many come from a hot bidder
HOT_SELLER_RATIO = 4  # all but one auction in this many are opened by a hot seller
BASE_TIME_S = 1_436_918_400.0  # Nexmark's first event time: 2015-07-15 00:00 UTC
CHANNELS = 10_000
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
          "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")


@dataclass(frozen=True)
class Person:
    id: int
    name: str
    email: str
    credit_card: str
    city: str
    state: str
    date_time: float


@dataclass(frozen=True)
class Auction:
    id: int
    item_name: str
    description: str
    initial_bid: int  # cents
    reserve: int  # cents
    date_time: float
    expires: float
    seller: int
    category: int


@dataclass(frozen=True)
class Bid:
    auction: int
    bidder: int
    price: int  # cents
    channel: str
    url: str
    date_time: float


Event = Person | Auction | Bid


@dataclass(frozen=True)
class Generator:
    """The stream of one ``seed``, ``rate`` events per second of event time."""

    seed: int = 0
    rate: float = 10_000.0

    def event(self, n: int) -> Event:
        """Event number ``n`` (from 0)."""
        if n < 0:
            raise ValueError(f"event numbers start at 0, not {n}")
        rng = random.Random(self.seed * 1_000_003 + n)
        date_time = BASE_TIME_S + n / self.rate
        offset = n % PROPORTION
        if offset < PERSON_PROPORTION:
            return self._person(_persons_before(n) + FIRST_PERSON_ID, date_time, rng)
        if offset < PERSON_PROPORTION + AUCTION_PROPORTION:
            return self._auction(n, date_time, rng)
        return self._bid(n, date_time, rng)

    def events(self, count: int, start: int = 0) -> Iterator[Event]:
        """Events ``start`` to ``start + count - 1``, in order."""
        return (self.event(n) for n in range(start, start + count))

    @staticmethod
    def _person(person_id: int, date_time: float, rng: random.Random) -> Person:
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        return Person(person_id, f"{first} {last}", f"{first.lower()}@{last.lower()}.com",
                      " ".join(f"{rng.randrange(10_000):04d}" for _ in range(4)), rng.choice(CITIES),
                      rng.choice(STATES), date_time)

    def _auction(self, n: int, date_time: float, rng: random.Random) -> Auction:
        auction_id = FIRST_AUCTION_ID + _auctions_before(n)
        initial_bid = _price(rng)
        # Open for about as long as IN_FLIGHT_AUCTIONS more auctions take to open, give or take half.
        lifetime = IN_FLIGHT_AUCTIONS * PROPORTION / AUCTION_PROPORTION / self.rate
        return Auction(auction_id, f"item-{auction_id}", f"description of item {auction_id}", initial_bid,
                       initial_bid + _price(rng), date_time, date_time + lifetime * rng.uniform(0.5, 1.5),
                       _recent_person(n, rng, HOT_SELLER_RATIO), FIRST_CATEGORY_ID + rng.randrange(CATEGORIES))

    @staticmethod
    def _bid(n: int, date_time: float, rng: random.Random) -> Bid:
        newest = FIRST_AUCTION_ID + _auctions_before(n) - 1
        if rng.randrange(HOT_AUCTION_RATIO) > 0:
            auction = max(FIRST_AUCTION_ID, newest // HOT_AUCTION_RATIO * HOT_AUCTION_RATIO)
        else:
            auction = rng.randint(max(FIRST_AUCTION_ID, newest - IN_FLIGHT_AUCTIONS + 1), newest)
        channel = rng.randrange(CHANNELS)
        return Bid(auction, _recent_person(n, rng, HOT_BIDDER_RATIO), _price(rng), f"channel-{channel}",
                   f"https://www.nexmark.com/item.htm?channel={channel}&auction={auction}", date_time)


def events(count: int, seed: int = 0, rate: float = 10_000.0) -> Iterator[Event]:
    """The first ``count`` events of the stream of ``seed`` (``rate`` events per second)."""
    return Generator(seed, rate).events(count)


def _persons_before(n: int) -> int:
    """Persons among events 0 .. n-1."""
    blocks, offset = divmod(n, PROPORTION)
    return blocks * PERSON_PROPORTION + min(offset, PERSON_PROPORTION)


def _auctions_before(n: int) -> int:
    """Auctions among events 0 .. n-1."""
    blocks, offset = divmod(n, PROPORTION)
    return blocks * AUCTION_PROPORTION + min(max(offset - PERSON_PROPORTION, 0), AUCTION_PROPORTION)


def _recent_person(n: int, rng: random.Random, hot_ratio: int) -> int:
    """A person made before event ``n``: a hot one (few ids), except one time in ``hot_ratio``."""
    newest = FIRST_PERSON_ID + _persons_before(n) - 1
    if rng.randrange(hot_ratio) > 0:
        return max(FIRST_PERSON_ID, newest // hot_ratio * hot_ratio)
    return rng.randint(max(FIRST_PERSON_ID, newest - ACTIVE_PERSONS + 1), newest)


def _price(rng: random.Random) -> int:
    """A price in cents, spread over six orders of magnitude as Nexmark's are."""
    return round(10 ** (rng.random() * 6) * 100)


class NexmarkSource:
    """Nexmark's events as a pulled source (``Dataflow.source(NexmarkSource(...))``): a range is
    event numbers, and reading it makes those events, the same every time (a replay or a rollback
    makes them again). ``paced_from``: a wall-clock time from which event ``n`` is due at
    ``paced_from + n / rate`` (a live stream at ``rate``); None: every event is there at once.
    ``share=(i, n)``: only events ``i``, ``i + n``, ``i + 2n``... of the first ``count``, so that
    ``n`` sources (unioned) make the stream between them, each in its own operator."""

    def __init__(self, count: int, seed: int = 0, rate: float = 10_000.0, paced_from: float | None = None,
                 share: tuple[int, int] = (0, 1)) -> None:
        first, every = share
        if not 0 <= first < every:
            raise ValueError(f"share=(i, n) takes 0 <= i < n, not {share!r}")
        self.count, self.generator, self.paced_from = count, Generator(seed, rate), paced_from
        self.first, self.every = first, every
        self.mine = max(0, -(-(count - first) // every))  # events of this share
        self.poll_s = 0.001  # asked again this soon when nothing is due

    def next_range(self, after: int | None, limit: int) -> tuple[int, int, int] | None:
        """Positions in this share (the k-th is event ``first + k * every``)."""
        start = 0 if after is None else after + 1
        due = self.mine
        if self.paced_from is not None:
            newest = int((time.time() - self.paced_from) * self.generator.rate)  # the newest event due
            due = min(due, max(0, (newest - self.first) // self.every + 1))
        end = min(due, start + limit)
        return (start, end - 1, end - start) if end > start else None

    def read(self, found: tuple[int, int, int]) -> list[Event]:
        first, last, _ = found
        return [self.generator.event(self.first + k * self.every) for k in range(first, last + 1)]

    def ended(self, after: int | None) -> bool:
        return (0 if after is None else after + 1) >= self.mine
