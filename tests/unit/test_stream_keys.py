"""Key partitioning: equal keys reach the same instance, whatever their types, in every process."""

from __future__ import annotations

import collections
import datetime
import enum
import json
import math
import os
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorrt.streaming.keys import UnpartitionableKeyError, key_hash, partition


def _equal_forms(value):
    """``value`` and values of other types that ``==`` it (as JSON, numpy, pandas and Arrow give them)."""
    forms = [value]
    if isinstance(value, bool):
        forms += [int(value), float(value), np.bool_(value)]
    elif isinstance(value, int):
        forms += [Decimal(value), Fraction(value)]
        if -2**63 <= value < 2**63:
            forms.append(np.int64(value))
        if float(value) == value:
            forms += [float(value), np.float64(value)]
    elif isinstance(value, float):
        forms += [np.float64(value), Decimal(value)] + ([Fraction(value)] if math.isfinite(value) else [])
        if value.is_integer():
            forms.append(int(value))
    elif isinstance(value, str):
        forms.append(np.str_(value))
    elif isinstance(value, bytes):
        forms.append(bytearray(value))
    elif isinstance(value, tuple):
        forms += [tuple(_equal_forms(item)[-1] for item in value)]
    return forms


keys = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
                    lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=6)


@settings(max_examples=300, derandomize=True)
@given(keys)
def test_equal_keys_of_any_types_go_to_the_same_instance(key):
    forms = _equal_forms(key)
    assert all(form == key for form in forms)  # the premise: a plain-Python dict would merge them
    assert len({partition(form, 7) for form in forms}) == 1, forms


def test_a_count_per_key_is_one_row_whatever_types_the_key_came_in():
    """1, 1.0 and np.int64(1) split into three rows of 33, 34 and 33 under crc32(repr(key))."""
    records = [[1, 1.0, np.int64(1), True, Decimal(1)][i % 5] for i in range(100)]
    counts = collections.Counter(records)  # the oracle: one key
    per_instance = collections.Counter(partition(record, 4) for record in records)
    assert len(counts) == 1 and list(per_instance.values()) == [100]


class Colour(str, enum.Enum):  # noqa: UP042 - the mixin form users write, whose hash must agree with ==
    RED = "red"


class Size(enum.IntEnum):
    ONE = 1


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize("key, equal", [
    (Colour.RED, "red"), (Size.ONE, 1.0), (Point(1, "a"), (1.0, "a")),
    (np.timedelta64(5, "s"), datetime.timedelta(seconds=5)),
    (np.datetime64("2026-11-26T06:56:01"), datetime.datetime(2026, 11, 26, 6, 56, 1)),
    (datetime.datetime(2026, 11, 26, 7, tzinfo=datetime.timezone(datetime.timedelta(hours=1))),
     datetime.datetime(2026, 11, 26, 6, tzinfo=datetime.UTC)),
    (datetime.time(6, 56), datetime.time(6, 56, 0, 0)),
])
def test_keys_of_other_kinds_that_equal_go_to_the_same_instance(key, equal):
    assert key == equal and partition(key, 7) == partition(equal, 7)


def test_nan_keys_have_a_hash():
    assert key_hash(float("nan")) == key_hash(np.float64("nan")) == key_hash(Decimal("sNaN"))


def test_the_hash_is_the_same_in_another_process_with_another_string_salt():
    sample = ["word", "", "ünïcode", b"bytes", 7, -1, 2**70, 1.5, -0.0, None, ("a", 1, (2.5, b"x")),
              datetime.date(2026, 11, 26), datetime.datetime(2026, 11, 26, 6, 56), datetime.timedelta(seconds=3),
              frozenset({"a", "b"}), datetime.time(6, 56), float("nan")]
    script = ("import json, datetime, sys; from actorrt.streaming.keys import key_hash; "
              "sample = eval(sys.stdin.read()); print(json.dumps([key_hash(k) for k in sample]))")
    here = [key_hash(k) for k in sample]
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", script], input=repr(sample).replace("nan", "float('nan')"),
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        assert json.loads(out) == here


def test_keys_spread_over_the_instances():
    for sample in ([f"user{i}" for i in range(4000)], list(range(4000)), [i / 4 for i in range(4000)]):
        counts = collections.Counter(partition(key, 4) for key in sample)
        assert min(counts.values()) > 800, counts


@pytest.mark.parametrize("key", [[1, 2], {"a": 1}, {1, 2}, object(), np.array([1, 2])])
def test_a_key_no_hash_fits_is_refused_with_what_to_use_instead(key):
    with pytest.raises(UnpartitionableKeyError, match=f"a key of type {type(key).__name__} .*key by str, int"):
        key_hash(key)
