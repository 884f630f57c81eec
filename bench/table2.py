"""Mean latency without and during a failure, per application and system (the paper's Table 2).

Reads the newest results of ``bench/allreduce_recovery.py`` (iterative allreduce) and
``bench/sgd.py`` (distributed SGD) in ``bench/results/`` and puts their mean iteration latencies
side by side: without a failure, and during one (from the killed iteration to the first that runs
as fast as before again; see ``bench/recovery_runs.py``). Writes ``bench/results/table2.json``.

Run: ``python bench/table2.py`` after the two benchmarks.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

RESULTS = Path(__file__).parent / "results"
APPLICATIONS = {"allreduce-recovery": "iterative allreduce", "sgd": "distributed SGD"}


def _newest(prefix: str) -> dict | None:
    found = sorted(RESULTS.glob(f"{prefix}-2*.json"))
    return json.loads(found[-1].read_text()) if found else None


@click.command()
def main() -> None:
    """Print and write the table from the newest benchmark results."""
    rows = []
    for prefix, application in APPLICATIONS.items():
        doc = _newest(prefix)
        if doc is None:
            click.echo(f"no {prefix} results in {RESULTS}: run bench/{prefix.replace('-', '_')}.py first", err=True)
            continue
        for r in doc["results"]:
            latency = r.get("latency", {})
            rows.append({"application": application, "system": r["ft"], "run": doc["meta"].get("time", ""),
                         "without_failure_ms": latency.get("without_failure_ms"),
                         "during_failure_ms": latency.get("during_failure_ms")})
    click.echo(f"{'application':<22}{'system':<15}{'mean ms':>10}{'during a failure ms':>22}")
    for row in rows:
        during = row["during_failure_ms"]
        click.echo(f"{row['application']:<22}{row['system']:<15}{row['without_failure_ms']:>10.1f}"
                   + (f"{during:>22.1f}" if during is not None else f"{'-':>22}"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "table2.json").write_text(json.dumps(rows, indent=1))
    click.echo(f"wrote {RESULTS}/table2.json")


if __name__ == "__main__":
    main()
