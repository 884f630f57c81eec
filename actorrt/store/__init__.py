"""The global lineage store: Redis clients (sharded or a Redis Cluster), the TaskSpec records, and
the redis-server processes an embedded cluster runs."""
