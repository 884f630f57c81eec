"""Nexmark's event generator (pure): deterministic, in Nexmark's proportions, every reference to
a person or an auction made earlier in the stream, event times at the configured rate."""

from __future__ import annotations

import collections
import time

import pytest

from actorrt.streaming import nexmark
from actorrt.streaming.nexmark import Auction, Bid, Generator, Person

N = 5000


def test_the_stream_of_a_seed_is_always_the_same_and_any_event_can_be_made_alone():
    first = list(nexmark.events(N, seed=7))
    assert first == list(nexmark.events(N, seed=7))
    assert first != list(nexmark.events(N, seed=8))
    generator = Generator(seed=7)
    assert [generator.event(n) for n in (4999, 17, 0)] == [first[4999], first[17], first[0]]
    assert list(generator.events(10, start=100)) == first[100:110]
    with pytest.raises(ValueError):
        generator.event(-1)


def test_persons_auctions_and_bids_come_one_three_and_forty_six_in_fifty():
    kinds = collections.Counter(type(e) for e in nexmark.events(N))
    assert kinds == {Person: N // 50, Auction: 3 * N // 50, Bid: 46 * N // 50}


def test_ids_count_up_from_1000_and_every_reference_is_to_one_made_before():
    persons: set[int] = set()
    auctions: dict[int, Auction] = {}
    for event in nexmark.events(N, seed=3):
        if isinstance(event, Person):
            assert event.id == nexmark.FIRST_PERSON_ID + len(persons)
            persons.add(event.id)
        elif isinstance(event, Auction):
            assert event.id == nexmark.FIRST_AUCTION_ID + len(auctions)
            assert event.seller in persons
            assert event.reserve > event.initial_bid > 0 and event.expires > event.date_time
            assert nexmark.FIRST_CATEGORY_ID <= event.category < nexmark.FIRST_CATEGORY_ID + nexmark.CATEGORIES
            auctions[event.id] = event
        else:
            assert event.auction in auctions and event.bidder in persons and event.price > 0


def test_event_times_follow_the_rate_and_half_the_bids_go_to_the_hot_auction():
    stream = list(nexmark.events(N, rate=2000.0))
    assert stream[0].date_time == nexmark.BASE_TIME_S
    gaps = [b.date_time - a.date_time for a, b in zip(stream, stream[1:], strict=False)]
    assert gaps == pytest.approx([1 / 2000] * (N - 1), abs=1e-6)  # (seconds near 1.4e9: ulp 2.4e-7)
    newest, on_hot, bids = 0, 0, 0
    for event in stream:
        if isinstance(event, Auction):
            newest = event.id
        elif isinstance(event, Bid):
            bids += 1
            on_hot += event.auction == newest // nexmark.HOT_AUCTION_RATIO * nexmark.HOT_AUCTION_RATIO
    assert 0.45 < on_hot / bids < 0.6  # half of the bids go to the hot auction of their moment


def test_the_pulled_source_reads_the_streams_events_in_ranges_and_paced_only_what_is_due():
    source = nexmark.NexmarkSource(250, seed=4, rate=100.0)
    read, after = [], None
    while (found := source.next_range(after, 64)) is not None:
        read += source.read(found)
        after = found[1]
    assert read == list(nexmark.events(250, seed=4, rate=100.0))
    assert source.ended(after) and not source.ended(10)
    paced = nexmark.NexmarkSource(250, seed=4, rate=100.0, paced_from=time.time() - 0.5)  # ~50 due
    first, last, count = paced.next_range(None, 1000)
    assert first == 0 and 45 <= count <= 70 and last == count - 1


def test_shares_of_the_pulled_source_make_the_stream_between_them():
    shares = [nexmark.NexmarkSource(101, seed=2, rate=50.0, share=(i, 3)) for i in range(3)]
    read = []
    for source in shares:
        after = None
        while (found := source.next_range(after, 16)) is not None:
            read += source.read(found)
            after = found[1]
        assert source.ended(after)
    assert sorted(read, key=lambda e: e.date_time) == list(nexmark.events(101, seed=2, rate=50.0))
    with pytest.raises(ValueError, match="share"):
        nexmark.NexmarkSource(10, share=(2, 2))
