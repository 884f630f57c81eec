"""``actorrt list actors`` and ``actorrt kill NAME``: a cluster's named actors."""

from __future__ import annotations

from pathlib import Path

import click

from actorrt.cluster.cli_common import (
    head_address_option,
    live_head_target,
    print_table,
    session_dir_option,
    tls_options,
    token_option,
    with_head,
)
from actorrt.cluster.driver import Driver
from actorrt.cluster.head_client import HeadClient
from actorrt.exceptions import ActorDiedError, ClusterError, GetTimeoutError
from actorrt.net.tls import TlsFiles
from actorrt.rpc import head_pb2


@click.group(name="list")
def list_group() -> None:
    """List what a cluster holds."""


@list_group.command(name="actors")
@head_address_option
@token_option
@session_dir_option
@tls_options
def list_actors(address: str | None, token: str | None, session_dir: Path | None, tls: TlsFiles | None) -> None:
    """The named actors: name, class, node slot, actor id, and state.

    STATE is alive; dead (its constructor raised: `actorrt kill NAME` frees the name); starting
    (its node has not reported it yet; with ft="none", also an actor lost with its node); or node
    down (its node is being restarted, or is gone).
    """
    address, token, _ = live_head_target(address, token, session_dir)

    async def both(client: HeadClient) -> tuple[list[head_pb2.NamedActor], head_pb2.ClusterStatsReply]:
        return await client.list_actors(), await client.cluster_stats()

    actors, stats = with_head(address, token, both, tls)
    reported = {a.actor_id: "dead" if a.dead else "alive" for n in stats.nodes for a in n.actors}
    alive = {n.slot for n in stats.view.nodes if n.state == head_pb2.ALIVE}

    def state(actor: head_pb2.NamedActor) -> str:
        return reported.get(actor.actor_id) or ("starting" if actor.slot in alive else "node down")

    rows = [("NAME", "CLASS", "NODE", "ACTOR_ID", "STATE")]
    rows += [(a.name, a.class_name, str(a.slot), a.actor_id.hex()[:12], state(a)) for a in actors]
    print_table(rows)
    click.echo(f"named actors: {len(actors)}")


@click.command()
@click.argument("name")
@head_address_option
@token_option
@session_dir_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address this command listens on for the nodes' answers, as actorrt.init(host=): "
                   "this machine's address when the cluster runs on other machines.")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for the actor to run the kill (a plain method it runs ends first).")
@tls_options
def kill(name: str, address: str | None, token: str | None, session_dir: Path | None, host: str,
         timeout: float, tls: TlsFiles | None) -> None:
    """Kill the actor named NAME as actorrt.kill does, and free its name at once.

    The actor runs the tasks queued for it before the kill, then fails every later call with
    ActorDiedError; a replay keeps it killed. Waits until it has run the kill.
    """
    address, token, _ = live_head_target(address, token, session_dir)
    found = with_head(address, token, lambda c: c.get_actor(name), tls)
    if found is None:
        known = with_head(address, token, lambda c: c.list_actors(), tls)
        raise ClusterError(f"no actor is named {name!r} in the cluster at {address} (named actors: "
                           f"{', '.join(a.name for a in known) or 'none'}; `actorrt list actors` shows them)")
    driver = Driver(address, token, host, None, tls)  # a driver of its own, to send the kill as any driver does
    driver.start(0, 10.0)
    try:
        done = driver.worker.kill(found.actor_id, found.slot)
        driver.free_actor_names(found.actor_id)
        try:
            driver.get(done, timeout)
        except ActorDiedError:
            pass  # it was dead already (its constructor raised)
        except GetTimeoutError:
            raise ClusterError(
                f"{found.class_name} {name!r} ({found.actor_id.hex()[:12]}) on node {found.slot} has not run the "
                f"kill within {timeout:g} s (a plain method it runs is not interrupted, or its node is down): it "
                "stops when it does; its name is free already") from None
    finally:
        driver.shutdown()
    click.echo(f"killed {found.class_name} {name!r} ({found.actor_id.hex()[:12]}) on node {found.slot}; "
               "the name is free")

