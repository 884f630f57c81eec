"""What the bridge raises for bad input, naming what is wrong."""

from __future__ import annotations

from actorrt.exceptions import ActorRTError


class BridgeError(ActorRTError, ValueError):
    """Bad input to the bridge (a missing key column, an unsupported type, a stopped SparkSession,
    an unknown method): nothing was sent to the actors when this is raised before feeding."""
