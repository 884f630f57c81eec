"""Which host this process is on, as far as shared memory goes.

Processes with the same host identity map each other's shared-memory segments; others move
bytes. The default names the machine and its boot (two containers of one machine with separate
``/proc`` would share a hostname only by chance, and a reboot makes a new host). Set
``ACTORRT_HOST_ID`` to override it: to force the cross-host path between processes of one machine
(tests, network namespaces), or to tell processes that cannot see each other's ``/proc`` apart.
"""

from __future__ import annotations

import functools
import os
import socket

HOST_ID_ENV = "ACTORRT_HOST_ID"


@functools.cache
def host_identity() -> str:
    explicit = os.environ.get(HOST_ID_ENV)
    if explicit:
        return explicit
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()[:8]
    except OSError:
        boot = "?"
    return f"{socket.gethostname()}/{boot}"
