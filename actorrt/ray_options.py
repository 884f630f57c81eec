"""Ray's options, as a Ray program passes them to ``@remote`` and ``.options()``, and what each means here.

- Meant here too, and accepted: ``max_restarts``, ``max_task_retries`` and ``max_retries`` (recovery
  is automatic and exact: an actor is rebuilt however often its node fails, and each call takes
  effect once, so any bound is met). (``lifetime`` is an actor option here.)
- Resources and scheduling (``num_cpus``, ``num_gpus``, ``memory``, ``resources``, ...): accepted and
  ignored, with one warning per option and process. Placement here is ``node=``, and a node runs
  any number of actors.
- What would change a result if it were ignored is refused, saying what to do here (``num_returns``,
  ``concurrency_groups``, ``retry_exceptions``, ...). (``max_concurrency`` is an option here.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

# Accepted: their meaning holds here without them. The value is checked: a wrong one is refused.
_MEANT = {
    "max_restarts": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= -1,
    "max_task_retries": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= -1,
    "max_retries": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= -1,
}
_IGNORED = ("num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "scheduling_strategy",
            "placement_group", "placement_group_bundle_index", "label_selector", "_metadata")
# Refused, with what to do here instead.
_REFUSED = {
    "num_returns": "return a tuple, and get it whole",
    "concurrency_groups": "one group per actor: max_concurrency= bounds its async methods' calls",
    "max_pending_calls": "see max_in_flight= (a caller waits for room instead of raising)",
    "retry_exceptions": "catch the exception in the function and call it again there",
    "runtime_env": "pass runtime_env= to actorrt.init()",
    "namespace": "names are cluster-wide: put the namespace in the name",
}
_warned: set[str] = set()


def accept(kind: str, options: dict[str, Any], own: Iterable[str]) -> dict[str, Any]:
    """``options`` less Ray's options that are accepted here (``kind``: "actor" or "remote-function";
    ``own``: the options of that kind here, which win over Ray's of the same name).

    Raises:
        ValueError: an accepted Ray option with a value that means something else here
            (``max_restarts=-5``).
    """
    own = set(own)
    kept = {}
    for name, value in options.items():
        if name in own:
            kept[name] = value
        elif name in _MEANT:
            if not _MEANT[name](value):
                raise ValueError(f"{name}={value!r}: here recovery is automatic and exact; give an int >= -1, or none")
        elif name in _IGNORED:
            if name not in _warned:
                _warned.add(name)
                log.warning("%s=%r is ignored: %s run on the node given by node= (or spread over the nodes), "
                            "and a node runs any number of them", name, value, f"{kind}s")
        else:
            kept[name] = value
    return kept


def hints(unknown: Iterable[str]) -> str:
    """What to use here instead of the Ray options in ``unknown`` that are refused."""
    return "; ".join(f"{name} is Ray's: here, {_REFUSED[name]}" for name in unknown if _REFUSED.get(name))
