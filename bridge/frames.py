"""``to_dataframe``: actor outputs back into a Spark DataFrame.

A source is an ObjectRef, an actor method to call (``handle.results``), or a value: rows (dicts,
tuples, Spark Rows), pyarrow RecordBatches or Tables, pandas DataFrames, or a list of any of these
(refs and methods in it are resolved first). Everything is joined into one Arrow table, which
Spark takes as it is (no row-by-row conversion).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import actorrt
from actorrt import ObjectRef
from actorrt.handles import ActorMethod
from bridge.errors import BridgeError
from bridge.spark import column_types, session_time_zone


def to_dataframe(spark, source: Any, schema=None):
    """A DataFrame of ``source``, with ``schema`` (a StructType or a DDL string) or one inferred."""
    if not hasattr(spark, "createDataFrame") or not hasattr(spark, "sparkContext"):
        raise BridgeError(f"to_dataframe takes the SparkSession first, not a {type(spark).__name__}")
    if schema is not None and not isinstance(schema, str) and type(schema).__name__ != "StructType":
        raise BridgeError(f"schema must be a StructType or a DDL string ('word string, n long'), not {schema!r}")
    if spark.sparkContext._jsc is None:
        raise BridgeError("the SparkSession is stopped; create a new one")
    values = _resolve(source)
    if schema is None:
        return spark.createDataFrame(_as_table(values, None))
    if not values:
        return spark.createDataFrame([], schema=schema)
    table = _as_table(values, schema)
    struct = _struct(schema)
    names = [f.name for f in struct.fields]
    missing = [n for n in names if n not in table.column_names]
    if missing:
        raise BridgeError(f"the schema names columns the data does not have: {', '.join(missing)} "
                          f"(it has: {', '.join(table.column_names)})")
    dropped = [c for c in table.column_names if c not in names]
    if dropped:
        warnings.warn(f"to_dataframe: the schema leaves out column(s) {', '.join(dropped)} of the data; they are "
                      f"dropped", stacklevel=2)
    table = _cast(table.select(names), struct, session_time_zone(spark))
    return spark.createDataFrame(table, schema=struct)  # matched by name, through Arrow


def _cast(table: pa.Table, struct, timezone: str) -> pa.Table:
    """``table`` in the schema's types, column by column: a value that does not fit is an error
    naming its column, and numbers are not quietly turned into strings."""
    target = column_types(struct, timezone)
    columns = []
    for field, spark_field in zip(target, struct.fields, strict=True):
        wanted = spark_field.dataType.simpleString()
        try:
            columns.append(_cast_column(table.column(field.name), field, wanted, timezone))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise BridgeError(f"column {field.name!r}: its {table.column(field.name).type} values do not fit the "
                              f"schema's {wanted} ({exc})") from None
    return pa.Table.from_arrays(columns, schema=target)


def _cast_column(column: pa.ChunkedArray, field: pa.Field, wanted: str, timezone: str) -> pa.ChunkedArray:
    if pa.types.is_dictionary(column.type):  # a pandas categorical: its values
        column = pa.chunked_array([chunk.dictionary_decode() for chunk in column.chunks], type=column.type.value_type)
    if _is_text(field.type) and not (_is_text(column.type) or pa.types.is_null(column.type)):
        raise BridgeError(f"column {field.name!r} holds {column.type} values, but the schema says {wanted}: "
                          f"convert them in the data if text is meant, or give the column its own type")
    if not field.nullable and column.null_count:
        raise BridgeError(f"column {field.name!r} holds {column.null_count} null(s), but the schema says it has none")
    if pa.types.is_timestamp(field.type) and field.type.tz is not None:
        if pa.types.is_date(column.type):
            column = column.cast(pa.timestamp("us"))
        if pa.types.is_timestamp(column.type) and column.type.tz is None:
            # A wall-clock time, as Spark reads one: in the session time zone, not in UTC.
            column = pc.assume_timezone(column, timezone, ambiguous="earliest", nonexistent="earliest")
    # Finer than microseconds is truncated, as Spark does; any other loss of value is an error.
    return pc.cast(column, options=pc.CastOptions(field.type, allow_time_truncate=True))


def _is_text(typ: pa.DataType) -> bool:
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or typ == pa.string_view()


def _resolve(source: Any) -> list[Any]:
    """``source`` as a flat list of values, refs fetched and methods called (a list a ref or a
    method returns is flattened: it holds rows or batches)."""
    items = list(source) if isinstance(source, list) else [source]
    pending = [item.remote() if isinstance(item, ActorMethod) else item for item in items]
    refs = [p for p in pending if isinstance(p, ObjectRef)]
    fetched = iter(actorrt.get(refs) if refs else [])
    out: list[Any] = []
    for p in pending:
        value = next(fetched) if isinstance(p, ObjectRef) else p
        out.extend(value if isinstance(value, list) and isinstance(p, ObjectRef) else [value])
    return out


def _as_table(values: Iterable[Any], schema) -> pa.Table:
    tables: list[pa.Table] = []
    rows: list[Any] = []
    for v in values:
        if isinstance(v, pa.RecordBatch):
            tables.append(pa.Table.from_batches([v]))
        elif isinstance(v, pa.Table):
            tables.append(v)
        elif type(v).__name__ == "DataFrame" and hasattr(v, "to_dict"):  # pandas, without importing it
            tables.append(pa.Table.from_pandas(v, preserve_index=False))
        else:
            rows.append(v)
    if rows:
        tables.append(_rows_table(rows, schema))
    if not tables:
        raise BridgeError("nothing to make a DataFrame of: the source holds no rows or batches")
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise BridgeError(f"the batches and rows do not share one schema: {exc}") from None


def _rows_table(rows: list[Any], schema) -> pa.Table:
    first = rows[0]
    if hasattr(first, "asDict"):  # Spark Rows
        rows = [r.asDict() for r in rows]
    elif isinstance(first, tuple | list):
        if schema is None:
            raise BridgeError("rows given as tuples need a schema (or give dicts, whose keys name the columns)")
        names = _field_names(schema)
        rows = [dict(zip(names, r, strict=True)) for r in rows]
    elif not isinstance(first, dict):
        raise BridgeError(f"cannot make DataFrame rows of {type(first).__name__} values; give dicts, tuples, "
                          "Rows, Arrow batches or pandas DataFrames")
    try:
        return table_of_dicts(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise BridgeError(f"the rows do not fit one schema: {exc}") from None


def table_of_dicts(rows: list[dict[str, Any]]) -> pa.Table:
    """An Arrow table of dict rows; columns are every key of any row (a missing one is null)."""
    names = list(dict.fromkeys(k for row in rows for k in row))
    return pa.Table.from_pydict({n: [row.get(n) for row in rows] for n in names})


def _struct(schema):
    """``schema`` as a StructType (it may be a DDL string)."""
    if isinstance(schema, str):
        from pyspark.sql.types import _parse_datatype_string

        return _parse_datatype_string(schema)
    return schema


def _field_names(schema) -> list[str]:
    return [f.name for f in _struct(schema).fields]
