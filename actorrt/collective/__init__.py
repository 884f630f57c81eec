"""Collective communication between actors: allreduce, allgather, broadcast, reduce_scatter and
barrier, shaped like Ray's ``ray.util.collective``, on the lineage stash.

From the driver, ``create_collective_group(actors, group_name)``; inside the members' ``async def``
methods, ``await allreduce(array, group_name)``. On one host a call moves no bytes through
sockets: every member writes its input once into shared memory and reduces its slice of all
inputs straight into the result, which every member maps. A call is one logged event of each
member, and its result is kept by the members until their checkpoints cover it: a member rebuilt
after a failure gets its calls' results from the others instead of running them again, and the
others never roll back.
"""

from actorrt.collective.api import (
    allgather,
    allreduce,
    barrier,
    broadcast,
    create_collective_group,
    get_collective_group_size,
    get_rank,
    reduce_scatter,
    stats,
)
from actorrt.collective.service import CollectiveError

__all__ = [
    "CollectiveError",
    "allgather",
    "allreduce",
    "barrier",
    "broadcast",
    "create_collective_group",
    "get_collective_group_size",
    "get_rank",
    "reduce_scatter",
    "stats",
]
