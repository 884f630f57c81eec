"""Where this process writes and reads record lineage: the lineage store its fault tolerance
flushes to (``Dataflow(lineage=True)`` and ``actorrt.lineage`` queries)."""

from __future__ import annotations

from actorrt.core import context
from actorrt.exceptions import ActorRTError
from actorrt.store.clients import Store
from actorrt.store.relations import RelationQueue


class RecordLineageUnavailableError(ActorRTError):
    """Record lineage needs a lineage store and exact replay: ``ft="lineage_stash"`` (the
    default) or ``"write_first"``."""


def _logging_ft():
    ft = context.current().worker.ft
    if not ft.logs_lineage or ft.rolls_back or getattr(ft, "flusher", None) is None:
        raise RecordLineageUnavailableError(
            f"record lineage needs ft='lineage_stash' (the default) or 'write_first', not {ft.options.mode.value!r}: "
            f"its relations are written with the task lineage, and a replay must make the same records again")
    return ft


def relation_queue() -> RelationQueue:
    """This process's record lineage waiting for its next flush."""
    return _logging_ft().flusher.relations


def lineage_store() -> Store:
    """The lineage store of this process's cluster."""
    return _logging_ft().store.store
