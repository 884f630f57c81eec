"""The ``actorrt`` command: start a head or add a node, show a cluster's status, stop it.

``actorrt start --head`` on one machine, ``actorrt start --address HOST:PORT`` on each other
machine, ``actorrt status``, ``actorrt list actors``, ``actorrt kill NAME``, ``actorrt stop``;
``actorrt tls-certs`` makes the certificates of a cluster that runs in mutual TLS.
Every actorrt exception becomes a one-line error and exit code 1; usage errors exit 2.

The verbs live beside this module, by what they act on: ``cli_cluster.py`` (start, stop),
``cli_status.py`` (status), ``cli_actors.py`` (list actors, kill), ``cli_tls.py`` (tls-certs);
``cli_common.py`` holds what they share.
"""

from __future__ import annotations

from typing import Any

import click

from actorrt.cluster.cli_actors import kill, list_group
from actorrt.cluster.cli_cluster import start, stop
from actorrt.cluster.cli_lineage import lineage_group
from actorrt.cluster.cli_status import status
from actorrt.cluster.cli_tls import tls_certs
from actorrt.exceptions import ActorRTError


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


for command in (start, status, stop, list_group, kill, lineage_group, tls_certs):
    cli.add_command(command)


def main() -> None:
    """Entry point of the ``actorrt`` console script (and of ``python -m actorrt``)."""
    cli(prog_name="actorrt")


if __name__ == "__main__":
    main()
