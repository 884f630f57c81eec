"""The ``actorrt`` command: start a head or add a node, show a cluster's status, stop it.

``actorrt start --head`` on one machine, ``actorrt start --address HOST:PORT`` on each other
machine, ``actorrt status``, ``actorrt list actors``, ``actorrt kill NAME``, ``actorrt stop``.
Every actorrt exception becomes a one-line error and exit code 1; usage errors exit 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from actorrt.cluster import session
from actorrt.cluster.driver import Driver
from actorrt.cluster.head_client import HEAD_LOSS_GRACE_S, HeadClient
from actorrt.cluster.head_options import OPTION_NAMES, HeadOptions, head_options
from actorrt.cluster.launch import start_head
from actorrt.cluster.session import SESSION_FILE, TOKEN_ENV, Session
from actorrt.core.task_spec import KILL_METHOD
from actorrt.exceptions import ActorDiedError, ActorRTError, ClusterError, GetTimeoutError
from actorrt.lineage import ids
from actorrt.rpc import head_pb2, node_pb2
from actorrt.store.clients import without_password
from actorrt.util.processes import process_alive

T = TypeVar("T")

STOP_TIMEOUT_S = 15.0
POLL_S = 0.1


class _Group(click.Group):
    """Turns actorrt exceptions into click errors: a clear message, no traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ActorRTError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Start, inspect and stop actorrt clusters."""


# ---- helpers ------------------------------------------------------------------------------------


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def _with_head(address: str, token: str, fn: Callable[[HeadClient], Awaitable[T]]) -> T:
    """Run ``fn(client)`` against the head in a short-lived event loop."""

    async def run() -> T:
        client = HeadClient(address, token)
        try:
            return await fn(client)
        finally:
            await client.aclose()

    return asyncio.run(run())


async def _poll_view(client: HeadClient, check: Callable[[head_pb2.ClusterView], T | None], timeout: float,
                     what: str) -> T:
    """Poll the head's view until ``check`` returns something other than None."""
    deadline = time.monotonic() + timeout
    while True:
        found = check((await client.cluster_stats()).view)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise ClusterError(f"{what} within {timeout:g} s")
        await asyncio.sleep(POLL_S)


def _target(address: str | None, token: str | None, session_dir: Path) -> tuple[str, str, Session | None]:
    """The head address, the token, and the local session when it names that head.

    The address defaults to the session file's; the token follows ``session.token_for`` (given,
    then ``ACTORRT_TOKEN``, then the session file), also for a session dir other than the default.
    """
    found = session.read(session_dir)
    if address is None:
        if found is None:
            raise ClusterError(
                f"no cluster is running on this machine (no {session_dir / SESSION_FILE}); pass --address HOST:PORT"
            )
        address = found.head_address
    elif found is None or found.head_address != address:
        try:  # a head elsewhere: say at once if the address is malformed, or nothing answers there
            address = session.resolve(address)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--address") from None
    local = found if found is not None and found.head_address == address else None
    if local is not None:
        return address, token or os.environ.get(TOKEN_ENV) or local.token, local
    return address, session.token_for(address, token), None


def _live_target(address: str | None, token: str | None,
                 session_dir: Path | None) -> tuple[str, str, Session | None]:
    """``_target``, and an error if the session file names a head that is not running."""
    address, token, local = _target(address, token, session_dir or session.default_dir())
    if local is not None and not process_alive(local.head_pid):
        raise ClusterError(f"the head in {Path(local.session_dir) / SESSION_FILE} (pid {local.head_pid}) "
                           "is not running; `actorrt stop` clears the stale session file")
    return address, token, local


def _log_tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


_session_dir_option = click.option(
    "--session-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Session directory (default: $ACTORRT_SESSION_DIR, else ~/.actorrt).",
)
_TOKEN_HELP = (
    f"Cluster token (default: ${TOKEN_ENV}, else the session file). Prefer the environment variable: "
    "a command line is visible to other users."
)
_token_option = click.option("--token", default=None, help=_TOKEN_HELP)


# ---- start --------------------------------------------------------------------------------------


@cli.command()
@click.option("--head", "as_head", is_flag=True, help="Start a head (with its nodes and store shards).")
@click.option("--address", default=None, metavar="HOST:PORT", help="Add a node to the head at HOST:PORT.")
@head_options
@_session_dir_option
@click.option("--token", default=None,
              help=_TOKEN_HELP + f" With --head: the token it requires (default: ${TOKEN_ENV}, else a new one).")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for the nodes to come up.")
@click.pass_context
def start(ctx: click.Context, as_head: bool, address: str | None, head: HeadOptions, session_dir: Path | None,
          token: str | None, timeout: float) -> None:
    """Start a head (--head) or add a node to a running head (--address HOST:PORT).

    Both run in the background and outlive this command. A head writes the session file (address,
    token, pid) into the session directory; `actorrt stop` stops it. A node added with --address is
    not restarted by the head if it dies, and exits by itself within a few seconds of losing the head.
    --port and the options after it up to --store-url are the head's (with --head only).
    """
    if as_head == (address is not None):
        raise click.UsageError("pass --head to start a head, or --address HOST:PORT to add a node")
    session_dir = session_dir or session.default_dir()
    if as_head:
        _start_head(session_dir, head, token or os.environ.get(TOKEN_ENV), timeout)
        return
    head_only = [f"--{name.replace('_', '-')}" for name in OPTION_NAMES
                 if name != "host" and ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if head_only:
        raise click.UsageError(f"{', '.join(head_only)}: only valid with --head")
    _add_node(address, head.host, session_dir, token, timeout)


def _start_head(session_dir: Path, options: HeadOptions, token: str | None, timeout: float) -> None:
    try:
        head = start_head(session_dir, options, token=token, tied_to_caller=False)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--store-url") from None
    address = head.session.head_address
    nodes = options.nodes

    def all_alive(view: head_pb2.ClusterView) -> bool | None:
        alive = [n for n in view.nodes if n.managed and n.state == head_pb2.ALIVE]
        return True if len(alive) >= nodes else None

    try:
        _with_head(address, head.session.token,
                   lambda c: _poll_view(c, all_alive, timeout, f"the head's {nodes} nodes did not all come up"))
    except BaseException as exc:
        # Leave nothing half-started behind (also on Ctrl-C).
        with contextlib.suppress(ActorRTError):
            _with_head(address, head.session.token, lambda c: c.shutdown())
        head.wait_stopped(STOP_TIMEOUT_S)
        session.remove(session_dir)
        if isinstance(exc, ClusterError):
            raise ClusterError(f"{exc}; stopped the head (logs in {head.log_path.parent})") from None
        raise

    env_hint = "" if session_dir == session.default_dir() else f"{session.SESSION_DIR_ENV}={session_dir} "
    click.echo(f"Started the actorrt head at {address} (pid {head.process.pid}) "
               f"with {nodes} nodes and {options.store_shards} store shards.")
    click.echo(f"  session file: {session_dir / SESSION_FILE}")
    click.echo(f"  logs:         {head.log_path.parent}")
    click.echo("Connect from Python on this machine"
               + (f" (with {session.SESSION_DIR_ENV}={session_dir} set)" if env_hint else "") + ":")
    click.echo(f'  actorrt.init(address="{address}")')
    click.echo(f"Add a node from another machine, with {TOKEN_ENV} set to the token in the session file:")
    click.echo(f"  actorrt start --address {address} --host <that machine's address>")
    click.echo("Stop the cluster:")
    click.echo(f"  {env_hint}actorrt stop")


def _add_node(address: str, host: str, session_dir: Path, token: str | None, timeout: float) -> None:
    address, token, _ = _target(address, token, session_dir)
    # Fail early, with the head's own error, if it is unreachable or refuses the token.
    _with_head(address, token, lambda c: c.cluster_stats())
    logs = session_dir / session.LOGS_DIR
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = logs / f"node-starting-{os.getpid()}.log"
    argv = [sys.executable, "-m", "actorrt.cluster.node", "--head", address, "--host", host]
    with open(log_path, "ab") as log:
        # Its own session, so it outlives this command and a Ctrl-C in this terminal.
        proc = subprocess.Popen(argv, env=dict(os.environ, **{TOKEN_ENV: token}), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    hostname = socket.gethostname()

    def joined(view: head_pb2.ClusterView) -> head_pb2.NodeInfo | None:
        if proc.poll() is not None:
            raise ClusterError(f"the node exited with code {proc.returncode}; its log ends:\n{_log_tail(log_path)}")
        # Pids are only unique per machine, so match the hostname too.
        for n in view.nodes:
            if n.pid == proc.pid and n.hostname == hostname and n.state == head_pb2.ALIVE:
                return n
        return None

    try:
        info = _with_head(address, token, lambda c: _poll_view(c, joined, timeout, "the node did not join"))
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    final_log = logs / f"node-{info.slot}-pid{proc.pid}.log"
    os.replace(log_path, final_log)  # the node keeps writing through its open descriptor
    click.echo(f"Added node {info.slot} (pid {proc.pid}, serving on {info.address}) to the head at {address}.")
    click.echo(f"  log: {final_log}")
    click.echo(f"It is not restarted if it dies, and exits within ~{HEAD_LOSS_GRACE_S:g} s of losing the head.")


# ---- status -------------------------------------------------------------------------------------


@cli.command()
@click.option("--address", default=None, metavar="HOST:PORT", help="Head address (default: the session file's).")
@_token_option
@_session_dir_option
def status(address: str | None, token: str | None, session_dir: Path | None) -> None:
    """Show the head, its node slots and its store shards."""
    address, token, local = _live_target(address, token, session_dir)
    reply = _with_head(address, token, lambda c: c.cluster_stats())
    actors = {s.slot: sum(a.actor_id != ids.FUNCTIONS for a in s.actors) for s in reply.nodes}
    memory = {s.slot: _memory_cells(s) for s in reply.nodes}
    view = reply.view
    pid = f" (pid {local.head_pid})" if local is not None else ""
    click.echo(f"head {address}{pid}, view revision {view.revision}")
    rows = [("SLOT", "EPOCH", "STATE", "ADDRESS", "PID", "HOST", "MANAGED", "ACTORS", "SHM_MB", "PINNED_MB",
             "SPILLED_MB", "FREED_MB", "RESTARTS", "LAST_FAILURE")]
    for n in view.nodes:
        rows.append((str(n.slot), str(n.epoch), head_pb2.NodeState.Name(n.state), n.address or "-",
                     str(n.pid or "-"), n.hostname or "-", "yes" if n.managed else "no",
                     str(actors[n.slot]) if n.slot in actors else "-", *memory.get(n.slot, ("-",) * 4),
                     str(max(n.epoch - 1, 0) if n.managed else 0), n.last_failure or "-"))
    _table(rows)
    published = [(s.slot, a) for s in reply.nodes for a in s.actors if a.metrics or a.label]
    if published:
        click.echo("actors that publish metrics:")
        _table([("SLOT", "ACTOR", "QUEUED", "METRICS")] + [
            (str(slot), a.label or f"{a.class_name}({a.actor_id.hex()[:8]})", str(a.queued),
             " ".join(f"{name}={value:.4g}" for name, value in sorted(a.metrics.items())) or "-")
            for slot, a in published])
    alive = sum(n.state == head_pb2.ALIVE for n in view.nodes)
    click.echo(f"nodes alive: {alive} of {len(view.nodes)}")
    if view.store_url:
        click.echo(f"lineage store: {without_password(view.store_url)}")
    else:
        shards = ", ".join(s.address for s in view.store_shards) or "none"
        click.echo(f"store shards ({len(view.store_shards)}): {shards}")


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


def _memory_cells(stats: node_pb2.NodeStatsReply) -> tuple[str, str, str, str]:
    """A node's shared memory in use, what it keeps for replays (in memory, spilled), and what it
    has freed of that since start, in MiB."""
    mib = 1 << 20
    kept = stats.objects_kept
    return (f"{stats.shared_memory.in_use_bytes / mib:.0f}", f"{kept.pinned_bytes / mib:.0f}",
            f"{kept.spilled_bytes / mib:.0f}", f"{kept.released_bytes / mib:.0f}")


# ---- stop ---------------------------------------------------------------------------------------


@cli.command()
@click.option("--address", default=None, metavar="HOST:PORT", help="Head address (default: the session file's).")
@_token_option
@_session_dir_option
@click.option("--timeout", default=STOP_TIMEOUT_S, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for a local head to exit before killing it.")
@click.option("--keep-logs", is_flag=True, help="Keep the head's and nodes' logs in the session directory.")
def stop(address: str | None, token: str | None, session_dir: Path | None, timeout: float, keep_logs: bool) -> None:
    """Stop the head, its nodes and its store shards, and remove what they left in the session
    directory (store files, checkpoints, and logs unless --keep-logs).

    Nodes added with `start --address` exit by themselves a few seconds later. Exits 0 when it
    stopped a cluster and also when none is running on this machine (no session file, or one whose
    head is gone, which it removes), so it is safe to repeat; exits 1 when the head given by
    --address cannot be reached or refuses the token.
    """
    session_dir = session_dir or session.default_dir()
    found = session.read(session_dir)
    if address is None:
        if found is None:
            click.echo(f"No actorrt cluster is running here (no {session_dir / SESSION_FILE}); nothing to stop.")
            return
        if not process_alive(found.head_pid):
            session.remove(session_dir)
            click.echo(f"The head at {found.head_address} (pid {found.head_pid}) is not running; "
                       "removed its stale session file.")
            return
    address, token, local = _target(address, token, session_dir)
    try:
        _with_head(address, token, lambda c: c.shutdown())
    except ClusterError as exc:
        if local is None or not process_alive(local.head_pid):
            raise
        # The head runs here but did not answer (or dropped the reply while exiting): signal it.
        click.echo(f"Shutdown RPC failed ({exc}); sending SIGTERM to pid {local.head_pid}.", err=True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(local.head_pid, signal.SIGTERM)
    if local is not None:
        if not _wait_gone(local.head_pid, timeout):
            click.echo(f"The head (pid {local.head_pid}) did not exit within {timeout:g} s; killing it.", err=True)
            with contextlib.suppress(ProcessLookupError):
                os.kill(local.head_pid, signal.SIGKILL)  # its managed nodes and shards die with it
            _wait_gone(local.head_pid, 5.0)
        if (s := session.read(session_dir)) is not None and s.head_pid == local.head_pid:
            session.remove(session_dir)
        left = session.remove_leftovers(Path(local.session_dir), keep_logs)
    pid = f" (pid {local.head_pid})" if local is not None else ""
    click.echo(f"Stopped the head at {address}{pid} with its nodes and store shards.")
    if local is not None and keep_logs:
        click.echo(f"Logs kept in {Path(local.session_dir) / 'logs'}.")
    elif local is not None and left:
        click.echo(f"Could not remove {', '.join(map(str, left))}.", err=True)
    click.echo(f"Nodes added with `actorrt start --address` exit within ~{HEAD_LOSS_GRACE_S:g} s.")


# ---- named actors -------------------------------------------------------------------------------


@cli.group(name="list")
def list_group() -> None:
    """List what a cluster holds."""


@list_group.command(name="actors")
@click.option("--address", default=None, metavar="HOST:PORT", help="Head address (default: the session file's).")
@_token_option
@_session_dir_option
def list_actors(address: str | None, token: str | None, session_dir: Path | None) -> None:
    """The named actors: name, class, node slot, actor id, and state.

    STATE is alive; dead (its constructor raised: `actorrt kill NAME` frees the name); starting
    (its node has not reported it yet; with ft="none", also an actor lost with its node); or node
    down (its node is being restarted, or is gone).
    """
    address, token, _ = _live_target(address, token, session_dir)

    async def both(client: HeadClient) -> tuple[list[head_pb2.NamedActor], head_pb2.ClusterStatsReply]:
        return await client.list_actors(), await client.cluster_stats()

    actors, stats = _with_head(address, token, both)
    reported = {a.actor_id: "dead" if a.dead else "alive" for n in stats.nodes for a in n.actors}
    alive = {n.slot for n in stats.view.nodes if n.state == head_pb2.ALIVE}

    def state(actor: head_pb2.NamedActor) -> str:
        return reported.get(actor.actor_id) or ("starting" if actor.slot in alive else "node down")

    rows = [("NAME", "CLASS", "NODE", "ACTOR_ID", "STATE")]
    rows += [(a.name, a.class_name, str(a.slot), a.actor_id.hex()[:12], state(a)) for a in actors]
    _table(rows)
    click.echo(f"named actors: {len(actors)}")


@cli.command()
@click.argument("name")
@click.option("--address", default=None, metavar="HOST:PORT", help="Head address (default: the session file's).")
@_token_option
@_session_dir_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address this command listens on for the nodes' answers, as actorrt.init(host=): "
                   "this machine's address when the cluster runs on other machines.")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for the actor to run the kill (after the tasks queued before it).")
def kill(name: str, address: str | None, token: str | None, session_dir: Path | None, host: str,
         timeout: float) -> None:
    """Kill the actor named NAME as actorrt.kill does, and free its name at once.

    The actor runs the tasks queued for it before the kill, then fails every later call with
    ActorDiedError; a replay keeps it killed. Waits until it has run the kill.
    """
    address, token, _ = _live_target(address, token, session_dir)
    found = _with_head(address, token, lambda c: c.get_actor(name))
    if found is None:
        known = _with_head(address, token, lambda c: c.list_actors())
        raise ClusterError(f"no actor is named {name!r} in the cluster at {address} (named actors: "
                           f"{', '.join(a.name for a in known) or 'none'}; `actorrt list actors` shows them)")
    driver = Driver(address, token, host, None)  # a driver of its own, to send the kill as any driver does
    driver.start(0, 10.0)
    try:
        done = driver.worker.submitter.submit_task(found.actor_id, found.slot, KILL_METHOD, (), {})
        driver.free_actor_names(found.actor_id)
        try:
            driver.get(done, timeout)
        except ActorDiedError:
            pass  # it was dead already (its constructor raised)
        except GetTimeoutError:
            raise ClusterError(
                f"{found.class_name} {name!r} ({found.actor_id.hex()[:12]}) on node {found.slot} has not run the "
                f"kill within {timeout:g} s (it runs the tasks queued before it first, or its node is down): it "
                "stops when it does; its name is free already") from None
    finally:
        driver.shutdown()
    click.echo(f"killed {found.class_name} {name!r} ({found.actor_id.hex()[:12]}) on node {found.slot}; "
               "the name is free")


def main() -> None:
    """Entry point of the ``actorrt`` console script (and of ``python -m actorrt``)."""
    cli(prog_name="actorrt")


if __name__ == "__main__":
    main()
