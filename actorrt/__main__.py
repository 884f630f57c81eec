"""``python -m actorrt``: the ``actorrt`` command."""

from actorrt.cluster.cli import main

if __name__ == "__main__":
    main()
