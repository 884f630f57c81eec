"""A task's arguments as its code gets them: inline values deserialized, refs fetched and resolved."""

from __future__ import annotations

from typing import Any

from actorrt.core.awaits import Awaits
from actorrt.core.serialization import deserialize, missing_module, runtime_error
from actorrt.core.task_spec import SenderContext
from actorrt.exceptions import DeadlockError
from actorrt.objects.fetches import Fetches
from actorrt.rpc import common_pb2 as pb


class ArgumentError(Exception):
    """The task cannot run as called (no such method, or an argument whose task failed); it
    fails with ``error``."""

    def __init__(self, error: pb.RemoteError) -> None:
        self.error = error


class MissingArgumentError(ArgumentError):
    """A reference argument's value is lost (its holder is gone): a replay cannot run the task."""

    def __init__(self, object_id: bytes, error: pb.RemoteError) -> None:
        super().__init__(error)
        self.object_id = object_id


async def resolve_args(fetches: Fetches, awaits: Awaits, waiter: SenderContext, spec: pb.TaskSpec,
                       resolved: list[bytes], kept_for_replay: bool = True) -> tuple[list[Any], dict[str, Any]]:
    """``spec``'s arguments, for ``waiter`` (the actor or call that runs it); ``resolved`` gets the
    id of each ref fetched (to unborrow after the task). With ``kept_for_replay`` the owner of each
    ref keeps its value for this task's replay. An argument that cannot come (a cycle of awaits)
    fails the task."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    needed_by = (spec.receiver, spec.sender, spec.task_counter) if kept_for_replay else None
    for arg in spec.args:
        if arg.WhichOneof("kind") == "ref":
            resolved.append(arg.ref.object_id)  # before awaiting: unborrowed even if cancelled
            try:
                value = await awaits.watch(waiter, arg.ref, lambda ref=arg.ref: fetches.resolve(ref, needed_by))
            except DeadlockError as exc:
                raise ArgumentError(runtime_error(pb.DEADLOCK, str(exc), spec.receiver)) from None
            if value.WhichOneof("kind") == "error":
                if value.error.kind in (pb.OBJECT_LOST, pb.RESULT_NOT_KEPT):
                    raise MissingArgumentError(arg.ref.object_id, value.error)
                raise ArgumentError(value.error)  # its task failed: so did this one, the first time too
        try:
            item = deserialize(value.value if arg.WhichOneof("kind") == "ref" else arg.value)
        except ModuleNotFoundError as exc:
            what = f"argument {arg.keyword!r}" if arg.keyword else f"argument {len(args)}"
            raise missing_module(exc, f"{what} of {spec.method}") from None
        if arg.keyword:
            kwargs[arg.keyword] = item
        else:
            args.append(item)
    return args, kwargs
