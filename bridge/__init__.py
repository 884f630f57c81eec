"""The PySpark bridge: DataFrames into actors, actor outputs back into DataFrames, and Structured
Streaming queries into actors or dataflows (``stream``).

``import bridge`` before creating the SparkSession: it points Spark's Python workers at this
interpreter (``PYSPARK_PYTHON``), so they have pyarrow and the rest of this environment.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from bridge.errors import BridgeError  # noqa: E402
from bridge.feed import FeedSummary, feed  # noqa: E402
from bridge.frames import to_dataframe  # noqa: E402
from bridge.lineage import lineage_frame  # noqa: E402
from bridge.parquet_sink import ParquetSink  # noqa: E402
from bridge.stream import SPARK, FlowQuery, stream  # noqa: E402

__all__ = ["SPARK", "BridgeError", "FeedSummary", "FlowQuery", "ParquetSink", "feed", "lineage_frame", "stream",
           "to_dataframe"]
