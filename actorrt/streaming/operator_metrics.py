"""What an operator instance measures of its run: rates and latencies, for people (``actorrt
status``, Prometheus), not state: a replay does not restore them."""

from __future__ import annotations

import time
from collections import deque

# Rates are over this much of the recent past; latency percentiles over this many batches.
RATE_WINDOW_S = 10.0
LATENCY_SAMPLES = 2048


class OperatorMetrics:
    """Rates over the last ``RATE_WINDOW_S`` and, where records leave the flow, latencies (from
    the source's read of a batch to its arrival here). Read from this process's clock: they
    describe the run, they are not state, and nothing the operator emits depends on them."""

    def __init__(self) -> None:
        self._counts: deque[tuple[float, int, int]] = deque()  # (time, records in, records out)
        self._latencies_ms: deque[float] = deque(maxlen=LATENCY_SAMPLES)

    def counted(self, records_in: int, records_out: int) -> None:
        now = time.monotonic()
        if not self._counts or now - self._counts[-1][0] >= 0.5:
            self._counts.append((now, records_in, records_out))
            while self._counts and now - self._counts[0][0] > RATE_WINDOW_S:
                self._counts.popleft()

    def arrived(self, born: float) -> None:
        self._latencies_ms.append(max(0.0, (time.time() - born) * 1e3))

    def summary(self) -> dict[str, float]:
        out = {}
        if len(self._counts) >= 2:
            (t0, in0, out0), (t1, in1, out1) = self._counts[0], self._counts[-1]
            out["records_in_per_s"] = (in1 - in0) / (t1 - t0)
            out["records_out_per_s"] = (out1 - out0) / (t1 - t0)
        if self._latencies_ms:
            ordered = sorted(self._latencies_ms)
            for p in (50, 90, 99):
                out[f"latency_p{p}_ms"] = ordered[min(len(ordered) - 1, len(ordered) * p // 100)]
        return out
