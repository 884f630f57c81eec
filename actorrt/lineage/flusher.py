"""FlushTask: writing stashed specs to the lineage store in the background, delivering acks.

``flush`` only queues, so the task path never waits on the store. One batch is written at a time
(one pipeline per shard); specs queued meanwhile go in the next batch. With ``linger_s`` the
flusher waits that long after the first spec of a batch before writing it (a group commit): a
store round trip costs the client and the server far more CPU than a spec in it, and nothing
waits on these writes. A simulated store latency
(``delay_s``) postpones each ack without holding back later writes. If the store is unreachable
the batch is retried with backoff: flushes slow down, tasks do not (until the stash bound).

Record lineage (``relations``: which records each output record came from) rides on the same
loop: what operators queued by the time a batch of specs is taken is written once that batch is
in the store (the tasks' order is committed first), never on a task's path.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence

from actorrt.exceptions import ClusterError, StaleIncarnationError
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb
from actorrt.store.clients import StoreRefusedError
from actorrt.store.lineage_store import LineageStore, Write
from actorrt.store.relations import Queued, RelationQueue

log = logging.getLogger(__name__)

# A batch this large is written without lingering.
FULL_BATCH = 256
# While the store is unreachable, the flusher says so once, then again this often.
RETRY_WARNING_EVERY_S = 30.0

Ack = tuple[bytes, int]  # (task id, version the store holds)


class Flusher:
    def __init__(self, store: LineageStore, on_acks: Callable[[list[Ack]], None], delay_s: float = 0.0,
                 needed: Callable[[pb.TaskSpec], bool] = lambda spec: True, linger_s: float = 0.0) -> None:
        self.store = store
        self.linger_s = linger_s
        self._on_acks = on_acks
        self._needed = needed  # False for a spec committed (or checkpointed past) since it was queued
        self.delay_s = delay_s
        self._queue: list[Write] = []
        self._wake = asyncio.Event()
        self.flushed = 0
        self.writes = 0  # batches: round trips to the store
        self._warned_at = -RETRY_WARNING_EVERY_S
        self.refused = 0  # writes the store refused for good
        self.committed = 0  # writes the store acked at (at least) the version written
        self.latencies_ms: deque[float] = deque(maxlen=10_000)
        self._relations: RelationQueue | None = None

    @property
    def relates(self) -> bool:
        """Whether a task of this process ever queued record lineage."""
        return self._relations is not None

    @property
    def relations(self) -> RelationQueue:
        """The record lineage waiting for the next flush (made at the first use)."""
        if self._relations is None:
            self._relations = RelationQueue(self.store.store, self._wake.set)
        return self._relations

    def flush(self, spec: pb.TaskSpec, whole: bool = True) -> None:
        """Queue ``spec`` for the next batch: whole, or only what its version changes."""
        self._queue.append((spec, whole))
        self._wake.set()

    async def write_now(self, specs: Sequence[pb.TaskSpec], whole: bool = True) -> list[Ack]:
        """Write and wait for the acks (WriteFirst, survivors' flushes, end-to-end commits)."""
        acks = await self._write([(spec, whole) for spec in specs])
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self._on_acks(acks)
        return acks

    async def _write(self, writes: Sequence[Write]) -> list[Ack]:
        backoff = 0.05
        failing_since: float | None = None
        while True:
            start = time.perf_counter()  # loop.time() has 1 ms resolution under uvloop
            try:
                acks = await self.store.write(writes)
            except StaleIncarnationError:
                raise  # this process was replaced: it writes nothing more
            except StoreRefusedError as exc:
                return await self._write_apart(writes, exc)
            except Exception as exc:  # unreachable, or a client bug: flushing must go on, or the stash fills up
                now = time.monotonic()
                if failing_since is None or now - self._warned_at >= RETRY_WARNING_EVERY_S:
                    self._warned_at = now  # one line per outage (and a reminder now and then), not per retry
                    log.warning("lineage store write failed (%r); retrying", exc,
                                exc_info=not isinstance(exc, ClusterError))
                failing_since = failing_since if failing_since is not None else now
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            if failing_since is not None:
                log.warning("lineage store writes go through again after %.1f s", time.monotonic() - failing_since)
            self.flushed += len(writes)
            self.writes += 1
            written = {}
            for spec, _ in writes:
                written[spec.task_id] = max(spec.version, written.get(spec.task_id, 0))
            self.committed += sum(1 for task_id, held in acks if held >= written[task_id])
            self.latencies_ms.append((time.perf_counter() - start + self.delay_s) * 1e3)
            return acks

    async def _write_apart(self, writes: Sequence[Write], exc: StoreRefusedError) -> list[Ack]:
        """The store refuses ``writes`` for good: write them in halves, so that every write it
        takes goes in and the one it refuses is logged and left out, instead of stalling every
        later write of this process for ever."""
        if len(writes) == 1:
            spec, _ = writes[0]
            self.refused += 1
            log.error("the lineage store refuses task %s (%s, %d bytes): %s; it is not logged, so a replay "
                      "cannot run it", ids.short(spec.task_id), spec.method, spec.ByteSize(), exc)
            return []
        half = len(writes) // 2
        return await self._write(writes[:half]) + await self._write(writes[half:])

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            if self.linger_s and len(self._queue) < FULL_BATCH:
                await asyncio.sleep(self.linger_s)  # group commit: more specs come meanwhile
            self._wake.clear()
            batch, self._queue = [w for w in self._queue if self._needed(w[0])], []
            relations = self._relations.take() if self._relations else None
            if batch:
                acks = await self._write(batch)
                if self.delay_s:
                    loop.call_later(self.delay_s, self._on_acks, acks)
                else:
                    self._on_acks(acks)
            if relations is not None:
                await self._write_relations(relations)

    async def _write_relations(self, relations: Queued) -> None:
        try:
            await self._relations.write(relations)
        except Exception as exc:  # noqa: BLE001 - kept queued; tried again, like specs
            now = time.monotonic()
            if now - self._warned_at >= RETRY_WARNING_EVERY_S:
                self._warned_at = now
                log.warning("record lineage write failed (%r); retrying", exc)
            await asyncio.sleep(0.1)
            self._wake.set()

    def latency_p50_ms(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else 0.0

    def latency_mean_ms(self) -> float:
        return statistics.fmean(self.latencies_ms) if self.latencies_ms else 0.0
