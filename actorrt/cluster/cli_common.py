"""What the ``actorrt`` commands share: the head they talk to (its address and token, and the local
session when it names that head), calls to it from a short-lived event loop, their common options
(TLS among them), and the tables they print.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from actorrt.cluster import session
from actorrt.cluster.head_client import HeadClient
from actorrt.cluster.session import SESSION_FILE, TOKEN_ENV, Session
from actorrt.exceptions import ClusterError
from actorrt.net.tls import ENV_NAMES, TlsFiles
from actorrt.rpc import head_pb2
from actorrt.util.processes import process_alive

T = TypeVar("T")

POLL_S = 0.1

session_dir_option = click.option(
    "--session-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Session directory (default: $ACTORRT_SESSION_DIR, else ~/.actorrt).",
)
TOKEN_HELP = (
    f"Cluster token (default: ${TOKEN_ENV}, else the session file). Prefer the environment variable: "
    "a command line is visible to other users."
)
token_option = click.option("--token", default=None, help=TOKEN_HELP)
head_address_option = click.option("--address", default=None, metavar="HOST:PORT",
                                   help="Head address (default: the session file's).")

_TLS_HELP = {"cert": "This process's TLS certificate (PEM), signed by the CA", "key": "Its private key (PEM)",
             "ca": "The cluster's CA certificate (PEM), which every peer's certificate must be signed by"}


def tls_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a click command ``--tls-cert``, ``--tls-key`` and ``--tls-ca`` (each defaulting to its
    ``ACTORRT_TLS_*`` variable); it receives them as ``tls: TlsFiles | None``, checked."""

    @functools.wraps(command)
    def with_tls(*args: Any, tls_cert: Path | None, tls_key: Path | None, tls_ca: Path | None, **kwargs: Any) -> Any:
        names = {k: f"--tls-{k} (${env})" for k, env in ENV_NAMES.items()}
        return command(*args, tls=TlsFiles.given(tls_cert, tls_key, tls_ca, names), **kwargs)

    for kind in reversed(ENV_NAMES):
        with_tls = click.option(f"--tls-{kind}", envvar=ENV_NAMES[kind], show_envvar=True, default=None,
                                type=click.Path(dir_okay=False, path_type=Path),
                                help=f"{_TLS_HELP[kind]}; all three turn mutual TLS on.")(with_tls)
    return with_tls


def with_head(address: str, token: str, fn: Callable[[HeadClient], Awaitable[T]], tls: TlsFiles | None = None) -> T:
    """Run ``fn(client)`` against the head in a short-lived event loop."""

    async def run() -> T:
        client = HeadClient(address, token, tls)
        try:
            return await fn(client)
        finally:
            await client.aclose()

    return asyncio.run(run())


async def poll_view(client: HeadClient, check: Callable[[head_pb2.ClusterView], T | None], timeout: float,
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


def head_target(address: str | None, token: str | None, session_dir: Path) -> tuple[str, str, Session | None]:
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


def live_head_target(address: str | None, token: str | None,
                     session_dir: Path | None) -> tuple[str, str, Session | None]:
    """``head_target``, and an error if the session file names a head that is not running."""
    address, token, local = head_target(address, token, session_dir or session.default_dir())
    if local is not None and not process_alive(local.root_pid):
        raise ClusterError(f"the head in {Path(local.session_dir) / SESSION_FILE} (pid {local.root_pid}) "
                           "is not running; `actorrt stop` clears the stale session file")
    return address, token, local


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
