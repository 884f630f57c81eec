"""Where a collective group's members are, as one process sees them: its own (in its actors'
extras) and the processes serving the others, which its messages go to on the runtime channel
``CHANNEL``; and what its view of the cluster says of them: which member gives its host's result
segment, and which is lost for good.
"""

from __future__ import annotations

from actorrt.collective.group import EXTRAS_PREFIX, GroupMember
from actorrt.collective.ops import Op
from actorrt.core.worker import Worker
from actorrt.rpc import head_pb2

CHANNEL = "actorrt.collective"


def local_members(worker: Worker, gid: bytes) -> list[GroupMember]:
    """The members of group ``gid`` hosted by this process."""
    host = worker.host
    found = []
    for actor in host.actors.values() if host is not None else []:
        for name, extra in actor.context.extras.items():
            if name.startswith(EXTRAS_PREFIX) and isinstance(extra, GroupMember) and extra.gid == gid:
                found.append(extra)
    return found


def local_member(worker: Worker, gid: bytes, rank: int) -> GroupMember | None:
    return next((m for m in local_members(worker, gid) if m.rank == rank), None)


def any_member(worker: Worker, gid: bytes) -> GroupMember | None:
    found = local_members(worker, gid)
    return found[0] if found else None


def group_name(worker: Worker, gid: bytes) -> str:
    member = any_member(worker, gid)
    return member.name if member is not None else gid.hex()[:12]


def addresses(worker: Worker, member: GroupMember) -> list[str]:
    """The processes serving the group's members now (this one included), each once."""
    out: list[str] = []
    for slot in member.slots:
        info = worker.membership.serving(slot)
        if info is not None and info.state == head_pb2.ALIVE and info.address and info.address not in out:
            out.append(info.address)
    if worker.address not in out:
        out.append(worker.address)
    return out


def alive_addresses(worker: Worker) -> set[str]:
    return {n.address for n in worker.membership.alive_nodes() if n.address}


def leads_host(worker: Worker, member: GroupMember, op: Op, seq: int) -> bool:
    """Whether ``member`` gives its host's result segment for call ``seq``: the host's first member
    from the call's leader on, in turn, as this process's view places the members. If the view is
    out of date, a host may get two (the first counts) or none (made once every member came)."""
    host = worker.shared.host
    for rank in [(op.leader(seq, member.size) + i) % member.size for i in range(member.size)]:
        info = worker.membership.serving(member.slots[rank])
        if rank == member.rank or (info is not None and info.host_id == host):
            return rank == member.rank
    return False


def rank_lost(worker: Worker, slot: int, source: str | None, gone: set[str]) -> bool:
    """Whether a member on ``slot`` died for good: its slot has no future, or nothing rebuilds
    it (``ft="none"``; under global rollback every process starts again instead)."""
    ft = worker.ft
    if ft.rolls_back:
        return False
    if not worker.membership.accepts(slot):
        return True
    info = worker.membership.serving(slot)
    died = source in gone or info is None or info.state != head_pb2.ALIVE
    return died and not ft.logs_lineage
