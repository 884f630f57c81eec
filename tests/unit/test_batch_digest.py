"""The digest a stream operator sends beside each batch: the same records give the same bytes
in any process, whatever objects they share; other records give other bytes."""

from __future__ import annotations

import pickle

import pyarrow as pa

from actorrt.core.object_ref import ObjectRef
from actorrt.streaming.digests import batch_digest


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


def test_a_set_counts_by_its_elements_not_its_iteration_order():
    built = {0, 8, 16, 24}  # ints hash to themselves: the orders below are the same in every process
    built -= {0, 16}
    built.add(3)  # it takes a slot the deletions freed
    restored = pickle.loads(pickle.dumps(built))  # as a checkpoint restores it: inserted afresh
    assert list(built) != list(restored)  # the premise: equal sets, other orders
    assert batch_digest([("k", 0.0, 60.0, built)]) == batch_digest([("k", 0.0, 60.0, restored)])
    assert batch_digest([{None, "a", 1}]) == batch_digest([{1, "a", None}])
    assert batch_digest([frozenset({"a"})]) != batch_digest([frozenset({"b"})])


def test_arrow_records_go_unchecked():
    assert batch_digest([pa.array([1, None, 3])]) == b""
