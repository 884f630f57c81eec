"""The fault-tolerance mode of a cluster and its options (``actorrt.init(ft=..., ...)``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from actorrt.rpc import head_pb2

# Submission waits while the stash holds more specs than this (the store is slow or down).
DEFAULT_STASH_LIMIT = 200_000
# An argument larger than this (serialized) travels beside its task and is named by id in the
# spec, so the lineage store's bytes per task do not grow with the data.
DEFAULT_INLINE_MAX_BYTES = 64 * 1024
# Objects a process keeps for other actors' replays: past this many bytes in memory, on local disk.
DEFAULT_PINNED_BUDGET_BYTES = 1 << 30
# The largest task spec a process submits: a spec is written to the lineage store whole and sent
# again as lineage, so its arguments travel in it only up to this; larger values travel beside it
# (``inline_max_bytes``). Far below what Redis takes in one argument (512 MiB by default).
MAX_SPEC_BYTES = 32 << 20


class FaultToleranceMode(enum.StrEnum):
    """How a cluster survives a node failure; each mode is one ``FaultTolerance`` strategy."""

    LINEAGE_STASH = "lineage_stash"  # causal logging off the critical path; exact replay of the lost node
    WRITE_FIRST = "write_first"  # the baseline: each spec is acked by the store before its task runs
    CHECKPOINT = "checkpoint"  # the failed node and those the rollback frontier names go back to the global checkpoint
    GLOBAL_ROLLBACK = "global_rollback"  # the baseline (Flink's): every node goes back to the global checkpoint
    NONE = "none"  # no logging, no recovery

    @property
    def logs_lineage(self) -> bool:
        """Whether task specs go to the lineage store (and a lost node is rebuilt by replay)."""
        return self in (FaultToleranceMode.LINEAGE_STASH, FaultToleranceMode.WRITE_FIRST)

    @property
    def rolls_back(self) -> bool:
        """Whether a node failure takes actors back to the last global checkpoint (nothing is logged)."""
        return self in (FaultToleranceMode.CHECKPOINT, FaultToleranceMode.GLOBAL_ROLLBACK)


@dataclass(frozen=True)
class FaultToleranceOptions:
    """How the cluster logs lineage and where actors write checkpoints (empty: the head's
    session directory). ``mode`` may be given as its string value."""

    mode: FaultToleranceMode = FaultToleranceMode.LINEAGE_STASH
    store_delay_ms: float = 0.0
    max_forwards: int | None = None
    stash_limit: int = DEFAULT_STASH_LIMIT
    checkpoint_dir: str = ""
    inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES
    pinned_budget_bytes: int = DEFAULT_PINNED_BUDGET_BYTES

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", FaultToleranceMode(self.mode))
        except ValueError:
            allowed = ", ".join(m.value for m in FaultToleranceMode)
            raise ValueError(f"ft must be one of {allowed}, not {self.mode!r}") from None
        if not isinstance(self.store_delay_ms, int | float) or self.store_delay_ms < 0:
            raise ValueError(f"store_delay_ms must be a number >= 0, not {self.store_delay_ms!r}")
        if self.max_forwards is not None and (not isinstance(self.max_forwards, int) or self.max_forwards < 0):
            raise ValueError(f"max_forwards must be an int >= 0 or None, not {self.max_forwards!r}")
        if not isinstance(self.stash_limit, int) or self.stash_limit < 1:
            raise ValueError(f"stash_limit must be an int >= 1, not {self.stash_limit!r}")
        if not isinstance(self.inline_max_bytes, int) or not 0 <= self.inline_max_bytes <= MAX_SPEC_BYTES // 2:
            raise ValueError(f"inline_max_bytes must be an int from 0 to {MAX_SPEC_BYTES // 2} (half the largest "
                             f"task spec), not {self.inline_max_bytes!r}")
        if not isinstance(self.pinned_budget_bytes, int) or self.pinned_budget_bytes < 0:
            raise ValueError(f"pinned_budget_bytes must be an int >= 0, not {self.pinned_budget_bytes!r}")

    def to_proto(self) -> head_pb2.FaultTolerance:
        return head_pb2.FaultTolerance(
            mode=self.mode.value, store_delay_ms=self.store_delay_ms,
            max_forwards=-1 if self.max_forwards is None else self.max_forwards,
            stash_limit=self.stash_limit, checkpoint_dir=self.checkpoint_dir,
            inline_max_bytes=self.inline_max_bytes, pinned_budget_bytes=self.pinned_budget_bytes,
        )

    @classmethod
    def from_proto(cls, proto: head_pb2.FaultTolerance) -> FaultToleranceOptions:
        return cls(proto.mode or FaultToleranceMode.LINEAGE_STASH, proto.store_delay_ms,
                   None if proto.max_forwards < 0 else proto.max_forwards,
                   proto.stash_limit or DEFAULT_STASH_LIMIT, proto.checkpoint_dir,
                   proto.inline_max_bytes if proto.HasField("inline_max_bytes") else DEFAULT_INLINE_MAX_BYTES,
                   proto.pinned_budget_bytes if proto.HasField("pinned_budget_bytes") else DEFAULT_PINNED_BUDGET_BYTES)
