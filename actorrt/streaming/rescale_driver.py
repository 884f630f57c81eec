"""The driver's side of ``RunningFlow.rescale`` (the protocol is in ``rescaling.py``): new
instances and their channels at the consumers, the switch of every producer, the wait for the
keys to move, and the retired instances' results and sink write numbers kept before they stop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import actorrt
from actorrt.core.record_lineage import lineage_store
from actorrt.lifecycle import current_driver
from actorrt.store.relations import save_flow
from actorrt.streaming.deploy import operator_options
from actorrt.streaming.provenance import flow_shape
from actorrt.streaming.rescaling import Joining
from actorrt.util import pickling

if TYPE_CHECKING:
    from actorrt.streaming.running import RunningFlow


def rescale(running: RunningFlow, stage: int, parallelism: int) -> None:
    """Move ``stage`` of ``running`` to ``parallelism`` instances (under its lock)."""
    flow, plan, watch = running.flow, running._plan, running._watch
    old = running._stages[stage]
    before = len(old)
    consumers = plan.consumers(stage)
    joining = {}
    for k, j in enumerate(range(before, parallelism)):  # a channel at every consumer, appended
        uid = running._instances[stage] + k
        channels = []
        for port in consumers:
            row = []
            for c in port:
                put = plan.stages[c.stage].inputs.index(c.input)
                numbers = watch.get([op.add_channel.remote(put) for op in running._stages[c.stage]])
                if len(set(numbers)) != 1 or numbers[0] != len(running._layouts[c.stage]):
                    raise RuntimeError(f"the instances of stage {c.stage} disagree on their channels: {numbers}")
                row.append(numbers[0])
                running._layouts[c.stage].append([stage, uid])
                running._channel_inputs[c.stage].append(put)
            channels.append(row)
        joining[j] = Joining(before, channels, uid, list(running._channel_inputs[stage]),
                             list(running._retired_channels[stage]))
    blob = _plan_now(running, stage, parallelism)
    downstream = [[running._stages[c.stage] for c in port] for port in consumers]
    options = operator_options(plan, stage, flow._checkpoint_every)
    new = [options.remote(blob, stage, j, downstream, watch.monitor, joining[j]) for j in range(before, parallelism)]
    peers = (old + new)[:parallelism]
    # Up and running before any record goes to them: a producer that found one still starting
    # would fill its window to it and stop sending to every other instance meanwhile.
    watch.get([op.rescaled.remote() for op in new])
    watch.get([op.begin_rescale.remote(before, parallelism, peers, op) for op in old])
    producers = {id(op): op for put in plan.stages[stage].inputs for op in running._stages[put.stage]}
    watch.get([op.reroute.remote(stage, peers) for op in producers.values()])
    moving = old + new
    while not all(watch.get([op.rescaled.remote() for op in moving])):
        watch.pause()
    retiring = old[parallelism:]
    for answer, writes in zip(watch.get([op.results.remote() for op in retiring]),
                              watch.get([op.writes.remote() for op in retiring]), strict=True):
        running._retired.append((stage, answer))
        running._retired_writes[stage].append(writes)
        uid = answer[3]["id"]
        for port in consumers:
            for c in port:
                running._retired_channels[c.stage] += [n for n, (s, u) in enumerate(running._layouts[c.stage])
                                                       if s == stage and u == uid]
    for op in retiring:
        actorrt.kill(op)
    running._stages[stage] = peers
    running._instances[stage] += len(new)
    flow.actors = [op for ops in running._stages for op in ops] + [watch.monitor]
    if plan.lineage is not None:
        shape = flow_shape(_current(running), flow._id_kinds(), running._layouts, running._instances)
        current_driver().call(save_flow(lineage_store(), plan.lineage, shape))


def _plan_now(running: RunningFlow, stage: int, parallelism: int) -> bytes:
    """The plan as new instances get it: every stage at its parallelism now (this one's new); the
    flow's own plan stays as it was built, for its next start."""
    plan = _current(running)
    plan.stages[stage].parallelism = parallelism
    return pickling.dumps(plan)


def _current(running: RunningFlow) -> Any:
    plan = pickling.loads(running.flow._plan_blob())
    for s, ops in enumerate(running._stages):
        plan.stages[s].parallelism = len(ops)
    return plan


def check(plan: Any, stage: int | str, parallelism: Any) -> int:
    """The index of ``stage`` (an index, its name, or its keyed step's name), if it can be
    rescaled to ``parallelism``."""
    if isinstance(stage, str):  # a stage's name, or its keyed step's
        names = [s.name for s in plan.stages]
        found = [i for i, s in enumerate(plan.stages) if stage in (s.name, s.keyed.name if s.keyed else None)]
        if not found:
            raise ValueError(f"dataflow {plan.name} has no stage {stage!r}: its stages are {names}")
        stage = found[0]
    if not isinstance(stage, int) or not 0 <= stage < len(plan.stages):
        raise ValueError(f"dataflow {plan.name} has no stage {stage!r}")
    if plan.stages[stage].keyed is None:
        raise ValueError(f"stage {plan.stages[stage].name!r} has no keyed step: rescale() moves keyed state; "
                         f"give a stateless step its parallelism when building the flow")
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"parallelism must be an int >= 1, not {parallelism!r}")
    return stage
