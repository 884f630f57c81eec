"""``python -m actorrt``: the ``actorrt`` command."""

from actorrt.cluster.cli import main

main()
