"""The head process: ``python -m actorrt.cluster.run_head [HEAD OPTIONS] --session-dir D``.

The cluster token comes in ``ACTORRT_TOKEN`` and, for mutual TLS, its files in ``ACTORRT_TLS_*``.
``actorrt start --head`` and ``actorrt.init()`` run it under a supervisor (``supervisor.py``),
which restarts it with ``--restarted``; ``--standby`` waits to take over a cluster whose head runs
elsewhere (``leadership.py``). What it does is ``Head`` (``head.py``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

import click
import uvloop

from actorrt.cluster import leadership, session
from actorrt.cluster.daemon import daemon_setup
from actorrt.cluster.head import Head
from actorrt.cluster.head_options import HeadOptions, head_options
from actorrt.cluster.head_state import SupersededError
from actorrt.cluster.supervisor import SUPERSEDED_EXIT
from actorrt.exceptions import ClusterError

log = logging.getLogger("actorrt.head")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@head_options
@click.option("--session-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Session directory (default: $ACTORRT_SESSION_DIR, else ~/.actorrt).")
@click.option("--restarted", is_flag=True, help="Take over the cluster a head before this one ran in the session "
              "directory (its supervisor restarts a head that died with this).")
@click.option("--standby", is_flag=True, help="Wait until the active head's lease in the (external) store runs out, "
              "then take its cluster over.")
def main(head: HeadOptions, session_dir: Path | None, restarted: bool, standby: bool) -> None:
    """Run a head in the foreground, with the cluster token in ACTORRT_TOKEN (and TLS files in
    ACTORRT_TLS_CERT, ACTORRT_TLS_KEY and ACTORRT_TLS_CA for mutual TLS)."""
    token, tls = daemon_setup("actorrt.cluster.run_head")

    async def amain() -> None:
        the_head = Head(token, session_dir or session.default_dir(), head, tls, restarted, standby)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(the_head.stop()))
        server = await the_head.start()
        await the_head.stopped.wait()
        await server.stop(0.5)

    try:
        uvloop.run(amain())
    except SupersededError as exc:  # its supervisor does not restart it
        log.critical("%s; exiting", exc)
        sys.exit(SUPERSEDED_EXIT)
    except leadership.NothingToTakeOverError as exc:
        log.info("%s; exiting", exc)
    except ClusterError as exc:  # it cannot start as asked: the cause ends its log, in one line
        log.critical("%s", exc)
        sys.exit(1)


if __name__ == "__main__":
    main()
