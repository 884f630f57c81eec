"""Savepoints: a stopped flow's state on disk, to start it again (at other parallelism if asked).

``RunningFlow.stop(savepoint=path)`` stops the sources, drains the flow (every record read is
processed, and every instance of a stage ends at one watermark), then writes, in the directory
``path``:

- ``stage-<s>.pkl`` per stage with state (cloudpickle): ``{"keys": KeySlice, "watermark": µs,
  "newest": µs, "position": ..., "source": ..., "sink_writes": {(instance, port): n}}``: the keyed
  state of all its instances merged (``key_state.py``), the stage's watermark (event time), how
  far a pulled source was read (and the source, with what it counted), and each sink writer's
  last write number, by the writer's instance name (so that writes after the restart are new ones);
- ``manifest.json``, last (a directory without it is no savepoint): ``{"format": 1, "flow":
  name, "saved_at": ISO time, "stages": [{"name", "parallelism", "instances", "keyed", "file"}]}``
  (``instances``: how many instance names the run gave, rescales included: the resumed run's
  later instances take new ones, so that no sink writer's numbers are used twice).

``Dataflow.start(from_savepoint=path)`` checks that the flow has the same stages (names and keyed
steps; the parallelism may differ), splits each stage's keys over its instances as records will
be routed (``keys.partition``), and gives each instance its part before any record comes.
Record lineage starts afresh in the resumed run.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

from actorrt.streaming.key_state import KeySlice
from actorrt.streaming.keys import partition
from actorrt.streaming.plan import Plan
from actorrt.util import pickling

FORMAT = 1
MANIFEST = "manifest.json"


class SavepointError(ValueError):
    """A savepoint that cannot start this flow: missing, of another format, or of other stages."""


def write(path: str | Path, plan: Plan, parts: list[list[dict[str, Any]]], parallelism: list[int],
          names: list[int]) -> Path:
    """Write the savepoint of ``plan`` whose instances gave ``parts`` (per stage, per instance;
    instances rescales retired last); per stage, its ``parallelism`` now and the instance
    ``names`` (uids) given so far."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST).unlink(missing_ok=True)  # incomplete until the new one is written
    stages = []
    for s, (stage, instances) in enumerate(zip(plan.stages, parts, strict=True)):
        saved = _merged(instances)
        name = f"stage-{s}.pkl"
        _write_atomically(directory / name, pickling.dumps(saved))
        stages.append({"name": stage.name, "parallelism": parallelism[s], "instances": names[s],
                       "keyed": stage.keyed.kind if stage.keyed is not None else None, "file": name})
    manifest = {"format": FORMAT, "flow": plan.name, "saved_at": datetime.datetime.now(datetime.UTC).isoformat(),
                "stages": stages}
    _write_atomically(directory / MANIFEST, json.dumps(manifest, indent=1).encode())
    return directory


def read(path: str | Path, plan: Plan) -> tuple[list[list[dict[str, Any]]], list[int]]:
    """Per stage of ``plan``, per instance, the part of the savepoint at ``path`` it starts from;
    and per stage the instance names (uids) the saved run gave (a new instance takes a new one)."""
    directory = Path(path)
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except FileNotFoundError:
        raise SavepointError(f"no savepoint at {directory}: it has no {MANIFEST} (RunningFlow.stop(savepoint=) "
                             f"writes one; a stop that failed leaves none)") from None
    if manifest.get("format") != FORMAT:
        raise SavepointError(f"the savepoint at {directory} is in format {manifest.get('format')!r}; this version "
                             f"reads format {FORMAT}")
    saved = [(stage["name"], stage["keyed"]) for stage in manifest["stages"]]
    ours = [(stage.name, stage.keyed.kind if stage.keyed is not None else None) for stage in plan.stages]
    if saved != ours:
        raise SavepointError(f"the savepoint at {directory} is of a flow with stages {saved}; {plan.name} has "
                             f"{ours} (the same stages, keyed steps and names are needed; parallelism may differ)")
    out = []
    for stage, entry in zip(plan.stages, manifest["stages"], strict=True):
        whole = pickling.loads((directory / entry["file"]).read_bytes())
        out.append(_split(whole, stage.parallelism))
    return out, [entry.get("instances", entry["parallelism"]) for entry in manifest["stages"]]


def _merged(instances: list[dict[str, Any]]) -> dict[str, Any]:
    keys = None
    for part in instances:
        if part["keys"] is not None:
            keys = keys or KeySlice()
            keys.merge(part["keys"])
    marks = [p["watermark"] for p in instances if p["watermark"] is not None]
    newest = [p["newest"] for p in instances if p["newest"] is not None]
    writes = {(part["id"], port): n for part in instances for port, n in part["sink_writes"].items()}
    return {"keys": keys, "watermark": min(marks) if marks else None, "newest": max(newest) if newest else None,
            "position": instances[0]["position"], "source": instances[0]["source"], "sink_writes": writes}


def _split(whole: dict[str, Any], parallelism: int) -> list[dict[str, Any]]:
    keys = whole["keys"]
    slices = keys.split(lambda key: partition(key, parallelism), parallelism) if keys is not None else None
    return [{"keys": None if slices is None else slices[i], "watermark": whole["watermark"],
             "newest": whole["newest"], "position": whole["position"] if i == 0 else None,
             "source": whole["source"] if i == 0 else None,
             "sink_writes": {port: n for (j, port), n in whole["sink_writes"].items() if j == i}}
            for i in range(parallelism)]


def _write_atomically(path: Path, data: bytes) -> None:
    hidden = path.with_name(f".{path.name}.tmp")
    with open(hidden, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(hidden, path)
