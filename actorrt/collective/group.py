"""A collective group as each member keeps it: its name, the members in rank order, and how many
calls this member made. It is part of the member's state (``SenderContext.extras``): checkpointed
with it and restored for its replay, so a replayed member numbers its calls as it did before.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

EXTRAS_PREFIX = "collective:"


def group_id(name: str, members: list[bytes]) -> bytes:
    """A group's identity: its name and its members (a group made again of other actors under the
    same name is another group)."""
    h = hashlib.blake2b(name.encode(), digest_size=16)
    for member in members:
        h.update(member)
    return h.digest()


def result_id(gid: bytes, seq: int) -> bytes:
    """The object ID under which the members keep the result of call ``seq`` of group ``gid``."""
    return hashlib.blake2b(gid + seq.to_bytes(8, "little"), digest_size=20).digest()


@dataclass
class GroupMember:
    name: str
    gid: bytes
    rank: int
    members: list[bytes]  # actor IDs, in rank order
    slots: list[int]  # the node slot each was placed on (the view says who serves it now)
    call_timeout: float | None = None  # the group's default: how long a call waits for the others
    calls: int = 0  # collective calls this member made in the group: the next call's seq
    in_call: str = ""  # the call under way, if one is (a member makes one at a time)
    unchecked_bytes: int = 0  # of the results kept for this member's replay since its last checkpoint
    keep_limit: int = 0  # past it, the member checkpoints after its task (0: never)

    @property
    def size(self) -> int:
        return len(self.members)

    def covered(self) -> list[tuple[bytes, int]]:
        """What a checkpoint of this member covers: its replay makes no call up to ``calls``, so
        the others may stop keeping those results for it."""
        return [(self.gid, self.calls)]

    def wants_checkpoint(self) -> bool:
        """The results kept for this member's replay passed the limit: a checkpoint lets them go
        (a memory-pressure checkpoint, as a driver asks of the actors it keeps arguments for)."""
        return bool(self.keep_limit) and self.unchecked_bytes > self.keep_limit

    def checkpointed(self) -> None:
        self.unchecked_bytes = 0
