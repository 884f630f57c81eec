import pytest

import actorrt
from actorrt.cluster.head_options import HeadOptions
from actorrt.handles import ActorOptions

PUBLIC = {
    "ActorClass", "ActorDiedError", "ActorHandle", "ActorMethodError", "ActorRTError", "ClusterError", "DeadlockError",
    "GetTimeoutError", "HeadUnavailableError", "NotInitializedError", "ObjectLostError", "ObjectRef", "RemoteFunction",
    "ReplayDivergedError", "RolledBackError",
    "SinkConflictError", "TaskCancelledError", "TaskError", "Timer", "call_every", "call_later", "now", "random", "rng",
    "UnknownActorError", "cancel", "checkpoint", "commit_lineage", "get", "get_actor", "init", "is_initialized", "kill",
    "kill_node", "nodes", "put", "ran", "record", "remote", "rollbacks", "shutdown", "stats", "wait",
}


def test_all_is_exactly_the_public_names():
    assert set(actorrt.__all__) == PUBLIC
    for name in actorrt.__all__:
        assert hasattr(actorrt, name)


def test_exception_tree():
    for name in PUBLIC:
        obj = getattr(actorrt, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, actorrt.ActorRTError)
    assert issubclass(actorrt.GetTimeoutError, TimeoutError)
    assert issubclass(actorrt.ActorMethodError, AttributeError)
    assert issubclass(actorrt.HeadUnavailableError, actorrt.ClusterError)


def test_api_before_init_is_a_clear_error():
    assert not actorrt.is_initialized()
    with pytest.raises(actorrt.NotInitializedError):
        actorrt.nodes()


def test_options_are_validated():
    with pytest.raises(ValueError):
        ActorOptions(node=-1)
    with pytest.raises(TypeError):
        ActorOptions(nondeterministic="yes")
    with pytest.raises(ValueError, match="checkpoint_every"):
        ActorOptions(checkpoint_every=0)
    with pytest.raises(ValueError, match="num_nodes"):
        actorrt.init(num_nodes=0)
    with pytest.raises(ValueError, match="store_shards"):
        HeadOptions(store_shards=0)
    with pytest.raises(ValueError, match="ft must be one of"):
        actorrt.init(ft="sometimes")
    assert not actorrt.is_initialized()


def test_remote_takes_a_class_or_a_function_and_options_are_checked():
    with pytest.raises(TypeError, match="takes a class or a function, not a str"):
        actorrt.remote("f")
    with pytest.raises(TypeError, match="cannot make a remote function of generator"):
        actorrt.remote(lambda: (yield))
    with pytest.raises(ValueError, match="node must be a slot number"):
        actorrt.remote(node=-1)(lambda: None)
    assert isinstance(actorrt.remote(lambda: None), actorrt.RemoteFunction)

    @actorrt.remote
    class C:
        def f(self):
            return 1

    with pytest.raises(TypeError, match="unknown actor option nodes: the options are checkpoint_every, ft, "
                                        "get_if_exists, lifetime, max_concurrency, max_in_flight, name,"):
        C.options(nodes=1)
    with pytest.raises(TypeError, match=r"\.remote"):
        C()
