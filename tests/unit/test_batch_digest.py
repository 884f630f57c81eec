"""The digest a stream operator sends beside each batch: the same records give the same bytes
in any process, whatever objects they share; other records give other bytes."""

from __future__ import annotations

from actorrt.core.object_ref import ObjectRef
from actorrt.streaming.operator import batch_digest


def test_equal_records_give_equal_digests_whatever_objects_they_share():
    word = "shared"
    shared = [(word, 1), (word, 2)]
    copied = [("".join(["sha", "red"]), 1), ("".join(["sh", "ared"]), 2)]
    assert batch_digest(shared) == batch_digest(copied)
    assert len(batch_digest(shared)) == 8


def test_other_records_give_other_digests():
    assert batch_digest([("a", 1.0)]) != batch_digest([("a", 1.0000001)])
    assert batch_digest([1, 2]) != batch_digest([2, 1])


def test_a_ref_stands_for_its_object_not_its_owner_address():
    before = ObjectRef(b"o" * 28, "127.0.0.1:1000")
    after_a_restart = ObjectRef(b"o" * 28, "127.0.0.1:2000")
    assert batch_digest([before]) == batch_digest([after_a_restart])
    assert batch_digest([before]) != batch_digest([ObjectRef(b"p" * 28, "127.0.0.1:1000")])


def test_records_pickle_cannot_take_go_unchecked():
    assert batch_digest([lambda: 1]) == b""
