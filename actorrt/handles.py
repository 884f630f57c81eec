"""Remote classes, actor handles and their methods: the user-facing side of actors."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from actorrt import ray_options
from actorrt.core import context
from actorrt.core.object_ref import ObjectRef
from actorrt.core.task_spec import CALL_METHOD, ONCE_METHOD
from actorrt.exceptions import ActorMethodError, ActorRTError
from actorrt.lineage import ids, policies
from actorrt.lineage.options import FaultToleranceMode
from actorrt.lineage.policies import Policy
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import head_pb2
from actorrt.util import pickling

T = TypeVar("T")


@dataclass(frozen=True)
class ActorOptions:
    """Where and how an actor runs.

    Attributes:
        node: the node slot to place it on; None spreads actors over the live nodes.
        nondeterministic: the actor may receive from many senders in arrival order, so the
            lineage stash records its execution order (paper §4.1).
        checkpoint_every: checkpoint the actor after every N tasks it runs (None: only when
            ``actorrt.checkpoint`` asks), so recovery replays at most N tasks.
        name: a name, unique in the cluster, by which any driver finds the actor
            (``actorrt.get_actor``); it lives until the actor is killed, beyond its driver.
        get_if_exists: with ``name``, from a driver: if an actor of that name exists, ``.remote()``
            returns its handle instead of creating one (its constructor does not run again); it
            must be of the same class.
        max_in_flight: back-pressure: each caller (a driver, or an actor) has at most this many
            calls to the actor unanswered. A driver's ``.remote()`` blocks for room; an actor
            awaits it with ``await handle.method.remote_async(...)``. The handles the creation
            returns carry the bound (pickled ones too); None: calls are never held back.
        standby: passive replicas of the actor kept on other nodes (0 or 1). A standby holds the
            actor's newest checkpoint, loaded, and takes the actor's place when its node fails: only
            the tasks since that checkpoint are replayed, and nothing waits for the node's restart.
            It costs a copy of the state in the standby's memory, and a read of each checkpoint
            there; pair it with ``checkpoint_every``. Needs a cluster that logs lineage.
        max_concurrency: calls of the actor's ``async def`` methods that may run at once (1: one
            call at a time). They interleave at their awaits, and each step's place in the actor's
            order is recorded, so a replay after a failure goes through the same steps. Other
            tasks of the actor (a plain method, a checkpoint) run alone.
        lifetime: None (or ``"non_detached"``): an actor a driver creates is released (killed after the calls queued for
            it) once that driver's handle to it is gone, if no copy of the handle was ever made
            (pickled: passed to a task, an actor or ``put``). ``"detached"``: it lives until it is
            killed or the cluster stops, as every named actor and every actor an actor or a remote
            function creates does. An actor outlives the driver that created it either way.
        ft: how the actor survives a failure, in a cluster that stashes lineage (the default):
            ``"lineage_stash"`` (the default: its lineage is logged as it runs, and replayed);
            ``"checkpoint"`` or ``actorrt.lineage.policies.checkpoint(every_tasks=, every_s=)``
            (lazily: logged only when what it made must leave before its next checkpoint; its
            calls to other actors wait for that checkpoint; the None results of the methods its
            class names in ``__actorrt_acks__`` go at once); ``"eager"`` (group commits every
            50 ms, and nothing it made leaves before the one that covers it); or ``"ephemeral"``
            (nothing kept: its constructor runs again after a failure, and its callers send again
            what it had not answered; it calls no actor). See ``actorrt.lineage.policies``.
    """

    node: int | None = None
    nondeterministic: bool = True
    checkpoint_every: int | None = None
    name: str | None = None
    get_if_exists: bool = False
    max_in_flight: int | None = None
    standby: int = 0
    max_concurrency: int = 1
    lifetime: str | None = None
    ft: Policy | str | None = None

    def __post_init__(self) -> None:
        check_node(self.node)
        object.__setattr__(self, "ft", policies.policy(self.ft))
        if self.ft.kind != "lineage_stash":
            if self.checkpoint_every is not None:
                raise ValueError(f"ft={self.ft} sets when the actor checkpoints: give no checkpoint_every")
            if self.standby:
                raise ValueError(f"standby= is for actors that log their lineage, not ft={self.ft}")
            if self.max_concurrency > 1:
                raise ValueError(f"max_concurrency > 1 needs the lineage stash (ft='lineage_stash'), not ft={self.ft}")
        if not isinstance(self.nondeterministic, bool):
            raise TypeError("nondeterministic must be a bool")
        if self.checkpoint_every is not None and (not isinstance(self.checkpoint_every, int)
                                                  or self.checkpoint_every < 1):
            raise ValueError(f"checkpoint_every must be an int >= 1 or None, not {self.checkpoint_every!r}")
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise ValueError(f"name must be a non-empty str or None, not {self.name!r}")
        if not isinstance(self.get_if_exists, bool):
            raise TypeError(f"get_if_exists must be a bool, not {self.get_if_exists!r}")
        if self.get_if_exists and self.name is None:
            raise ValueError("get_if_exists=True needs a name=: it looks the actor up by its name")
        if self.max_in_flight is not None and (isinstance(self.max_in_flight, bool)
                                               or not isinstance(self.max_in_flight, int) or self.max_in_flight < 1):
            raise ValueError(f"max_in_flight must be an int >= 1 or None, not {self.max_in_flight!r}")
        if isinstance(self.standby, bool) or self.standby not in (0, 1):
            raise ValueError(f"standby must be 0 or 1 (standbys per actor), not {self.standby!r}")
        if isinstance(self.max_concurrency, bool) or not isinstance(self.max_concurrency, int) \
                or self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be an int >= 1, not {self.max_concurrency!r}")
        if self.lifetime not in (None, "non_detached", "detached"):
            raise ValueError(f'lifetime must be None or "non_detached" (released once its handle is gone), or '
                             f'"detached", not {self.lifetime!r}')


def check_node(node: Any) -> None:
    """``node=`` (of an actor or a function) must be a slot number or None."""
    if node is not None and (isinstance(node, bool) or not isinstance(node, int) or node < 0):
        raise ValueError(f"node must be a slot number >= 0 or None, not {node!r}")


def actor_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` as actor options: Ray's that hold here dropped (``ray_options``); TypeError
    naming any other that is not one, and what the options are."""
    return check_option_names("actor", options, ActorOptions.__dataclass_fields__)


def check_option_names(kind: str, options: dict[str, Any], valid: Iterable[str]) -> dict[str, Any]:
    """``options`` less the Ray options that hold here; TypeError naming what else is not a
    ``kind`` option, the valid ones, and for Ray's what to use here instead."""
    options = ray_options.accept(kind, options, valid)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        hints = ray_options.hints(unknown)
        raise TypeError(f"unknown {kind} option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: the "
                        f"options are {', '.join(sorted(valid))}" + (f" ({hints})" if hints else ""))
    return options


def check_arguments(target: Any, call: str, args: tuple, kwargs: dict[str, Any]) -> None:
    """Raise TypeError, as a local call would, if ``args`` and ``kwargs`` do not fit ``target``'s
    signature (a class's: its constructor's): at the call, not on a node later."""
    try:
        signature = _cached_signature(target)
    except TypeError:  # an unhashable callable
        signature = _signature(target)
    if signature is None:  # a builtin or an extension type: the node says
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{call}: {exc}") from None


def _signature(target: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


_cached_signature = functools.lru_cache(maxsize=1024)(_signature)  # a remote function's calls check it each


def _public_methods(cls: type) -> list[str]:
    return sorted(n for n, v in inspect.getmembers(cls, callable) if not n.startswith("_"))


class ActorClass(Generic[T]):
    """What ``@actorrt.remote`` makes of a class: ``.remote(...)`` creates an actor."""

    def __init__(self, cls: type[T], options: ActorOptions = ActorOptions()) -> None:
        if not inspect.isclass(cls):
            raise TypeError(f"an actor class is made of a class, not of a {type(cls).__name__}")
        self._cls = cls
        self._options = options
        self._methods = _public_methods(cls)
        self._blob = pickling.CachedPickle(cls)
        self.__name__ = cls.__name__
        self.__doc__ = cls.__doc__

    def options(self, **kwargs: Any) -> ActorClass[T]:
        """A copy with other ``ActorOptions`` (``node=``, ``nondeterministic=``, ``checkpoint_every=``,
        ``name=``, ``get_if_exists=``, ``max_in_flight=``, ``standby=``, ``max_concurrency=``,
        ``lifetime=``, ``ft=``)."""
        copy = ActorClass(self._cls, replace(self._options, **actor_options(kwargs)))
        copy._blob = self._blob
        return copy

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle:
        """Create the actor (its constructor runs on its node) and return its handle at once.

        Raises:
            TypeError: the arguments do not fit the constructor's signature (nothing is sent).
        """
        check_arguments(self._cls, f"{self.__name__}.remote()", args, kwargs)
        rt = context.current_or_start()
        name, class_name = self._options.name, self._cls.__qualname__
        if self._options.get_if_exists:
            if context.current_sender.get(None) is not None:
                raise ActorRTError(
                    "options(get_if_exists=True) is for drivers: an actor cannot wait for the head's answer; "
                    "pass the actor's handle to it instead")
            found = rt.find_actor(name)  # the usual case, a rerun: nothing is pickled, no id is spent
            if found is not None:
                return self._existing(found)
        creation = pb.ActorCreation(
            class_blob=self._blob.get(),
            class_name=self._cls.__qualname__,
            methods=self._methods,
            nondeterministic=self._options.nondeterministic,
            checkpoint_every=self._options.checkpoint_every or self._options.ft.every_tasks or 0,
            standby=self._options.standby,
            max_concurrency=self._options.max_concurrency,
            policy=self._options.ft.to_proto(),
        )
        if self._options.ft.kind != "lineage_stash" and rt.worker.ft.mode is not FaultToleranceMode.LINEAGE_STASH:
            raise ActorRTError(f"ft={self._options.ft} needs a cluster that stashes lineage (actorrt.init(ft="
                               f"'lineage_stash'), the default), not ft={rt.worker.ft.mode.value!r}")

        def take_name(actor_id: bytes, slot: int) -> None:
            if name is None:
                return
            holder = rt.name_actor(head_pb2.NamedActor(name=name, actor_id=actor_id, class_name=class_name,
                                                       methods=self._methods, slot=slot))
            if holder is None or holder.actor_id == actor_id:
                return
            if not self._options.get_if_exists:
                raise ValueError(f"an actor named {name!r} exists already (a {holder.class_name}): get it with "
                                 f"actorrt.get_actor({name!r}) or options(get_if_exists=True), or choose another name")
            # Another driver took the name since this one looked: the head's registry chose it.
            raise _Exists(self._existing(holder))  # the creation is not sent

        if name is not None:
            # The name is taken while this process's submissions wait (the creation's place in their
            # order): not while the head is down, then, which would hold up every other thread.
            rt.head_reachable()
        try:
            actor_id, slot, created = rt.worker.submitter.create_actor(creation, args, kwargs, self._options.node,
                                                                       take_name)
        except _Exists as exists:
            return exists.handle
        if name is None and self._options.lifetime != "detached" and context.current_sender.get(None) is None:
            rt.worker.releases.created(actor_id, slot)  # here, before any copy of the handle can be made
        rt.worker.call_soon(rt.worker.unretrieved.created, actor_id, created.object_id)
        return ActorHandle(actor_id, class_name, tuple(self._methods), slot, self._options.max_in_flight, created)

    def _existing(self, holder: head_pb2.NamedActor) -> ActorHandle:
        """The handle of the actor that has the name, for ``get_if_exists``: of this class (by its
        qualified name), or a TypeError naming both."""
        if holder.class_name != self._cls.__qualname__:
            raise TypeError(f"the actor named {holder.name!r} is a {holder.class_name}, not a "
                            f"{self._cls.__qualname__}: choose another name, or free this one with "
                            f"actorrt.kill(actorrt.get_actor({holder.name!r})) or `actorrt kill {holder.name}`")
        return ActorHandle(holder.actor_id, holder.class_name, tuple(holder.methods), holder.slot,
                           self._options.max_in_flight)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"create the actor with {self.__name__}.remote(...), not {self.__name__}(...)")

    def __getattr__(self, name: str) -> Any:
        # The class's own attributes through the decorated name, as a method reads them
        # (``Worker.GP``, ``Worker.helper(...)`` for a static method), here and on the nodes.
        if name.startswith("__") or "_cls" not in self.__dict__:
            raise AttributeError(name)
        try:
            value = getattr(self._cls, name)
        except AttributeError:
            raise AttributeError(f"actor class {self.__name__} has no attribute {name!r}") from None
        if isinstance(value, types.FunctionType):
            # A stand-in, not the function: cloudpickle looks up a method of a class it pickles by
            # value under its qualified name (``module.Worker.step``), and finding the very
            # function here, it would pickle it by reference, for nodes that cannot import ``module``.
            function = value
            value = functools.wraps(function)(lambda *args, **kwargs: function(*args, **kwargs))
        return value

    def __reduce__(self) -> tuple:
        # Not the cached pickle of the class (a copy of it inside itself); and the method names as
        # they are, since a method of the class may be what holds this (then the class is still
        # being unpickled when this is, and has no methods yet).
        return (_actor_class, (self._cls, self._options, self._methods))


def _actor_class(cls: type[T], options: ActorOptions, methods: list[str]) -> ActorClass[T]:
    actor_class = ActorClass.__new__(ActorClass)
    actor_class.__dict__.update(_cls=cls, _options=options, _methods=methods, _blob=pickling.CachedPickle(cls),
                                __name__=cls.__name__, __doc__=cls.__doc__)
    return actor_class


class _Exists(Exception):  # noqa: N818 - not an error: the way out of a creation that finds its actor
    def __init__(self, handle: ActorHandle) -> None:
        self.handle = handle


class ActorHandle:
    """A picklable reference to a live actor; ``handle.method.remote(...)`` submits a task."""

    def __init__(self, actor_id: bytes, class_name: str, methods: tuple[str, ...], slot: int,
                 max_in_flight: int | None = None, created: ObjectRef | None = None) -> None:
        self.actor_id = actor_id
        self.class_name = class_name
        self.methods = methods
        self.slot = slot
        self.max_in_flight = max_in_flight  # calls unanswered per caller (ActorOptions.max_in_flight)
        # The creator's handle holds its creation's result: a constructor's error no call raised
        # is told when the handle goes (core/unretrieved.py). Copies elsewhere do not.
        self._created = created

    def __getattr__(self, name: str) -> ActorMethod:
        if name == CALL_METHOD:  # fn(instance, *args) as a task of the actor, for libraries
            return ActorMethod(self, name)
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self.methods:
            raise ActorMethodError(f"actor class {self.class_name} has no method {name!r} "
                                   f"(it has: {', '.join(self.methods) or 'none'})")
        return ActorMethod(self, name)

    def __reduce__(self) -> tuple:
        if self._created is not None:  # a copy may be anywhere now: the actor is not released with this handle
            context.keep_actor(self.actor_id)
        return (ActorHandle, (self.actor_id, self.class_name, self.methods, self.slot, self.max_in_flight))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorHandle) and other.actor_id == self.actor_id

    def __hash__(self) -> int:
        return hash(self.actor_id)

    def __repr__(self) -> str:
        return f"ActorHandle({self.class_name}, {ids.short(self.actor_id)}, node={self.slot})"


class ActorMethod:
    def __init__(self, handle: ActorHandle, name: str) -> None:
        self._handle = handle
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        """Submit the call; returns a ref to the result. At once, unless the actor bounds calls in
        flight (``max_in_flight``): then a driver blocks until it has room, and an actor must use
        ``remote_async``."""
        handle = self._handle
        submitter = context.current().worker.submitter
        bounded = submitter.bounds(handle.actor_id, handle.max_in_flight)
        if bounded:
            submitter.wait_for_room(handle.actor_id, handle.max_in_flight, f"{handle.class_name}.{self._name}")
        return submitter.submit_task(handle.actor_id, handle.slot, self._name, args, kwargs, bounded=bounded)

    async def remote_async(self, *args: Any, **kwargs: Any) -> ObjectRef:
        """Submit the call once the channel has room; returns a ref to the result (await the ref
        for the result itself). Without ``max_in_flight`` it is ``remote``. Inside an actor the
        wait holds its mailbox: a producer that is ahead of its consumer stops taking input."""
        handle = self._handle
        submitter = context.current().worker.submitter
        bounded = submitter.bounds(handle.actor_id, handle.max_in_flight)
        if bounded:
            await submitter.room(handle.actor_id, handle.max_in_flight)
        return submitter.submit_task(handle.actor_id, handle.slot, self._name, args, kwargs, bounded=bounded)

    def remote_once(self, source: str, batch: int, seq: int, *args: Any, **kwargs: Any) -> ObjectRef:
        """Submit the call, to be applied at most once per mark ``(batch, seq)`` of ``source``.

        For sources that may send the same input again, from any driver (a streaming query
        restarted from its checkpoint): the actor skips a call whose mark is not above the last
        one it applied from ``source`` (marks of a source only grow, and a mark counts once its
        call succeeded). The bridge's ``stream`` marks micro-batches this way.

        Returns:
            A ref to the result: the method's, or None for a call skipped as applied before.
        """
        submitter = context.current().worker.submitter
        return submitter.submit_task(self._handle.actor_id, self._handle.slot, ONCE_METHOD,
                                     (source, batch, seq, self._name, *args), kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"call actor methods with .{self._name}.remote(...)")
