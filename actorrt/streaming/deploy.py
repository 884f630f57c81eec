"""Operator actors for a plan's stages (a run's start, and the instances a rescale adds)."""

from __future__ import annotations

from typing import Any

import actorrt
from actorrt.handles import ActorHandle
from actorrt.streaming.operator import Operator
from actorrt.streaming.plan import Plan

_operator = actorrt.remote(Operator)


def deploy(plan: Plan, blob: bytes, monitor: ActorHandle, checkpoint_every: int | None) -> list[list[ActorHandle]]:
    """Operator actors for every stage, the last first (each is given its consumers)."""
    stages: list[list[ActorHandle] | None] = [None] * len(plan.stages)
    for s in range(len(plan.stages) - 1, -1, -1):
        downstream = [[stages[c.stage] for c in consumers] for consumers in plan.consumers(s)]
        options = operator_options(plan, s, checkpoint_every)
        stages[s] = [options.remote(blob, s, i, downstream, monitor) for i in range(plan.stages[s].parallelism)]
    return stages


def operator_options(plan: Plan, stage: int, checkpoint_every: int | None) -> Any:
    """The operator actor class of ``stage``, with its options."""
    # With one sender an operator's order is its sender's: only where others cut in (its own
    # timers, the driver) is it recorded. Several senders interleave in arrival order.
    own = plan.stages[stage]
    lineage_stash = own.ft.logs_continuously  # (a checkpointing policy has its own cadence)
    return _operator.options(nondeterministic=len(plan.channels(stage)) > 1, standby=own.standby, ft=own.ft,
                             checkpoint_every=checkpoint_every if lineage_stash else None)
