"""Ray as a peer in a benchmark: run in this Python if it has Ray, else in a Python that has it
(``.venv-ray``), as a subprocess of the same benchmark script that prints its figures as JSON."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

DEFAULT_RAY_PYTHON = str(Path(__file__).parents[1] / ".venv-ray" / "bin" / "python")


def ray_figures(run_here: Callable[[], Any], script: str, args: list[str], ray_python: str) -> Any | None:
    """``run_here()`` if this Python has Ray; else ``script --ray-only *args`` run by ``ray_python``
    (the last line it prints, as JSON); None if neither has Ray."""
    try:
        import ray  # noqa: F401
    except ImportError:
        pass
    else:
        return run_here()
    if not ray_python or not Path(ray_python).exists():
        return None
    done = subprocess.run([ray_python, script, "--ray-only", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise click.ClickException(f"the Ray run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])
