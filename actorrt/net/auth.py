"""The cluster token: every RPC carries it in its metadata, and servers check it."""

from __future__ import annotations

import hmac

from grpc import aio

TOKEN_METADATA = "x-actorrt-token"
PEER_METADATA = "x-actorrt-peer"


def metadata(token: str, **extra: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying ``token`` (and ``extra`` entries, ``_`` written as ``-``)."""
    return ((TOKEN_METADATA, token),) + tuple((k.replace("_", "-"), v) for k, v in extra.items())


def token_ok(context: aio.ServicerContext, token: str) -> bool:
    sent = dict(context.invocation_metadata() or ()).get(TOKEN_METADATA, "")
    return hmac.compare_digest(sent.encode(), token.encode())
