"""The property-based tests of whole streaming flows, run long.

CI runs a fixed sample of each (200 flows in one process, 6 on a real cluster with a node killed);
this draws as many new ones as asked, with random parallelism, disorder, windows and kill points,
and checks every window against the plain-Python oracle; interval and window joins of two
sources too (every pair, in any delivery order in one process, and with a node killed on a
cluster). A failure prints the smallest flow
hypothesis found and the line that reproduces it (keep it as a regression test).

    python scripts/streaming_properties.py                       # 2,000 in one process, 100 on a cluster
    python scripts/streaming_properties.py --local 20000 --cluster 500
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
LOCAL = "tests/unit/test_stream_properties.py tests/unit/test_stream_joins.py"  # windows; interval joins
CLUSTER = "tests/integration/test_streaming_properties.py"


@click.command()
@click.option("--local", "local", default=2000, show_default=True, help="flows run in one process (0: none)")
@click.option("--cluster", "cluster", default=100, show_default=True,
              help="flows run on a real cluster, a node killed in each (0: none)")
def main(local: int, cluster: int) -> None:
    failed = False
    for path, examples in ((LOCAL, local), (CLUSTER, cluster)):
        if not examples:
            continue
        click.echo(f"{path}: {examples} flows")
        env = {**os.environ, "ACTORRT_PROPERTY_EXAMPLES": str(examples)}
        code = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "0",
                               *path.split()], cwd=ROOT, env=env).returncode
        failed = failed or code != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
