"""Which operator instance owns a key: a hash that agrees with ``==`` and is the same in every process.

Keys come from JSON, pandas and Arrow as well as from Python code, so ``1``, ``1.0``, ``True``,
``np.int64(1)`` and ``Decimal(1)`` must reach the same instance, as they reach the same entry of a
dict. Python's own ``hash`` of a number does that and is not salted; that of a string, bytes or a
datetime is salted per process, so those are hashed from their contents here. A key of any other
type is refused: an instance chosen by an address or a salted hash would split equal keys.
"""

from __future__ import annotations

import datetime
import enum
import numbers
import zlib
from decimal import Decimal
from typing import Any

import numpy as np

_MASK = (1 << 64) - 1
_NONE = 0x6E6F6E65
_NAN = 0x6E616E
_MICROSECOND = datetime.timedelta(microseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=datetime.UTC)


class UnpartitionableKeyError(TypeError):
    """A key of a type with no hash that agrees with ``==`` in every process."""


def partition(key: Any, parts: int) -> int:
    """The instance of ``parts`` that owns ``key``."""
    return _mix(key_hash(key)) % parts


def key_hash(key: Any) -> int:
    """A hash of ``key`` that equal keys share, in any process.

    Raises:
        UnpartitionableKeyError: ``key`` is of a type it cannot hash so (a list, a dict, an object).
    """
    kind = type(key)
    if kind is str:
        return _text(key)
    if kind is int or kind is float:
        return _number(key)
    if key is None:
        return _NONE
    if isinstance(key, tuple):  # a named tuple equals the plain one
        h = 0x345678
        for item in key:
            h = ((h ^ key_hash(item)) * 1000003) & _MASK
        return h ^ len(key)
    if isinstance(key, enum.Enum) and not isinstance(key, (int, str)):
        return _text(f"{kind.__module__}.{kind.__qualname__}.{key.name}")
    if isinstance(key, str):  # np.str_, a str enum: by the string they hold
        return _text(str.__str__(key))
    if isinstance(key, (bytes, bytearray)):  # b"a" == bytearray(b"a")
        return zlib.crc32(key)
    if isinstance(key, (np.timedelta64, np.datetime64)):  # before numbers: a timedelta64 is an integer to numpy
        return _numpy_time(key)
    if isinstance(key, (numbers.Number, np.bool_)):  # numpy's scalars hash as Python's numbers do
        return _number(key)
    if isinstance(key, datetime.datetime):  # pandas' Timestamp too
        return _number((key - (_EPOCH if key.tzinfo is None else _EPOCH_UTC)) // _MICROSECOND)
    if isinstance(key, datetime.date):
        return _number(key.toordinal())
    if isinstance(key, datetime.timedelta):
        return _number(key // _MICROSECOND)
    if isinstance(key, datetime.time):
        offset = key.utcoffset() or datetime.timedelta(0)
        since_midnight = datetime.timedelta(hours=key.hour, minutes=key.minute, seconds=key.second,
                                            microseconds=key.microsecond) - offset
        return _number(since_midnight // _MICROSECOND) ^ 0x74696D65
    if kind is frozenset:  # equal sets in any order
        return _mix(sum(_mix(key_hash(item)) for item in key) & _MASK)
    raise UnpartitionableKeyError(
        f"a key of type {kind.__name__} ({_short(key)}) has no hash that equal keys share in every process; "
        f"key by str, int, float, bytes, None, a date or time, or tuples of them")


def _numpy_time(value: np.timedelta64 | np.datetime64) -> int:
    """As the ``timedelta`` or naive ``datetime`` it equals (to the microsecond)."""
    if np.isnat(value):
        return _NAN
    if isinstance(value, np.timedelta64):
        return _number(int(value // np.timedelta64(1, "us")))
    return _number(int((value - np.datetime64(0, "us")) // np.timedelta64(1, "us")))


def _text(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass")) ^ 0x7374720000000000


def _number(value: Any) -> int:
    if isinstance(value, Decimal):
        if value.is_nan():  # a signalling NaN cannot even be compared
            return _NAN
    elif value != value:
        return _NAN  # NaN hashes by its address in Python >= 3.10
    return hash(value)


def _mix(h: int) -> int:
    """splitmix64's finalizer: nearby hashes (Python's hash of an int is the int) spread evenly."""
    h &= _MASK
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK
    return h ^ (h >> 31)


def _short(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."
