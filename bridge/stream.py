"""``stream``: a Structured Streaming query whose micro-batches are fed to actors.

Each micro-batch goes through ``feed`` inside ``foreachBatch``, its calls marked with the query
(its checkpoint location) and the batch id. When Spark runs a micro-batch again after a restart
(the batch was not in its commit log yet), actors skip the calls they applied the first time, so
nothing is applied twice; the part that did not reach them is applied now.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from actorrt import ActorHandle
from actorrt.handles import ActorMethod
from bridge.errors import BridgeError
from bridge.feed import check_batching, check_handles, feed_marked, method_name
from bridge.spark import is_spark_dataframe


def stream(streaming_df, handles: Sequence[ActorHandle], method: str | ActorMethod, checkpoint_location: str,
           batch_rows: int = 1024, key: str | None = None, max_in_flight: int = 8, trigger: dict | None = None):
    """Start feeding ``streaming_df`` to ``handles`` (``handle.<method>(batch)``); returns the
    running ``StreamingQuery``. ``checkpoint_location`` is Spark's, and names the query: a query
    restarted from it continues exactly once. ``trigger``: as ``DataStreamWriter.trigger``.
    Arguments are checked here, not in the first micro-batch (where Spark would wrap the error)."""
    if not is_spark_dataframe(streaming_df) or not streaming_df.isStreaming:
        what = "a batch one: use feed()" if is_spark_dataframe(streaming_df) else f"a {_kind(streaming_df)}"
        raise BridgeError(f"stream() takes a streaming Spark DataFrame (spark.readStream...), not {what}")
    method = method_name(method)
    check_handles(handles, method)
    check_batching(batch_rows, key, max_in_flight)
    if not isinstance(checkpoint_location, str | os.PathLike) or not str(checkpoint_location):
        raise BridgeError(f"checkpoint_location must be a path or URI, not {checkpoint_location!r}")
    checkpoint_location = os.fspath(checkpoint_location)
    if trigger is not None and not isinstance(trigger, dict):
        raise BridgeError(f"trigger must be a dict of DataStreamWriter.trigger's arguments (e.g. "
                          f"{{'processingTime': '1 second'}}), not {trigger!r}")
    if key is not None and key not in streaming_df.columns:
        raise BridgeError(f"key column {key!r} is not in the DataFrame (columns: {', '.join(streaming_df.columns)})")
    # The checkpoint location names the query across restarts (a URI as given, a local path absolute).
    location = checkpoint_location if "://" in checkpoint_location else os.path.abspath(checkpoint_location)
    source = "stream:" + location

    def apply(batch_df, batch_id: int) -> None:
        feed_marked(batch_df, handles, method, batch_rows, key, max_in_flight, (source, batch_id))

    writer = streaming_df.writeStream.foreachBatch(apply).option("checkpointLocation", checkpoint_location)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def _kind(value: object) -> str:
    """``value``'s type with its package: "pandas DataFrame" is not a Spark one."""
    return f"{type(value).__module__.split('.')[0]} {type(value).__name__}"
