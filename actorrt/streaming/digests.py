"""The digest that travels with every batch, so that a replayed upstream that emits other records
is caught (``batch_digest``)."""

from __future__ import annotations

import hashlib
import io
import pickle
from typing import Any

from actorrt.core.object_ref import ObjectRef
from actorrt.handles import ActorHandle

# Types pickle writes the same for equal values (a dict in its insertion order, which a replay keeps).
_PLAIN_TYPES = frozenset({str, int, float, bytes, bool, type(None), tuple, list, dict})


class _Unchecked(Exception):  # noqa: N818 - not an error: a batch whose digest would not be faithful
    pass


class _DigestPickler(pickle.Pickler):
    """Pickles records for ``batch_digest`` so that equal records give equal bytes in any process:
    a set stands for its elements' digests in sorted order (its iteration order depends on its
    history: a set restored from a checkpoint may iterate otherwise, and in Python 3.11 ``None``
    hashes by address), a ref or a handle for its ID (its pickle names an owner's address, which a
    restart changes). An Arrow object leaves the batch unchecked: the slots of its nulls are
    undefined bytes."""

    def persistent_id(self, obj: Any) -> Any:  # called for every object: the common types first
        kind = type(obj)
        if kind in _PLAIN_TYPES:
            return None
        if kind is set or kind is frozenset:
            return "set", sorted(batch_digest([item]) for item in obj)
        if isinstance(obj, ObjectRef):
            return "ref", obj.object_id
        if isinstance(obj, ActorHandle):
            return "actor", obj.actor_id
        if kind.__module__.startswith("pyarrow"):
            raise _Unchecked
        return None


def digest(batch: list[Any], times: list[int] | None) -> bytes:
    return batch_digest(batch if times is None else [batch, times])


def batch_digest(batch: list[Any]) -> bytes:
    """8 bytes that stand for a batch's records, sent beside it as a plain argument. A receiver's
    ledger compares the plain arguments of a replayed call with those of the call it ran, so an
    operator whose replay emits other records (it read something nondeterministic without a
    causal service, e.g. ``time.time()``) is caught and stopped, not silently obeyed. The records
    are pickled without the pickler's memo, so the bytes depend on the values, not on which
    objects a run happened to share; records pickle cannot take (or Arrow objects) go unchecked
    (an empty digest)."""
    out = io.BytesIO()
    pickler = _DigestPickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    try:
        pickler.dump(batch)
    except Exception:  # noqa: BLE001 - a local class, a lambda, a cycle: nothing to compare by
        return b""
    return hashlib.blake2b(out.getbuffer(), digest_size=8).digest()
