"""Mean latency without and during a failure, per application and system (the paper's Table 2).

Reads the newest results of ``bench/allreduce_recovery.py`` (iterative allreduce) and
``bench/sgd.py`` (distributed SGD) in ``bench/results/`` and puts their mean iteration latencies
side by side: the mean without a failure; with one, the mean over the whole run and the latency
of the iteration the failure hit (see ``bench/recovery_runs.py``). The streaming row comes from
the newest ``bench/streaming.py`` run with parts (a) and (c): the mean update latency without a
failure, over the run with one, and over the lines scheduled around it (from the last checkpoint
before the kill to 3 s after: the part the failure hit). Writes ``bench/results/table2.json``.

Run: ``python bench/table2.py`` after the benchmarks.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

RESULTS = Path(__file__).parent / "results"
APPLICATIONS = {"allreduce-recovery": "iterative allreduce", "sgd": "distributed SGD"}


def _newest(prefix: str, parts: tuple[str, ...] = ()) -> dict | None:
    """The newest results of a benchmark (that has ``parts``)."""
    for path in sorted(RESULTS.glob(f"{prefix}-2*.json"), reverse=True):
        doc = json.loads(path.read_text())
        if all(part in doc for part in parts):
            return doc
    return None


def _streaming_rows() -> list[dict]:
    doc = _newest("streaming", ("a", "c"))
    if doc is None:
        click.echo(f"no streaming results with parts a and c in {RESULTS}: run bench/streaming.py first", err=True)
        return []
    without = {r["system"]: r["mean_ms"] for r in doc["a"]}
    hit = {r["system"]: r for r in doc["c"] if r.get("recovery")}
    return [{"application": "streaming wordcount", "system": system, "run": doc["meta"].get("time", ""),
             "without_failure_ms": mean,
             **({"with_failure_ms": hit[system]["mean_ms"],
                 "hit_iteration_ms": hit[system]["recovery"]["mean_latency_during_ms"]} if system in hit else {})}
            for system, mean in without.items() if system != "pyflink"]


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
            rows.append({"application": application, "system": r["ft"], "run": doc["meta"].get("time", ""), **latency})
    rows += _streaming_rows()
    click.echo(f"{'application':<22}{'system':<15}{'mean ms':>9}{'with a failure: mean ms':>25}"
               f"{'hit iteration ms':>18}")
    for row in rows:
        failure = (f"{row['with_failure_ms']:>25.1f}{row['hit_iteration_ms']:>18.1f}" if "with_failure_ms" in row
                   else f"{'-':>25}{'-':>18}")
        click.echo(f"{row['application']:<22}{row['system']:<15}{row['without_failure_ms']:>9.1f}" + failure)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "table2.json").write_text(json.dumps(rows, indent=1))
    click.echo(f"wrote {RESULTS}/table2.json")


if __name__ == "__main__":
    main()
