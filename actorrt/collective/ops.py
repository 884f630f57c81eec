"""What each collective computes, and how the work of one call is split between the members.

Pure numpy, no I/O. Every member computes its own part of the result (a slice of the elements for
a reduction, its own block for a gather, the whole for a broadcast's source) in a fixed order of
ranks, so a result is the same bits whoever computes it, in any run, before or after a failure.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Any

import numpy as np

PAGE = mmap.PAGESIZE
REDUCE_OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum, "mean": np.add}
# Elements reduced at a time: the inputs' blocks and the output's stay in cache between the steps.
BLOCK_BYTES = 256 << 10


@dataclass(frozen=True)
class Op:
    """One kind of collective call: ``kind`` (allreduce, reduce_scatter, allgather, broadcast,
    barrier) with its reduction or source rank."""

    kind: str
    reduce: str = ""  # sum, prod, min, max, mean
    src_rank: int = 0  # broadcast's

    def __str__(self) -> str:
        if self.reduce:
            return f"{self.kind}:{self.reduce}"
        return f"broadcast:{self.src_rank}" if self.kind == "broadcast" else self.kind

    @property
    def has_result(self) -> bool:
        return self.kind != "barrier"

    def leader(self, seq: int, size: int) -> int:
        """The member that makes the segment the result is written into: the source of a
        broadcast, else one in turn (so no process makes every segment)."""
        return self.src_rank if self.kind == "broadcast" else seq % size


def reduce_op(name: str) -> str:
    if name not in REDUCE_OPS:
        raise ValueError(f"unknown reduce op {name!r}: the ops are {', '.join(REDUCE_OPS)}")
    return name


def check_array(array: Any, op: Op, what: str) -> np.ndarray:
    """``array`` as a numpy array fit for ``op``, or a clear error."""
    arr = np.asarray(array)
    if arr.dtype.hasobject or arr.dtype.fields is not None:
        raise TypeError(f"{what} takes numpy arrays of numbers, not of dtype {arr.dtype}")
    if op.reduce:
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"{what} with op={op.reduce!r} takes numbers (bool, int, float, complex), not {arr.dtype}")
        if op.reduce == "mean" and arr.dtype.kind not in "fc":
            raise TypeError(f"{what} with op='mean' takes floating-point arrays, not {arr.dtype}: "
                            f"use op='sum' and divide as you need")
    return arr


def element_slices(count: int, itemsize: int, parts: int) -> list[tuple[int, int]]:
    """``count`` elements split into ``parts`` ranges of nearly equal size, each starting on a
    page boundary (a member maps only its range of the result, and none share a page)."""
    per_page = max(PAGE // itemsize, 1)
    pages = -(-count // per_page)
    bounds = [min(count, (pages * i // parts) * per_page) for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


def reduce_into(out: np.ndarray, inputs: list[np.ndarray], reduce: str) -> None:
    """``out = inputs[0] op inputs[1] op ...`` in rank order (and divided by their number for a
    mean), block by block. All are flat arrays of one length. Each block is reduced in a scratch
    buffer and copied out whole, so ``out`` (which other processes may read) only ever holds
    final values: writing a part again, after a failure, changes no byte a reader sees."""
    ufunc = REDUCE_OPS[reduce]
    step = max(BLOCK_BYTES // max(out.itemsize, 1), 1)
    scratch = np.empty(min(step, out.size), out.dtype)
    for start in range(0, out.size, step):
        parts = [a[start:start + step] for a in inputs]
        block = scratch[:len(parts[0])]
        if len(parts) == 1:
            np.copyto(block, parts[0])
        else:
            ufunc(parts[0], parts[1], out=block)
            for part in parts[2:]:
                ufunc(block, part, out=block)
        if reduce == "mean":
            np.divide(block, len(inputs), out=block)
        out[start:start + len(block)] = block


def result_value(op: Op, arrays: list[np.ndarray], rank: int, size: int) -> Any:
    """What the call returns to member ``rank``, from the result's buffers as arrays."""
    if op.kind == "allgather":
        return list(arrays)
    if op.kind == "reduce_scatter":
        return np.array_split(arrays[0], size, axis=0)[rank] if arrays[0].ndim else arrays[0]
    return arrays[0]
