"""Distributed SGD with actorrt.collective: data-parallel training of a numpy model.

Each worker holds one shard of a seeded synthetic dataset and a copy of the model's parameters
(one flat float64 vector). An iteration is one task per worker: the gradient of its shard, summed
over the workers with ``collective.allreduce``, then the same update everywhere. Workers
checkpoint every ``--checkpoint-every`` iterations. ``--kill`` SIGKILLs node 1 mid-run: its workers
are replayed from their checkpoints, fetching the sums they took part in from the survivors, and
the final weights are bit-identical to a failure-free run's and to a single-process numpy run over
the same shards (summing the shards' gradients in rank order).

    python examples/sgd.py [--model logreg|mlp|mlp:<hidden>] [--workers 4] [--iterations 60] [--kill]
        [--checkpoint-every 10] [--ft lineage_stash|checkpoint|none]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

# The workers' numpy runs one BLAS thread (node processes default to it); so must the single-process
# reference here: a matrix product on several threads sums in another order, and its bits differ.
for _threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import numpy as np  # noqa: E402 - after the thread counts, which BLAS reads when it loads

import actorrt  # noqa: E402
from actorrt import collective  # noqa: E402

SAMPLES, FEATURES, HIDDEN = 8_000, 64, 32


def dataset(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features and 0/1 labels of a noisy linear rule, the same for a seed in every process."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SAMPLES, FEATURES))
    truth = rng.standard_normal(FEATURES)
    y = (x @ truth + 0.5 * rng.standard_normal(SAMPLES) > 0).astype(np.float64)
    return x, y


def shard(rank: int, workers: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    x, y = dataset(seed)
    rows = np.array_split(np.arange(SAMPLES), workers)[rank]
    return x[rows], y[rows]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class LogisticRegression:
    size = FEATURES + 1

    def init(self, seed: int) -> np.ndarray:
        return np.zeros(self.size)

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        return _sigmoid(x @ params[:-1] + params[-1])

    def gradient(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The gradient of the log loss summed over the rows of ``x``."""
        err = self.predict(params, x) - y
        return np.concatenate([x.T @ err, [err.sum()]])


class MLP:
    """One hidden tanh layer, a sigmoid output: parameters W1, b1, w2, b2 in one vector."""

    def __init__(self, hidden: int = HIDDEN) -> None:
        self.hidden = hidden

    def init(self, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed + 1)
        w1 = rng.standard_normal((FEATURES, self.hidden)) / np.sqrt(FEATURES)
        w2 = rng.standard_normal(self.hidden) / np.sqrt(self.hidden)
        return np.concatenate([w1.ravel(), np.zeros(self.hidden), w2, [0.0]])

    def _unpack(self, params: np.ndarray) -> tuple[np.ndarray, ...]:
        h = self.hidden
        return params[:FEATURES * h].reshape(FEATURES, h), params[FEATURES * h:FEATURES * h + h], \
            params[FEATURES * h + h:-1], params[-1]

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        w1, b1, w2, b2 = self._unpack(params)
        return _sigmoid(np.tanh(x @ w1 + b1) @ w2 + b2)

    def gradient(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        w1, b1, w2, b2 = self._unpack(params)
        hidden = np.tanh(x @ w1 + b1)
        err = _sigmoid(hidden @ w2 + b2) - y
        back = np.outer(err, w2) * (1.0 - hidden**2)
        return np.concatenate([(x.T @ back).ravel(), back.sum(axis=0), hidden.T @ err, [err.sum()]])


def model_of(name: str) -> LogisticRegression | MLP:
    """``logreg``, ``mlp`` or ``mlp:<hidden units>``."""
    kind, _, hidden = name.partition(":")
    if kind == "logreg" and not hidden:
        return LogisticRegression()
    if kind == "mlp":
        return MLP(int(hidden) if hidden else HIDDEN)
    raise ValueError(f"unknown model {name!r}: logreg, mlp or mlp:<hidden units>")


def step(params: np.ndarray, gradient_sum: np.ndarray, lr: float) -> np.ndarray:
    """One update from the gradients summed over all shards (their mean over every sample)."""
    return params - lr * (gradient_sum / SAMPLES)


@actorrt.remote
class Trainer:
    def __init__(self, model: str, rank: int, workers: int, lr: float, seed: int = 0) -> None:
        self.setup = (model, rank, workers, lr, seed)
        self.model, self.lr = model_of(model), lr
        self.x, self.y = shard(rank, workers, seed)
        self.params = self.model.init(seed)

    def checkpoint(self) -> tuple:
        """What a checkpoint keeps: the weights, not the shard (it is read again on restore)."""
        return self.setup, self.params

    def restore(self, state: tuple) -> None:
        setup, params = state
        self.__init__(*setup)
        self.params = params

    async def iterate(self, iteration: int) -> int:
        grad = self.model.gradient(self.params, self.x, self.y)
        self.params = step(self.params, await collective.allreduce(grad), self.lr)
        return iteration

    def weights(self) -> np.ndarray:
        return self.params


def create_trainers(model: str, workers: int, lr: float, checkpoint_every: int | None = None,
                    nodes: int = 2, seed: int = 0) -> list:
    """``workers`` trainers (trainer r on node r % nodes) in a collective group; each checkpoints
    itself every ``checkpoint_every`` iterations (lineage stash: no global barrier)."""
    trainers = [Trainer.options(node=r % nodes, checkpoint_every=checkpoint_every).remote(model, r, workers, lr, seed)
                for r in range(workers)]
    collective.create_collective_group(trainers)
    return trainers


def train(trainers: list, iterations: int, on_iteration: Callable[[int], None] | None = None,
          global_checkpoint_every: int | None = None, timeout: float = 120.0) -> list[np.ndarray]:
    """Run ``iterations`` iterations; every trainer's final weights. With
    ``global_checkpoint_every`` (the global-rollback baseline), the driver checkpoints all trainers
    together that often and, after a rollback, goes on from the last of those checkpoints."""
    checkpointed, iteration, seen = 0, 0, actorrt.rollbacks()
    while iteration < iterations:
        try:
            if global_checkpoint_every and iteration % global_checkpoint_every == 0:
                actorrt.checkpoint(trainers, timeout=timeout)
                _check(seen)  # a checkpoint of trainers rolled back meanwhile is not this iteration's
                checkpointed = iteration
            refs = [t.iterate.remote(iteration) for t in trainers]
            if on_iteration is not None:
                on_iteration(iteration)
            actorrt.get(refs, timeout=timeout)
            _check(seen)  # tasks sent after a rollback ran on restored trainers, without an error
        except actorrt.RolledBackError:
            iteration, seen = checkpointed, actorrt.rollbacks()
            continue
        iteration += 1
    return actorrt.get([t.weights.remote() for t in trainers], timeout=timeout)


def _check(seen: int) -> None:
    if actorrt.rollbacks() != seen:
        raise actorrt.RolledBackError("the cluster rolled back to its last global checkpoint")


def reference(model: str, workers: int, iterations: int, lr: float, seed: int = 0) -> np.ndarray:
    """The same training in one process (an independent oracle): each shard's gradient, summed in
    rank order, the same update."""
    m = model_of(model)
    shards = [shard(r, workers, seed) for r in range(workers)]
    params = m.init(seed)
    for _ in range(iterations):
        grads = [m.gradient(params, x, y) for x, y in shards]
        total = grads[0]
        for g in grads[1:]:
            total = total + g
        params = step(params, total, lr)
    return params


def evaluate(model: str, params: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """(log loss, accuracy) over the whole dataset."""
    x, y = dataset(seed)
    p = np.clip(model_of(model).predict(params, x), 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))), float(np.mean((p > 0.5) == (y > 0.5)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="logreg", help="logreg, mlp or mlp:<hidden units>")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--kill", action="store_true", help="SIGKILL node 1 in the middle of the run")
    parser.add_argument("--ft", default="lineage_stash", help="lineage_stash, write_first, checkpoint or none")
    args = parser.parse_args()
    actorrt.init(num_nodes=2, ft=args.ft)
    rollback = args.ft == "checkpoint"
    trainers = create_trainers(args.model, args.workers, args.lr, None if rollback else args.checkpoint_every)
    pending_kill = [args.iterations // 2 + 3] if args.kill else []

    def kill_once(iteration: int) -> None:
        if pending_kill and iteration == pending_kill[0]:
            pending_kill.clear()
            actorrt.kill_node(1)

    started = time.perf_counter()
    weights = train(trainers, args.iterations, kill_once, args.checkpoint_every if rollback else None)
    elapsed = time.perf_counter() - started
    expected = reference(args.model, args.workers, args.iterations, args.lr)
    start_loss, _ = evaluate(args.model, model_of(args.model).init(0))
    loss, accuracy = evaluate(args.model, weights[0])
    print(f"{args.model}: {args.iterations} iterations in {elapsed:.2f} s; loss {start_loss:.3f} -> {loss:.3f}, "
          f"accuracy {accuracy:.3f}")
    print(f"bit-identical to single-process numpy: {all(w.tobytes() == expected.tobytes() for w in weights)}")
    for node in actorrt.stats()["nodes"]:
        for recovery in node["recoveries"]:
            print(f"node {node['node']} recovered: actors {recovery['actors']}, from checkpoint "
                  f"{recovery['from_checkpoint']}, tasks replayed {recovery['tasks_replayed']}")
    actorrt.shutdown()


if __name__ == "__main__":
    main()
