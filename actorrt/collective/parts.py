"""The bytes of a collective call: each member's part of its host's result, and another host's
copy of a whole result.

A part is written straight into its host's result segment, from the inputs of this host's members
where they are (the array a member here passed, or its buffer) and from slices of the other hosts'
members' inputs, pulled over TCP. A result another host completed is pulled here whole. Large
copies and sums run in a thread, so the node keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np

from actorrt.collective import ops
from actorrt.collective.exchange import Exchange
from actorrt.collective.memory import InputBuffers, PeerInputs, ResultParts
from actorrt.collective.ops import Op
from actorrt.core.worker import Worker
from actorrt.objects.transfer import pull, pull_range
from actorrt.rpc import common_pb2 as pb

# Parts of a result written on the event loop up to this size; larger ones in a thread (numpy
# lets go of the GIL), so the node keeps serving while it copies and adds.
INLINE_BYTES = 1 << 20


async def off_loop(nbytes: int, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, in a thread if it handles more than ``INLINE_BYTES``."""
    if nbytes <= INLINE_BYTES:
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


class PartWriter:
    def __init__(self, worker: Worker, inputs: InputBuffers, counts: Counter[str]) -> None:
        self.worker = worker
        self.host = worker.shared.host
        self.peers = PeerInputs(inputs)
        self.results = ResultParts(worker.shared.arena)
        self.arrays: dict[tuple[bytes, int, int], np.ndarray] = {}  # what local members passed, by (group, seq, rank)
        self.counts = counts  # the service's: "pulled_bytes" counts here

    def new_result(self, op: Op, nbytes: int, size: int) -> pb.SharedObject:
        """A segment for the host's result, given by one of its members (held until the end)."""
        sizes = [nbytes] * size if op.kind == "allgather" else [nbytes]
        shared = self.worker.shared
        result = shared.placed(shared.reserve(sizes, populate=False), sizes)
        shared.hold(result)
        return result

    async def write(self, ex: Exchange, op: Op, rank: int, result: pb.SharedObject) -> None:
        """Write member ``rank``'s part of its host's result: a slice of the elements for a
        reduction (of all inputs, in rank order), its own block and some of another host's
        members' for a gather, the whole for a broadcast (by the source, or the host's leader)."""
        ranks = ex.host_ranks()
        leader = ex.contributions[ex.leader()]
        dtype = np.dtype(leader.dtype) if leader.dtype else None
        if op.kind in ("allreduce", "reduce_scatter"):
            count = int(np.prod(leader.shape, dtype=np.int64))
            start, end = ops.element_slices(count, dtype.itemsize, len(ranks))[ranks.index(rank)]
            if start < end:
                inputs = await self._input_slices(ex, start * dtype.itemsize, (end - start) * dtype.itemsize)
                out = self.results.part(result, 0, start * dtype.itemsize, (end - start) * dtype.itemsize)
                await off_loop(len(out), ops.reduce_into, np.frombuffer(out, dtype),
                               [np.frombuffer(i, dtype) for i in inputs], op.reduce)
        elif op.kind == "allgather":
            others = [r for r in range(ex.size) if r not in ranks]
            blocks = [rank] + [r for i, r in enumerate(others) if ranks[i % len(ranks)] == rank]
            for block in blocks:
                await self._copy_input(ex, block, self.results.part(result, block, 0, result.lengths[block]))
        elif op.kind == "broadcast" and rank == ex.result_rank():
            await self._copy_input(ex, op.src_rank, self.results.part(result, 0, 0, result.lengths[0]))

    async def _input_slices(self, ex: Exchange, start: int, nbytes: int) -> list[memoryview]:
        """Bytes ``start`` to ``start + nbytes`` of every member's input, in rank order: views of
        this host's, copies of the others' (pulled at once, each over its own connection)."""
        slices: list[memoryview] = []
        pulls = []
        for rank in range(ex.size):
            c = ex.contributions[rank]
            if c.host == self.host:
                slices.append(self.peers.view(c.input)[start:start + nbytes])
            else:
                slices.append(memoryview(bytearray(nbytes)))
                pulls.append(pull_range(c.input, start, slices[-1], self.worker.token, self.worker.tls))
        if pulls:
            await asyncio.gather(*pulls)
            self.counts["pulled_bytes"] += nbytes * len(pulls)
        return slices

    async def _copy_input(self, ex: Exchange, rank: int, out: memoryview) -> None:
        """Member ``rank``'s whole input into ``out``: from the array it passed, if here; from its
        buffer, on this host; pulled from its process, on another."""
        c = ex.contributions[rank]
        array = self.arrays.get((ex.gid, ex.seq, rank))
        if not out.nbytes:
            return
        if c.host != self.host:
            await pull_range(c.input, 0, out, self.worker.token, self.worker.tls)
            self.counts["pulled_bytes"] += out.nbytes
        elif array is not None:
            await off_loop(out.nbytes, np.copyto, np.ndarray(array.shape, array.dtype, buffer=out), array)
        else:
            await off_loop(out.nbytes, out.__setitem__, slice(None), self.peers.view(c.input))

    async def pull_result(self, value: pb.ObjectValue) -> pb.ObjectValue:
        """``value``, a result another host keeps, with its segment copied into this process's
        shared memory; the lease on the other host's copy is let go either way.

        Raises:
            OSError: its holder died meanwhile.
        """
        remote = value.value.shared
        try:
            local = await pull(remote, self.worker.shared, self.worker.token, self.worker.tls)
        finally:
            self.worker.shared.received(remote)
        copy = pb.ObjectValue()
        copy.CopyFrom(value)
        copy.value.shared.CopyFrom(local)
        return copy
