"""Shared fixtures: real clusters (head, node processes, redis-server shards) on loopback."""

from __future__ import annotations

import contextlib

import pytest

import actorrt

_spark = None  # one local SparkSession for the whole run, started before any test (see below)


def _start_spark():
    from pyspark.sql import SparkSession

    import bridge  # noqa: F401 - sets PYSPARK_PYTHON for Spark's Python workers

    session = (SparkSession.builder.master("local[2]").appName("actorrt-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


# Markers by directory: tests/integration and tests/spark start real processes (``-m "not slow"``
# runs the unit tests alone); tests/spark also starts a SparkSession.
_MARKERS = {"integration": ("slow",), "spark": ("slow", "spark")}


def pytest_collection_modifyitems(session, config, items):
    """Mark tests by their directory, then start Spark now, while this process runs no other
    thread: PySpark launches its JVM with a preexec_fn, which can crash the child of a process
    whose threads (grpc's, a driver's loop) hold locks at fork time. Only when some collected
    test uses it."""
    for item in items:
        for marker in _MARKERS.get(item.path.parent.name, ()):
            item.add_marker(marker)
    global _spark
    if any("spark" in getattr(item, "fixturenames", ()) for item in items):
        _spark = _start_spark()


def pytest_sessionfinish(session, exitstatus):
    if _spark is not None:
        _spark.stop()


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession."""
    return _spark if _spark is not None else _start_spark()


@contextlib.contextmanager
def running_cluster(**options):
    info = actorrt.init(**options)
    try:
        yield info
    finally:
        actorrt.shutdown()


@pytest.fixture(scope="module")
def cluster():
    """A two-node embedded cluster shared by the tests of one module."""
    with running_cluster(num_nodes=2, store_shards=2) as info:
        yield info


@pytest.fixture
def fresh_cluster():
    """A two-node embedded cluster of the test's own (for tests that kill nodes)."""
    with running_cluster(num_nodes=2, store_shards=1) as info:
        yield info


@pytest.fixture
def cluster_with():
    """``with cluster_with(**init_options):`` runs an embedded cluster of the test's own choosing."""
    return running_cluster
