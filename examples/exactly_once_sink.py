"""Exactly-once output under node kills: producers feed a nondeterministic writer actor, which
writes every batch it receives to files through ``actorrt.sinks.FileSink``; its node is SIGKILLed
mid-stream, restarted and replayed, and the files still hold every record exactly once.

    python examples/exactly_once_sink.py [OUTPUT_DIR]
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
import time

import actorrt
from actorrt.sinks import FileSink, read_parts


@actorrt.remote
class Writer:
    """Receives from many producers in arrival order (nondeterministic) and writes each batch."""

    def __init__(self, directory):
        self.sink = FileSink(directory)
        self.batches = 0

    async def write(self, producer, records):
        await self.sink.write(json.dumps({"producer": producer, "records": records}).encode())
        self.batches += 1

    def count(self):
        return self.batches


@actorrt.remote
class Producer:
    def __init__(self, name, writer):
        self.name = name
        self.writer = writer

    def produce(self, records):
        self.writer.write.remote(self.name, records)


def main(directory: str) -> None:
    actorrt.init(num_nodes=2)
    try:
        writer = Writer.options(node=1).remote(directory)
        producers = [Producer.options(node=0).remote(f"p{i}", writer) for i in range(3)]
        records = [f"record-{i}" for i in range(900)]
        batches = [records[i:i + 10] for i in range(0, len(records), 10)]
        for i, batch in enumerate(batches):
            producers[i % 3].produce.remote(batch)
            if i == len(batches) // 2:
                print(f"killing node 1 (pid {actorrt.kill_node(1)}) with {i + 1} of {len(batches)} batches sent")
            time.sleep(0.005)
        deadline = time.monotonic() + 120
        while actorrt.get(writer.count.remote(), timeout=60) < len(batches):
            assert time.monotonic() < deadline, "the writer did not catch up"
            time.sleep(0.1)
        print("recovery:", next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)["recoveries"])
    finally:
        actorrt.shutdown()

    written = [json.loads(part) for part in read_parts(directory)]
    counts = collections.Counter(r for part in written for r in part["records"])
    assert len(written) == len(batches), f"{len(written)} part files for {len(batches)} batches"
    assert counts == collections.Counter(records), "a record is missing or doubled"
    print(f"{len(written)} part files in {directory}: each of the {len(records)} records exactly once")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="actorrt-sink-"))
