"""``actorrt start`` and ``actorrt stop``: a cluster's lifecycle.

``start --head`` starts a head (with its nodes and store shards) in the background and waits for
its nodes; ``start --address HOST:PORT`` adds a node to a running head; ``stop`` stops the head
and cleans up what it left in the session directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
from click.core import ParameterSource

from actorrt.cluster import session
from actorrt.cluster.cli_common import (
    POLL_S,
    TOKEN_HELP,
    head_address_option,
    head_target,
    poll_view,
    session_dir_option,
    tls_options,
    token_option,
    with_head,
)
from actorrt.cluster.head_options import OPTION_NAMES, HeadOptions, head_options
from actorrt.cluster.launch import start_head
from actorrt.cluster.session import SESSION_FILE, TOKEN_ENV
from actorrt.exceptions import ActorRTError, ClusterError
from actorrt.net.tls import TlsFiles
from actorrt.rpc import head_pb2
from actorrt.util.processes import process_alive

STOP_TIMEOUT_S = 15.0


@click.command()
@click.option("--head", "as_head", is_flag=True, help="Start a head (with its nodes and store shards).")
@click.option("--address", default=None, metavar="HOST:PORT", help="Add a node to the head at HOST:PORT.")
@click.option("--standby", is_flag=True, help="With --head and --store-url: a standby head (on another host) that "
              "takes the cluster over when the active head's lease in the store runs out.")
@head_options
@session_dir_option
@click.option("--token", default=None,
              help=TOKEN_HELP + f" With --head: the token it requires (default: ${TOKEN_ENV}, else a new one).")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for the nodes to come up.")
@tls_options
@click.pass_context
def start(ctx: click.Context, as_head: bool, address: str | None, standby: bool, head: HeadOptions,
          session_dir: Path | None, token: str | None, timeout: float, tls: TlsFiles | None) -> None:
    """Start a head (--head) or add a node to a running head (--address HOST:PORT).

    Both run in the background and outlive this command. A head writes the session file (address,
    token, pid) into the session directory; `actorrt stop` stops it. A node added with --address is
    not restarted by the head if it dies, and exits by itself within a few seconds of losing the head.
    --port and the options after it up to --store-url are the head's (with --head only). With
    --tls-cert, --tls-key and --tls-ca (or ACTORRT_TLS_*) the head and its nodes, or the node,
    speak mutual TLS; the certificate must name --host.
    """
    if as_head == (address is not None):
        raise click.UsageError("pass --head to start a head, or --address HOST:PORT to add a node")
    session_dir = session_dir or session.default_dir()
    if tls is not None:
        tls.check_names(head.host)
    if standby and not (as_head and head.store_url):
        raise click.UsageError("--standby needs --head and --store-url (the store where the active head holds its "
                               "lease, and from which the standby takes the cluster over)")
    if standby:
        _start_standby(session_dir, head, token or os.environ.get(TOKEN_ENV), tls)
        return
    if as_head:
        _start_head(session_dir, head, token or os.environ.get(TOKEN_ENV), timeout, tls)
        return
    head_only = [f"--{name.replace('_', '-')}" for name in OPTION_NAMES
                 if name != "host" and ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if head_only:
        raise click.UsageError(f"{', '.join(head_only)}: only valid with --head")
    _add_node(address, head.host, session_dir, token, timeout, tls)


def _start_head(session_dir: Path, options: HeadOptions, token: str | None, timeout: float,
                tls: TlsFiles | None) -> None:
    try:
        head = start_head(session_dir, options, token=token, tied_to_caller=False, tls=tls)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--store-url") from None
    address = head.session.head_address
    nodes = options.nodes

    def all_alive(view: head_pb2.ClusterView) -> bool | None:
        alive = [n for n in view.nodes if n.managed and n.state == head_pb2.ALIVE]
        return True if len(alive) >= nodes else None

    try:
        with_head(address, head.session.token,
                   lambda c: poll_view(c, all_alive, timeout, f"the head's {nodes} nodes did not all come up"), tls)
    except BaseException as exc:
        # Leave nothing half-started behind (also on Ctrl-C).
        with contextlib.suppress(ActorRTError):
            with_head(address, head.session.token, lambda c: c.shutdown(), tls)
        head.wait_stopped(STOP_TIMEOUT_S)
        session.remove(session_dir)
        if isinstance(exc, ClusterError):
            raise ClusterError(f"{exc}; stopped the head (logs in {head.log_path.parent})") from None
        raise

    env_hint = "" if session_dir == session.default_dir() else f"{session.SESSION_DIR_ENV}={session_dir} "
    click.echo(f"Started the actorrt head at {address} (pid {head.session.head_pid}, restarted if it dies by its "
               f"supervisor, pid {head.process.pid}) with {nodes} nodes and {options.store_shards} store shards.")
    click.echo(f"  session file: {session_dir / SESSION_FILE}")
    click.echo(f"  logs:         {head.log_path.parent}")
    if head.session.metrics_url:
        click.echo(f"  metrics:      {head.session.metrics_url} (Prometheus)")
    if head.session.dashboard_url:
        click.echo(f"  dashboard:    {head.session.dashboard_url} (log in with the token in the session file)")
    if tls is not None:
        click.echo(f"  mutual TLS:   certificate {tls.cert}, CA {tls.ca}")
    settings = [f"{session.SESSION_DIR_ENV}={session_dir}"] if env_hint else []
    settings += [f"{name}=..." for name in (tls.env() if tls is not None else {})]
    click.echo("Connect from Python on this machine" + (f" (with {', '.join(settings)} set)" if settings else "") + ":")
    click.echo(f'  actorrt.init(address="{address}")')
    click.echo(f"Add a node from another machine, with {TOKEN_ENV} set to the token in the session file:")
    tls_hint = " --tls-cert ... --tls-key ... --tls-ca ..." if tls is not None else ""
    click.echo(f"  actorrt start --address {address} --host <that machine's address>{tls_hint}")
    click.echo("Stop the cluster:")
    click.echo(f"  {env_hint}actorrt stop{tls_hint}")


def _start_standby(session_dir: Path, options: HeadOptions, token: str | None, tls: TlsFiles | None) -> None:
    if not token:
        raise click.UsageError(f"a standby head needs the cluster's token: --token, or {TOKEN_ENV}")
    head = start_head(session_dir, options, token=token, tied_to_caller=False, tls=tls, standby=True)
    click.echo(f"Started a standby head (supervisor pid {head.process.pid}): it takes the cluster over on "
               f"{options.host} when the active head's lease in the store runs out.")
    click.echo(f"  session file: {session_dir / SESSION_FILE}")
    click.echo(f"  logs:         {head.log_path.parent}")


def _add_node(address: str, host: str, session_dir: Path, token: str | None, timeout: float,
              tls: TlsFiles | None) -> None:
    address, token, _ = head_target(address, token, session_dir)
    # Fail early, with the head's own error, if it is unreachable or refuses the token.
    with_head(address, token, lambda c: c.cluster_stats(), tls)
    logs = session_dir / session.LOGS_DIR
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = logs / f"node-starting-{os.getpid()}.log"
    argv = [sys.executable, "-m", "actorrt.cluster.node", "--head", address, "--host", host]
    with open(log_path, "ab") as log:
        # Its own session, so it outlives this command and a Ctrl-C in this terminal.
        proc = subprocess.Popen(argv, env=dict(os.environ, **{TOKEN_ENV: token}, **(tls.env() if tls else {})),
                                stdin=subprocess.DEVNULL,
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
        info = with_head(address, token, lambda c: poll_view(c, joined, timeout, "the node did not join"), tls)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    final_log = logs / f"node-{info.slot}-pid{proc.pid}.log"
    os.replace(log_path, final_log)  # the node keeps writing through its open descriptor
    click.echo(f"Added node {info.slot} (pid {proc.pid}, serving on {info.address}) to the head at {address}.")
    click.echo(f"  log: {final_log}")
    click.echo("It is not restarted if it dies. It exits when the cluster stops, or when the head has been "
               "unreachable for the cluster's --head-grace.")


def _log_tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


@click.command()
@head_address_option
@token_option
@session_dir_option
@click.option("--timeout", default=STOP_TIMEOUT_S, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for a local head to exit before killing it.")
@click.option("--keep-logs", is_flag=True, help="Keep the head's and nodes' logs in the session directory.")
@tls_options
def stop(address: str | None, token: str | None, session_dir: Path | None, timeout: float, keep_logs: bool,
         tls: TlsFiles | None) -> None:
    """Stop the head, its nodes and its store shards, and remove what they left in the session
    directory (store files, checkpoints, and logs unless --keep-logs).

    Nodes added with `start --address` exit too, told by the head. Exits 0 when it
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
        if not process_alive(found.root_pid):
            session.remove(session_dir)
            click.echo(f"The head at {found.head_address} (pid {found.root_pid}) is not running; "
                       "removed its stale session file.")
            return
    if address is None and found is not None and found.standby:
        os.kill(found.root_pid, signal.SIGTERM)  # standing by: nothing else to stop
        if not _wait_gone(found.root_pid, timeout):
            os.kill(found.root_pid, signal.SIGKILL)
        session.remove(session_dir)
        click.echo(f"Stopped the standby head (pid {found.root_pid}).")
        return
    address, token, local = head_target(address, token, session_dir)
    try:
        with_head(address, token, lambda c: c.shutdown(), tls)
    except ClusterError as exc:
        if local is None or not process_alive(local.root_pid):
            raise
        # The head runs here but did not answer (or dropped the reply while exiting): signal it.
        click.echo(f"Shutdown RPC failed ({exc}); sending SIGTERM to pid {local.root_pid}.", err=True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(local.root_pid, signal.SIGTERM)
    if local is not None:
        if not _wait_gone(local.root_pid, timeout):
            click.echo(f"The head (pid {local.root_pid}) did not exit within {timeout:g} s; killing it.", err=True)
            with contextlib.suppress(ProcessLookupError):
                os.kill(local.root_pid, signal.SIGKILL)  # the head, its nodes and shards die with it
            _wait_gone(local.root_pid, 5.0)
        if (s := session.read(session_dir)) is not None and s.root_pid == local.root_pid:
            session.remove(session_dir)
        left = session.remove_leftovers(Path(local.session_dir), keep_logs)
    pid = f" (pid {local.root_pid})" if local is not None else ""
    click.echo(f"Stopped the head at {address}{pid} with its nodes and store shards.")
    if local is not None and keep_logs:
        click.echo(f"Logs kept in {Path(local.session_dir) / 'logs'}.")
    elif local is not None and left:
        click.echo(f"Could not remove {', '.join(map(str, left))}.", err=True)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True
