"""Checks on the Spark side: a live session, and columns Arrow can carry."""

from __future__ import annotations

import sys

import pyarrow as pa

from bridge.errors import BridgeError

_workers_checked: set[int] = set()  # SparkContexts whose Python workers were found fit


def check_session(df) -> None:
    """``df``'s SparkSession must still run (a stopped one fails deep inside Py4J otherwise), and
    its Python workers must have pyarrow: a session created before ``import bridge`` runs them
    with the default ``python3``, and the failure was a Java stack trace of hundreds of lines."""
    sc = df.sparkSession.sparkContext
    if sc._jsc is None:
        raise BridgeError("the DataFrame's SparkSession is stopped; create a new session and DataFrame")
    if sc.pythonExec == sys.executable or id(sc) in _workers_checked:
        return
    try:
        sc.parallelize([0], 1).map(lambda _: __import__("pyarrow").__version__).collect()
    except Exception as exc:  # noqa: BLE001 - a Py4J error wrapping the worker's
        cause = next((line.strip() for line in str(exc).splitlines() if "Error:" in line and "py4j" not in line),
                     type(exc).__name__)
        raise BridgeError(f"Spark's Python workers ({sc.pythonExec}) cannot run the bridge: {cause}. Import bridge "
                          f"before creating the SparkSession (it sets PYSPARK_PYTHON to this interpreter, "
                          f"{sys.executable}), or set PYSPARK_PYTHON to a Python that has pyarrow") from None
    _workers_checked.add(id(sc))


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
