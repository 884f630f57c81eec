"""Durable file writes: atomic replace, and create-once with replay detection."""

from __future__ import annotations

import pytest

from actorrt.exceptions import SinkConflictError
from actorrt.util.files import write_atomically, write_once


def test_write_atomically_replaces_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "d" / "f"
    write_atomically(target, b"one")
    write_atomically(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["f"]


def test_write_once_creates_once_accepts_a_replay_and_refuses_a_contradiction(tmp_path):
    target = tmp_path / "part-1"
    assert write_once(target, b"records") is True
    assert write_once(target, b"records") is False  # a replayed write: nothing changes
    with pytest.raises(SinkConflictError, match="other content"):
        write_once(target, b"different")
    assert target.read_bytes() == b"records"
    assert [p.name for p in tmp_path.iterdir()] == ["part-1"]
