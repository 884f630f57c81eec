"""Actors a driver releases: killed once the driver's handle to them is gone.

Only an actor this driver created, without a name or ``lifetime="detached"``, whose creator's
handle was never pickled: a pickled copy may be used anywhere, so its actor lives until it is
killed. The handle holds its creation's ref, so the ref's going (``Worker._unreferenced``) says
the handle went. The actor is killed after the calls queued for it, not interrupting them.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from actorrt.core.submitter import Submitter
from actorrt.core.task_spec import KILL_METHOD
from actorrt.core.unretrieved import UnretrievedErrors
from actorrt.lineage import ids

log = logging.getLogger(__name__)


class Releases:
    def __init__(self, submitter: Submitter, unretrieved: UnretrievedErrors) -> None:
        self._submitter = submitter
        self._unretrieved = unretrieved
        # By actor id, to its slot. Changed from callers' threads (a dict's single operations are atomic).
        self._releasable: dict[bytes, int] = {}
        # Kills are submitted from a thread: a garbage collection may run ``handle_gone`` inside any
        # code of the loop, even a submission holding the process's sender lock.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="actorrt-release")

    def created(self, actor_id: bytes, slot: int) -> None:
        """This driver created ``actor_id`` on ``slot``, releasable (before any copy of its handle)."""
        self._releasable[actor_id] = slot

    def copied(self, actor_id: bytes) -> None:
        """A copy of the creator's handle was made: the actor is no longer released with it."""
        self._releasable.pop(actor_id, None)

    def handle_gone(self, actor_id: bytes, going_away: bool) -> None:
        """The creator's handle of ``actor_id`` went; ``going_away``: the driver is (actors outlive it)."""
        slot = self._releasable.pop(actor_id, None)
        if slot is not None and not going_away:
            self._thread.submit(self._kill, actor_id, slot)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

    def _kill(self, actor_id: bytes, slot: int) -> None:
        try:
            killed = self._submitter.submit_task(actor_id, slot, KILL_METHOD, (), {})
        except Exception as exc:  # noqa: BLE001 - the cluster is going away, or the stash is stuck: it stays
            log.info("actor %s was not released: %r", ids.short(actor_id), exc)
            return
        killed.mark_retrieved()  # its answer (the actor had died already, say) is nobody's failure
        self._unretrieved.quiet(killed.object_id)  # (nor if it comes once this ref has gone)
