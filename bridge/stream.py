"""``stream``: a Structured Streaming query whose micro-batches are fed to a dataflow or to actors.

To a ``Dataflow`` built on ``flow.source(bridge.SPARK)``: each micro-batch's rows become records
(a dict per row, column name to value), read through Arrow one partition at a time and fed to
the running flow (``RunningFlow.feed``). To actor handles: each micro-batch goes through ``feed``
(an Arrow record batch per call). Either way every call is marked with the query (its checkpoint
location) and the batch id. When Spark runs a micro-batch again after a restart (the batch was
not in its commit log yet), the receivers skip the calls they applied the first time, so nothing
is applied twice; the part that did not reach them is applied now.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from actorrt import ActorHandle
from actorrt.handles import ActorMethod
from actorrt.streaming import Dataflow, Fed, RunningFlow, RunResult
from bridge.errors import BridgeError
from bridge.feed import check_batching, check_handles, feed_marked, method_name, spark_rows
from bridge.spark import check_session, column_types, is_spark_dataframe, session_time_zone

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

SPARK = Fed()
"""The source of a dataflow that ``stream`` feeds: ``flow.source(bridge.SPARK)``."""

# What ``stream`` passes to actor handles unless told otherwise.
BATCH_ROWS = 1024
MAX_IN_FLIGHT = 8


class FlowQuery:
    """A Structured Streaming query feeding a running dataflow: what ``stream`` returns for a
    ``Dataflow``. ``stop()`` ends both and returns the flow's ``RunResult``."""

    def __init__(self, query: StreamingQuery, flow: RunningFlow) -> None:
        self._query = query
        self._flow = flow

    @property
    def query(self) -> StreamingQuery:
        """Spark's ``StreamingQuery`` (its ``id``, ``status``, ``lastProgress``, ``exception()``, ...)."""
        return self._query

    @property
    def flow(self) -> RunningFlow:
        """The running flow: give it to ``stream`` again to restart the query against it."""
        return self._flow

    @property
    def isActive(self) -> bool:  # noqa: N802 - Spark's name, as on StreamingQuery
        """Whether the query runs (it stops when stopped, or when a micro-batch failed)."""
        return self._query.isActive

    def processAllAvailable(self) -> None:  # noqa: N802
        """Block until every input available now was fed (and the flow's first stage took it)."""
        self._query.processAllAvailable()

    def awaitTermination(self, timeout: float | None = None) -> bool | None:  # noqa: N802
        """As ``StreamingQuery.awaitTermination``: wait for the query to stop (it raises the query's failure)."""
        return self._query.awaitTermination(timeout)

    def stop(self, timeout: float | None = None) -> RunResult:
        """Stop the query, then pass the end of the input down the flow and return its result.

        Args:
            timeout: seconds the flow may take to finish.

        Raises:
            RecordError: the flow failed on a record, now or in a micro-batch (which then failed
                the query); ``OperatorStoppedError`` likewise, if the runtime stopped an operator.
        """
        self._query.stop()
        return self._flow.finish(timeout=timeout)


def stream(streaming_df, target: Dataflow | RunningFlow | Sequence[ActorHandle] | ActorHandle,
           method: str | ActorMethod | None = None, checkpoint_location: str | os.PathLike | None = None,
           batch_rows: int | None = None, key: str | None = None, max_in_flight: int | None = None,
           trigger: dict | None = None) -> FlowQuery | StreamingQuery:
    """Start feeding ``streaming_df``'s micro-batches to a dataflow or to actors.

    Args:
        streaming_df: a streaming Spark DataFrame (``spark.readStream...``).
        target: a ``Dataflow`` built on ``flow.source(bridge.SPARK)`` (started here), a flow
            started already (``FlowQuery.flow``: a query restarted against it), or actor handles.
        method: for actor handles only: what each batch is passed to (``handle.<method>(batch)``).
        checkpoint_location: Spark's; it names the query, so a query restarted from it continues
            exactly once.
        batch_rows, key, max_in_flight: for actor handles only, as in ``feed`` (a dataflow has
            ``batch_size`` and ``max_in_flight`` of its own, and ``key_by``).
        trigger: as ``DataStreamWriter.trigger`` (e.g. ``{"processingTime": "1 second"}``).

    Returns:
        For a dataflow, a ``FlowQuery`` (``stop()`` returns the flow's ``RunResult``); for actor
        handles, the running ``StreamingQuery``.

    Raises:
        BridgeError: a bad argument, before any query starts (not in the first micro-batch,
            where Spark would wrap the error).
    """
    _check_streaming(streaming_df)
    to_flow = isinstance(target, Dataflow | RunningFlow)
    if to_flow:
        _check_flow(target, method, checkpoint_location, (batch_rows, key, max_in_flight))
    elif not isinstance(target, ActorHandle | list | tuple):
        raise BridgeError(f"stream() feeds a Dataflow (built on flow.source(bridge.SPARK)) or actor handles, not a "
                          f"{type(target).__name__}")
    checkpoint = _checkpoint(checkpoint_location)
    if trigger is not None and not isinstance(trigger, dict):
        raise BridgeError(f"trigger must be a dict of DataStreamWriter.trigger's arguments (e.g. "
                          f"{{'processingTime': '1 second'}}), not {trigger!r}")
    if to_flow:
        _check_columns(streaming_df)
        return _stream_to_flow(streaming_df, target, checkpoint, trigger)
    return _stream_to_handles(streaming_df, target, method, checkpoint, batch_rows, key, max_in_flight, trigger)


def _stream_to_handles(streaming_df, handles: Sequence[ActorHandle] | ActorHandle, method: str | ActorMethod | None,
                       checkpoint: str, batch_rows: int | None, key: str | None, max_in_flight: int | None,
                       trigger: dict | None) -> StreamingQuery:
    batch_rows = BATCH_ROWS if batch_rows is None else batch_rows
    max_in_flight = MAX_IN_FLIGHT if max_in_flight is None else max_in_flight
    method = method_name(method)
    check_handles(handles, method)
    check_batching(batch_rows, key, max_in_flight)
    if key is not None and key not in streaming_df.columns:
        raise BridgeError(f"key column {key!r} is not in the DataFrame (columns: {', '.join(streaming_df.columns)})")
    _check_columns(streaming_df)
    source = _marks_source(checkpoint)

    def apply(batch_df, batch_id: int) -> None:
        feed_marked(batch_df, handles, method, batch_rows, key, max_in_flight, (source, batch_id))

    return _start(streaming_df, apply, checkpoint, trigger)


def _stream_to_flow(streaming_df, target: Dataflow | RunningFlow, checkpoint: str, trigger: dict | None) -> FlowQuery:
    source = _marks_source(checkpoint)
    flow = target.start() if isinstance(target, Dataflow) else target

    def apply(batch_df, batch_id: int) -> None:
        # Partition by partition in Spark's order: a micro-batch run again is fed in the same
        # batches, so its marks match the first run's.
        flow.feed(spark_rows(batch_df, flow.batch_size), mark=(source, batch_id))

    try:
        query = _start(streaming_df, apply, checkpoint, trigger)
    except BaseException:
        if flow is not target:
            flow.cancel()  # started for this query, which did not start
        raise
    return FlowQuery(query, flow)


def _start(streaming_df, apply: Callable[[Any, int], None], checkpoint: str, trigger: dict | None) -> StreamingQuery:
    writer = streaming_df.writeStream.foreachBatch(apply).option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def _check_streaming(streaming_df) -> None:
    if not is_spark_dataframe(streaming_df) or not streaming_df.isStreaming:
        what = "a batch one: use feed()" if is_spark_dataframe(streaming_df) else f"a {_kind(streaming_df)}"
        raise BridgeError(f"stream() takes a streaming Spark DataFrame (spark.readStream...), not {what}")


def _marks_source(checkpoint: str) -> str:
    """The source of the query's marks: its checkpoint location names it across restarts (a URI
    as given, a local path absolute)."""
    return "stream:" + (checkpoint if "://" in checkpoint else os.path.abspath(checkpoint))


def _checkpoint(checkpoint_location: Any) -> str:
    if not isinstance(checkpoint_location, str | os.PathLike) or not str(checkpoint_location):
        raise BridgeError(f"checkpoint_location must be a path or URI, not {checkpoint_location!r}")
    return os.fspath(checkpoint_location)


def _check_flow(target: Dataflow | RunningFlow, method: Any, checkpoint_location: Any,
                handle_options: tuple[Any, ...]) -> None:
    """A dataflow takes the rows as they are: no method or batching of the handles' form, and a
    source of ``bridge.SPARK``; a running one must still take records."""
    if method is not None:
        hint = f" (did you mean checkpoint_location={method!r}?)" if checkpoint_location is None else ""
        raise BridgeError(f"stream() to a Dataflow takes no method: its first stage takes the rows{hint}")
    if any(option is not None for option in handle_options):
        raise BridgeError("batch_rows, key and max_in_flight are for actor handles: a Dataflow has batch_size and "
                          "max_in_flight of its own (Dataflow(...)), and key_by")
    flow = target if isinstance(target, Dataflow) else target.flow
    if not flow.fed:
        raise BridgeError("stream() feeds a Dataflow built on flow.source(bridge.SPARK): the rows of the streaming "
                          "DataFrame are its records (this one has a source of its own, or none)")
    if isinstance(target, RunningFlow) and not target.active:
        raise BridgeError("the running flow was finished, cancelled or failed: stream() to it needs it running "
                          "(give the Dataflow to start it again)")


def _check_columns(streaming_df) -> None:
    """Spark's Python workers must run the bridge, and every column must have an Arrow type."""
    check_session(streaming_df)
    column_types(streaming_df.schema, session_time_zone(streaming_df.sparkSession))


def _kind(value: object) -> str:
    """``value``'s type with its package: "pandas DataFrame" is not a Spark one."""
    return f"{type(value).__module__.split('.')[0]} {type(value).__name__}"
