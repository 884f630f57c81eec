"""Reading the lineage store directly from a test's driver."""

from __future__ import annotations

import asyncio

from actorrt.core import context
from actorrt.store.lineage_store import LineageStore
from actorrt.store.opening import store_of_view


def records_sent_to(actor_id: bytes) -> int:
    """How many task records the lineage store holds for ``actor_id``."""
    view = context.current().worker.membership.view

    async def count() -> int:
        store = LineageStore(store_of_view(view, None))
        try:
            return len(await store.sent_to(actor_id))
        finally:
            await store.aclose()

    return asyncio.run(count())
