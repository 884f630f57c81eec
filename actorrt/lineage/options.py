"""The fault-tolerance mode of a cluster and its options (``actorrt.init(ft=..., ...)``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from actorrt.rpc import head_pb2

# Submission waits while the stash holds more specs than this (the store is slow or down).
DEFAULT_STASH_LIMIT = 200_000


class FaultToleranceMode(enum.StrEnum):
    """How a cluster survives a node failure; each mode is one ``FaultTolerance`` strategy."""

    LINEAGE_STASH = "lineage_stash"  # causal logging off the critical path; exact replay of the lost node
    WRITE_FIRST = "write_first"  # the baseline: each spec is acked by the store before its task runs
    GLOBAL_ROLLBACK = "checkpoint"  # the baseline: every node goes back to the last global checkpoint
    NONE = "none"  # no logging, no recovery

    @property
    def logs_lineage(self) -> bool:
        """Whether task specs go to the lineage store (and a lost node is rebuilt by replay)."""
        return self in (FaultToleranceMode.LINEAGE_STASH, FaultToleranceMode.WRITE_FIRST)

    @property
    def rolls_back(self) -> bool:
        """Whether a node failure restarts every node from the last global checkpoint."""
        return self is FaultToleranceMode.GLOBAL_ROLLBACK


@dataclass(frozen=True)
class FaultToleranceOptions:
    """How the cluster logs lineage and where actors write checkpoints (empty: the head's
    session directory). ``mode`` may be given as its string value."""

    mode: FaultToleranceMode = FaultToleranceMode.LINEAGE_STASH
    store_delay_ms: float = 0.0
    max_forwards: int | None = None
    stash_limit: int = DEFAULT_STASH_LIMIT
    checkpoint_dir: str = ""

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

    def to_proto(self) -> head_pb2.FaultTolerance:
        return head_pb2.FaultTolerance(
            mode=self.mode.value, store_delay_ms=self.store_delay_ms,
            max_forwards=-1 if self.max_forwards is None else self.max_forwards,
            stash_limit=self.stash_limit, checkpoint_dir=self.checkpoint_dir,
        )

    @classmethod
    def from_proto(cls, proto: head_pb2.FaultTolerance) -> FaultToleranceOptions:
        return cls(proto.mode or FaultToleranceMode.LINEAGE_STASH, proto.store_delay_ms,
                   None if proto.max_forwards < 0 else proto.max_forwards,
                   proto.stash_limit or DEFAULT_STASH_LIMIT, proto.checkpoint_dir)
