"""``actorrt lineage backward|forward RECORD``: a record's lineage, read from a cluster's store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from actorrt.cluster.cli_common import (
    head_address_option,
    live_head_target,
    session_dir_option,
    tls_options,
    token_option,
)
from actorrt.cluster.head_client import HeadClient
from actorrt.lineage import queries
from actorrt.lineage.records import RecordId, SourceRecord
from actorrt.net.tls import TlsFiles
from actorrt.store.opening import store_of_view
from actorrt.store.relations import RelationReader


def parse_record(text: str) -> RecordId | SourceRecord:
    """``flow/stage/instance/seq`` (a stage's record, as ``str(RecordId)`` prints it) or
    ``flow/source/id`` (a source record: an offset or row, a stream entry ID, or ``batch:row``)."""
    parts = text.rsplit("/", 3)
    if len(parts) == 4 and all(p.isdigit() for p in parts[1:]):
        return RecordId(parts[0], int(parts[1]), int(parts[2]), int(parts[3]))
    flow, _, rest = text.rpartition("/")
    flow, _, source = flow.rpartition("/")
    if not flow or not source or not rest:
        raise click.BadParameter(f"{text!r} is neither flow/stage/instance/seq nor flow/source/id")
    if rest.isdigit():
        return SourceRecord(flow, source, int(rest))
    if ":" in rest:
        batch, _, row = rest.partition(":")
        return SourceRecord(flow, source, (int(batch), int(row)))
    return SourceRecord(flow, source, rest)


def _query(address: str | None, token: str | None, session_dir: Path | None, tls: TlsFiles | None,
           run: Any) -> queries.Trace:
    address, token, _ = live_head_target(address, token, session_dir)

    async def go() -> queries.Trace:
        client = HeadClient(address, token, tls)
        try:
            view = (await client.cluster_stats()).view
        finally:
            await client.aclose()
        store = store_of_view(view, tls.for_store() if tls else None)
        try:
            return await run(RelationReader(store))
        finally:
            await store.aclose()

    return asyncio.run(go())


def _print(trace: queries.Trace, ends: str) -> None:
    for line in trace.chain():
        click.echo(line)
    click.echo(f"{ends}: {len(trace.ends)}")
    for record in sorted(trace.ends, key=str):
        click.echo(f"  {record}")
    if trace.expired:
        click.echo(f"past the flow's retention (or not captured), where the walk stopped: "
                   f"{', '.join(sorted(map(str, trace.expired)))}")


@click.group(name="lineage")
def lineage_group() -> None:
    """Record lineage of dataflows run with Dataflow(lineage=True)."""


@lineage_group.command()
@click.argument("record")
@click.option("--until", default="source", show_default=True, help="Stop at this stage (a name or an index).")
@head_address_option
@token_option
@session_dir_option
@tls_options
def backward(record: str, until: str, address: str | None, token: str | None, session_dir: Path | None,
             tls: TlsFiles | None) -> None:
    """The records RECORD (flow/stage/instance/seq) came from, stage by stage, and its sources."""
    start = parse_record(record)
    if not isinstance(start, RecordId):
        raise click.BadParameter(f"{record!r} is a source record: backward starts at a stage's record")
    stop: str | int = int(until) if until.isdigit() else until
    _print(_query(address, token, session_dir, tls, lambda r: queries.backward(r, start, stop)), "source records")


@lineage_group.command()
@click.argument("record")
@head_address_option
@token_option
@session_dir_option
@tls_options
def forward(record: str, address: str | None, token: str | None, session_dir: Path | None,
            tls: TlsFiles | None) -> None:
    """The records RECORD (flow/source/id, or flow/stage/instance/seq) went into, to the flow's ends."""
    start = parse_record(record)
    _print(_query(address, token, session_dir, tls, lambda r: queries.forward(r, start)), "records at the flow's ends")
