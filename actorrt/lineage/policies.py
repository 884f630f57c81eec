"""How one actor survives a failure: its fault-tolerance policy (``Actor.options(ft=...)``).

The cluster logs lineage (``actorrt.init(ft="lineage_stash")``); each actor chooses what it costs:

- ``lineage_stash`` (the default): the specs of its tasks are written to the store as they run,
  off their path; after a failure it replays them exactly, and nobody waits for it.
- ``checkpoint(every_tasks=N | every_s=S)``, lazy: its specs stay in memory and are written only
  when something it made must leave before its next checkpoint (an *escape*: a result with a
  value, a wait in one of its tasks, ``commit_lineage``). Its calls to other actors wait for that
  checkpoint, which makes them reproducible; what it holds waits a second at most. The None
  results of the methods its class names in ``__actorrt_acks__`` go at once, and their callers
  keep those calls until its checkpoint covers them. After a failure it restores the
  checkpoint, replays what escapes wrote, and its callers send again what came after; it alone
  goes back.
- ``checkpoint(eager=True)``: its checkpoints are group commits, every 50 ms while it runs tasks,
  and nothing it made (its results included) leaves before the one that covers its task is
  durable. A failure loses nothing it answered.
- ``ephemeral``: no state worth keeping. Nothing is logged or checkpointed; after a failure its
  constructor runs again and its callers send again what it had not answered. It calls no actor.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Literal

from actorrt.rpc import common_pb2 as pb

Kind = Literal["lineage_stash", "checkpoint", "eager", "ephemeral"]
KINDS: tuple[Kind, ...] = ("lineage_stash", "checkpoint", "eager", "ephemeral")
# A lazily checkpointed actor given no cadence checkpoints this often.
DEFAULT_EVERY_S = 1.0


@dataclass(frozen=True)
class Policy:
    """One actor's policy; build it with ``checkpoint(...)`` or name it (``"ephemeral"``)."""

    kind: Kind = "lineage_stash"
    every_tasks: int | None = None
    every_s: float | None = None

    @property
    def logs_continuously(self) -> bool:
        """Its tasks' specs go to the store as they run (the lineage stash)."""
        return self.kind == "lineage_stash"

    @property
    def holds_outputs(self) -> bool:
        """What it makes leaves once a checkpoint covers it (or, lazily, once it is written)."""
        return self.kind in ("checkpoint", "eager")

    def to_proto(self) -> pb.ActorPolicy:
        return pb.ActorPolicy(kind="" if self.kind == "lineage_stash" else self.kind,
                              every_tasks=self.every_tasks or 0, every_s=self.every_s or 0.0)

    @classmethod
    def from_proto(cls, proto: pb.ActorPolicy) -> Policy:
        return cls(proto.kind or "lineage_stash", proto.every_tasks or None, proto.every_s or None)

    def __str__(self) -> str:
        if self.kind != "checkpoint":
            return self.kind
        every = [f"every_tasks={self.every_tasks}"] * bool(self.every_tasks) + [f"every_s={self.every_s}"] * bool(
            self.every_s)
        return f"checkpoint({', '.join(every)})"


LINEAGE_STASH = Policy()
EPHEMERAL = Policy("ephemeral")


def checkpoint(*, every_tasks: int | None = None, every_s: float | None = None, eager: bool = False) -> Policy:
    """A checkpointing policy: lazily every ``every_tasks`` tasks or ``every_s`` seconds (whichever
    comes first; ``every_s=1.0`` if neither is given), or ``eager``: after every task.

    Raises:
        ValueError: a cadence that is not positive, or one given with ``eager``.
    """
    if every_tasks is not None and (isinstance(every_tasks, bool) or not isinstance(every_tasks, int)
                                    or every_tasks < 1):
        raise ValueError(f"every_tasks must be an int >= 1 or None, not {every_tasks!r}")
    if every_s is not None and (isinstance(every_s, bool) or not isinstance(every_s, numbers.Real)
                                or not math.isfinite(every_s) or every_s <= 0):
        raise ValueError(f"every_s must be a number of seconds > 0 or None, not {every_s!r}")
    if not isinstance(eager, bool):
        raise TypeError(f"eager must be a bool, not {eager!r}")
    if eager:
        if every_tasks is not None or every_s is not None:
            raise ValueError("checkpoint(eager=True) checkpoints after every task: it takes no every_tasks or every_s")
        return Policy("eager")
    if every_tasks is None and every_s is None:
        every_s = DEFAULT_EVERY_S
    return Policy("checkpoint", every_tasks, None if every_s is None else float(every_s))


def policy(value: Policy | str | None) -> Policy:
    """``value`` (an ``ft=`` option) as a Policy: a Policy, or one's name (``"checkpoint"`` is
    ``checkpoint()``, ``"eager"`` is ``checkpoint(eager=True)``); None is the default.

    Raises:
        ValueError: an unknown name. TypeError: neither a str nor a Policy.
    """
    if value is None:
        return LINEAGE_STASH
    if isinstance(value, Policy):
        return value
    if not isinstance(value, str):
        raise TypeError(f"ft= takes a policy or its name, not a {type(value).__name__}")
    if value == "checkpoint":
        return checkpoint()
    if value == "eager":
        return checkpoint(eager=True)
    if value in ("lineage_stash", "ephemeral"):
        return Policy(value)
    raise ValueError(f"ft= must be one of {', '.join(repr(k) for k in KINDS)} or a policy from "
                     f"actorrt.lineage.policies.checkpoint(...), not {value!r}")
