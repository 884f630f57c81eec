"""Ray's options as a Ray program passes them (``actorrt/ray_options.py``): what holds here is
accepted, resources are ignored with one warning, and what would change a result is refused."""

from __future__ import annotations

import logging

import pytest

import actorrt


class Worker:
    def step(self):
        return 1


def test_what_holds_here_is_accepted_and_resources_are_ignored_with_one_warning(caplog):
    caplog.set_level(logging.WARNING, logger="actorrt.ray_options")
    first = actorrt.remote(num_cpus=1, num_gpus=0.5, max_restarts=-1, max_task_retries=3, lifetime="detached")(Worker)
    again = first.options(num_cpus=4, node=1, checkpoint_every=10)
    assert again._options.node == 1 and again._options.checkpoint_every == 10
    warned = [r.getMessage() for r in caplog.records]
    assert sum("num_cpus=" in m for m in warned) <= 1 and all("max_restarts" not in m for m in warned)
    f = actorrt.remote(max_retries=2, resources={"x": 1})(lambda: 1).options(node=0)
    assert f._options.node == 0


@pytest.mark.parametrize(("options", "error", "says"), [
    ({"concurrency_groups": {"io": 2}}, TypeError, "concurrency_groups is Ray's: here, one group per actor"),
    ({"namespace": "x"}, TypeError, "names are cluster-wide"),
    ({"lifetime": "forever"}, ValueError, 'lifetime must be None or "non_detached"'),
    ({"max_restarts": -5}, ValueError, "recovery is automatic and exact"),
])
def test_what_would_change_a_result_is_refused_saying_what_to_do_here(options, error, says):
    with pytest.raises(error, match=says):
        actorrt.remote(Worker).options(**options)


def test_a_function_refuses_num_returns_and_an_actor_option():
    f = actorrt.remote(lambda: (1, 2))
    with pytest.raises(TypeError, match="num_returns is Ray's: here, return a tuple, and get it whole"):
        f.options(num_returns=2)
    with pytest.raises(TypeError, match="unknown remote-function option checkpoint_every"):
        f.options(checkpoint_every=3)
