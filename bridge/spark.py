"""Checks on the Spark side: a live session, and columns Arrow can carry."""

from __future__ import annotations

import pyarrow as pa

from bridge.errors import BridgeError


def check_session(df) -> None:
    """``df``'s SparkSession must still run (a stopped one fails deep inside Py4J otherwise)."""
    if df.sparkSession.sparkContext._jsc is None:
        raise BridgeError("the DataFrame's SparkSession is stopped; create a new session and DataFrame")


def is_spark_dataframe(df) -> bool:
    return hasattr(df, "sparkSession") and hasattr(df, "mapInArrow")


def session_time_zone(spark) -> str:
    """The zone Spark reads and shows timestamps in (``spark.sql.session.timeZone``)."""
    return spark.conf.get("spark.sql.session.timeZone")


def column_types(schema, timezone: str) -> pa.Schema:
    """The Arrow schema of a Spark schema (timestamps in ``timezone``), or a BridgeError naming the
    first column that has none."""
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for f in schema.fields:
        try:
            fields.append(pa.field(f.name, to_arrow_type(f.dataType, timezone=timezone), nullable=f.nullable))
        except Exception as exc:  # noqa: BLE001 - pyspark raises several types for this
            why = str(exc) or type(exc).__name__
            raise BridgeError(f"column {f.name!r} has type {f.dataType.simpleString()}, which Arrow record batches "
                              f"cannot carry ({why})") from None
    return pa.schema(fields)
