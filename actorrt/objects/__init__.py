"""Objects that move between processes: shared memory on one host (the arena, who holds which
segment), and the process's object store, fetches and retention built on it."""
