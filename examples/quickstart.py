"""A tour of actorrt on the embedded default cluster: actors on two node processes, calls between
them, an error, a fail-stop node kill and its detection, and a quick ring of actors."""

from __future__ import annotations

import statistics
import time

import actorrt


@actorrt.remote
class Counter:
    def __init__(self, start: int = 0) -> None:
        self.n = start

    def add(self, k: int) -> int:
        self.n += k
        return self.n

    async def relay(self, other: actorrt.ActorHandle, k: int) -> int:
        return await other.add.remote(k)

    def divide(self, d: int) -> float:
        return self.n / d


@actorrt.remote
class Hop:
    """One actor of a ring: passes a token on and times the tokens it started."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.next: actorrt.ActorHandle | None = None
        self.started = 0.0
        self.rounds: list[float] = []

    def link(self, nxt: actorrt.ActorHandle) -> None:
        self.next = nxt

    def start(self) -> None:
        self.started = time.perf_counter()
        self.next.hop.remote(self.index)

    def hop(self, origin: int) -> None:
        if origin != self.index:
            self.next.hop.remote(origin)
            return
        now = time.perf_counter()
        self.rounds.append(now - self.started)
        if len(self.rounds) < 300:
            self.started = now
            self.next.hop.remote(origin)

    def times(self) -> list[float]:
        return self.rounds


def main() -> None:
    info = actorrt.init()
    print(f"cluster up: head {info['address']}, nodes {[n['address'] for n in info['nodes']]}")

    a = Counter.options(node=0).remote(10)
    b = Counter.options(node=1).remote()
    print("a.add(5)            ->", actorrt.get(a.add.remote(5)))
    print("a.relay(b, 2)       ->", actorrt.get(a.relay.remote(b, 2)))
    print("b.add(a.add(1))     ->", actorrt.get(b.add.remote(a.add.remote(1))))
    try:
        actorrt.get(a.divide.remote(0))
    except actorrt.TaskError as exc:
        print("a.divide(0)         -> TaskError:", exc.type_name, "-", exc.remote_message)

    ring = [Hop.remote(i) for i in range(8)]  # spread over the two nodes
    actorrt.get([h.link.remote(ring[(i + 1) % 8]) for i, h in enumerate(ring)])
    actorrt.get([h.start.remote() for h in ring])
    time.sleep(0.2)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rounds = actorrt.get([h.times.remote() for h in ring])
        if all(len(r) >= 300 for r in rounds):
            break
        time.sleep(0.1)
    per_hop = sorted(t / len(ring) * 1e3 for r in rounds for t in r[50:])
    print(f"ring of 8 actors on 2 nodes, 8 tokens at once, lineage stash on: per-hop p50 "
          f"{statistics.median(per_hop):.3f} ms, p99 {per_hop[int(len(per_hop) * 0.99)]:.3f} ms")

    before = actorrt.nodes()[1]
    t0 = time.monotonic()
    actorrt.kill_node(1)
    print(f"killed node 1 (pid {before['pid']}) with SIGKILL; the cluster noticed in {time.monotonic() - t0:.3f} s")
    try:
        actorrt.get(b.add.remote(1), timeout=10)
    except actorrt.ActorDiedError as exc:
        print("b.add(1)            -> ActorDiedError:", exc)
    while actorrt.nodes()[1]["state"] != "ALIVE":
        time.sleep(0.05)
    after = actorrt.nodes()[1]
    print(f"node 1 restarted as pid {after['pid']} (epoch {after['epoch']}); a still answers:",
          actorrt.get(a.add.remote(0)))
    actorrt.shutdown()
    print("done")


if __name__ == "__main__":
    main()
