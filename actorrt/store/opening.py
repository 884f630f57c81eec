"""Which store a process opens: the one a URL names (``redis://``, ``redis+cluster://``, and
``rediss`` for either over TLS), or the one a cluster's view names (an external store, else the
head's own shards), following a shard to its promoted replica as views say."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from actorrt.rpc import head_pb2
from actorrt.store.clients import ClusterStore, ShardedStore, Store
from actorrt.store.tls import StoreTls

CLUSTER_SCHEME = "redis+cluster"
SCHEMES = ("redis", "rediss", CLUSTER_SCHEME, "rediss+cluster")  # rediss: over TLS
STORE_URL_ENV = "ACTORRT_STORE_URL"  # how a store URL reaches the head: it may hold a password


@dataclass(frozen=True)
class StoreURL:
    cluster: bool  # a Redis Cluster (else independent shards)
    tls: bool
    addresses: list[str]
    username: str | None  # a Redis ACL user; None: the default user
    password: str | None


def parse_store_url(url: str) -> StoreURL:
    """``redis://[[user]:password@]host:port[,host:port...]`` (independent shards, client-side
    sharding) or ``redis+cluster://[[user]:password@]host:port[,...]`` (a Redis Cluster; any nodes
    as seeds); ``rediss://`` and ``rediss+cluster://`` reach them over TLS. A user is a Redis ACL
    user (it needs the ``@scripting``, ``@hash``, ``@set``, ``@string``, ``@keyspace`` and
    ``@connection`` commands on every key).

    Raises ValueError naming what is wrong.
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError(f"store URL {url!r}: the scheme must be one of {', '.join(s + '://' for s in SCHEMES)}")
    hosts = parts.netloc.rpartition("@")[2]
    addresses = [a.strip() for a in hosts.split(",") if a.strip()]
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"store URL {url!r}: {address!r} is not host:port")
    if not addresses:
        raise ValueError(f"store URL {url!r} names no host:port")
    return StoreURL(parts.scheme.endswith("+cluster"), parts.scheme.startswith("rediss"), addresses,
                    parts.username or None, parts.password)


def without_password(url: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def open_store(url: str, tls: StoreTls | None = None, replicas: int = 0) -> Store:
    """The store at ``url``; over TLS if it says ``rediss``, checked against ``tls``'s CA and
    presenting its certificate (None: the system's CAs, no certificate); writes return once
    ``replicas`` replicas of their shard hold them."""
    parsed = parse_store_url(url)
    cls = ClusterStore if parsed.cluster else ShardedStore
    return cls(parsed.addresses, parsed.password, username=parsed.username,
               tls=(tls or StoreTls()) if parsed.tls else None, replicas=replicas)


def store_of_view(view: head_pb2.ClusterView, tls: StoreTls | None) -> Store:
    """The store a cluster's view names: its external store, else the head's shards (over TLS
    when they serve it); ``tls``: this process's certificate and the cluster's CA, if any. Views
    that move a shard to its replica reach it through ``follow_view``."""
    if view.store_url:
        return open_store(view.store_url, tls, view.store_replicas)
    return ShardedStore([s.address for s in view.store_shards], view.store_password,
                        tls=tls if view.store_tls else None, replicas=view.store_replicas)


def follow_view(store: Store, view: head_pb2.ClusterView) -> None:
    """``store`` (made by ``store_of_view``) on the shards ``view`` names now."""
    if isinstance(store, ShardedStore) and not view.store_url:
        store.follow([s.address for s in view.store_shards])
