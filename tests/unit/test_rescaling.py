"""The arithmetic and the holding of a rescale's handoff (``rescaling.py``), without actors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actorrt.streaming.keys import partition
from actorrt.streaming.rescaling import Handoff, hands_to, takes_from

KEYS = [f"k{i}" for i in range(400)] + list(range(400))


@given(st.integers(1, 9), st.integers(1, 9))
def test_every_moving_key_goes_from_an_instance_that_hands_to_one_that_takes(old, new):
    for key in KEYS:
        i, j = partition(key, old), partition(key, new)
        if i != j:
            assert j in hands_to(i, old, new) and i in takes_from(j, old, new)
    for i in range(old):
        for j in hands_to(i, old, new):
            assert i in takes_from(j, old, new)


def test_records_of_keys_on_their_way_wait_per_owner_and_the_rest_go_through():
    handoff = Handoff(instance=2, old=2, new=4)  # a new instance: keys come from instance 0
    assert handoff.awaiting == {0} and not handoff.done
    records = [key for key in KEYS if partition(key, 4) == 2][:10]
    ready, held = handoff.split(records, lambda r: r, None, list(range(10)), 0, 1.0, 1.0)
    assert ready == [] and [h.owner for h in held] == [0]
    assert held[0].records == records and held[0].seqs == list(range(10))
    handoff.held += held
    assert handoff.arrived(0) == held and handoff.held == [] and handoff.done
    staying = Handoff(instance=0, old=2, new=4)  # an old instance that keeps some keys and takes none
    assert staying.awaiting == set() and not staying.done  # (until its leaving keys went)
    mine = [key for key in KEYS if partition(key, 2) == 0][:10]
    assert staying.split(mine, lambda r: r, None, [], 0, 1.0, 1.0) == (list(range(10)), [])
