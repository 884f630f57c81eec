"""``actorrt.ran(ref)``: back-pressure's wait. A call a replay sends again whose receiver ran it
before is deferred, and counts as run without a round trip to the receiver; any other call is
awaited as ``await ref`` is (its value, or its error)."""

from __future__ import annotations

import asyncio

import pytest

from actorrt.core import values
from actorrt.objects.store import ObjectStore


class _Worker:
    def __init__(self) -> None:
        self.objects = ObjectStore()

    def on_loop_thread(self) -> bool:
        return True


class _Ref:
    """A ref whose value is awaited only if ``ran`` must ask for it."""

    def __init__(self, object_id: bytes, error: Exception | None = None) -> None:
        self.object_id, self.error, self.awaited = object_id, error, False

    def __await__(self):
        self.awaited = True
        yield from asyncio.sleep(0).__await__()
        if self.error is not None:
            raise self.error


def test_a_replayed_call_its_receiver_ran_counts_as_run_without_asking_for_it():
    worker, made = _Worker(), []
    worker.objects.defer(b"o" * 16, lambda: made.append("dispatched"), lambda: None)
    ref = _Ref(b"o" * 16)
    asyncio.run(values.ran(worker, ref))
    assert not ref.awaited and made == []  # no round trip to the receiver
    assert worker.objects.is_deferred(b"o" * 16)  # still there, should anyone ask for the value


def test_any_other_call_is_awaited_with_its_error():
    worker = _Worker()
    ref = _Ref(b"p" * 16)
    asyncio.run(values.ran(worker, ref))
    assert ref.awaited
    with pytest.raises(ValueError, match="boom"):
        asyncio.run(values.ran(worker, _Ref(b"q" * 16, ValueError("boom"))))
