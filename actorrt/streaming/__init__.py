"""Streaming dataflows on exact replay: operators, keyed state, windows, back-pressure.

Built on the public API, as ``actorrt.collective`` is: every operator instance is a long-running
actor (``operator.py``), what it does to a batch is plain logic (``logic.py``), and the plan a
user builds (``dataflow.py``, ``plan.py``) is data. Timers and clocks come from the causal
services (``actorrt.call_every``, ``actorrt.now``), so a replayed operator closes the same windows
at the same points of its input.
"""

from actorrt.streaming.connectors import ListSource, RedisStreamSink, RedisStreamSource, read_stream
from actorrt.streaming.dataflow import Dataflow
from actorrt.streaming.logic import DeadLetter, OperatorStoppedError, RecordError
from actorrt.streaming.plan import EventTime, Fed, Session, Sliding, Tumbling
from actorrt.streaming.process import Context, KeyedProcess
from actorrt.streaming.running import RunningFlow, RunResult
from actorrt.streaming.savepoints import SavepointError
from actorrt.streaming.streams import ConnectedStreams, KeyedStream, Stream

__all__ = ["ConnectedStreams", "Context", "Dataflow", "DeadLetter", "EventTime", "Fed", "KeyedProcess", "KeyedStream",
           "ListSource", "OperatorStoppedError", "RecordError", "RedisStreamSink", "RedisStreamSource", "RunResult",
           "RunningFlow", "SavepointError", "Session", "Sliding", "Stream", "Tumbling", "read_stream"]
