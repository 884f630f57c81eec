"""A node process: a gRPC server on uvloop hosting many actors; the unit of fail-stop failure.

Run as ``python -m actorrt.cluster.node --head HOST:PORT [--slot N] [--host H]`` with the cluster token in
``ACTORRT_TOKEN``. The node registers with the head, keeps a heartbeat stream to it, and exits when
the head is gone for good.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import time

import click
import uvloop

from actorrt.cluster import leadership, store_lease
from actorrt.cluster.daemon import daemon_setup, node_environment
from actorrt.cluster.head_client import HeadClient
from actorrt.cluster.node_recovery import NodeRecoveries
from actorrt.cluster.node_service import NodeServicer
from actorrt.core import context, values
from actorrt.core.actor_host import ActorHost
from actorrt.core.task_spec import SenderContext
from actorrt.core.worker import Worker
from actorrt.exceptions import ActorRTError, ClusterError
from actorrt.lineage import ids
from actorrt.net.server import start_server
from actorrt.net.tls import TlsFiles
from actorrt.rpc import head_pb2, node_pb2
from actorrt.store.opening import follow_view, store_of_view
from actorrt.util.background import BackgroundTasks

log = logging.getLogger(__name__)


class NodeProcess:
    """The runtime of a node process (what ``actorrt.core.context.current()`` returns there)."""

    def __init__(self, head_address: str, token: str, slot: int, host: str, tls: TlsFiles | None = None) -> None:
        self.head_address = head_address
        self.token = token
        self.requested_slot = slot
        self.bind_host = host
        self.worker = Worker(token, ids.driver_id(), asyncio.get_running_loop(), tls)
        self.worker.host = ActorHost(self.worker)
        self.servicer = NodeServicer(self.worker)
        self.head = HeadClient(head_address, token, tls,
                               leadership.locator(lambda: self.worker.membership.view, self.worker.store_tls))
        self._background = BackgroundTasks("node")
        self._inherited: set[int] = set()  # dead slots whose actors this process rebuilt (or is rebuilding)
        self._moves_seen: set[tuple[bytes, int]] = set()  # (actor, move epoch) of the moves in the views seen
        self.recoveries = NodeRecoveries(self.worker, self.servicer, token, self._background.spawn)

    def get(self, refs, timeout=None):
        return values.get(self.worker, refs, timeout)  # from a method's own thread (core/blocking_calls.py)

    def head_reachable(self) -> None:
        pass  # names are taken in the background here

    def name_actor(self, actor: head_pb2.NamedActor) -> None:
        """Inside an actor task, which cannot block: the name is taken in the background (a replay
        taking it again for the same actor is no conflict); a name taken by another actor is logged."""

        async def take() -> None:
            holder = await self.head.name_actor(actor)
            if holder.actor_id != actor.actor_id:
                log.error("actor %s was created without its name %r: another actor (a %s) has it",
                          ids.short(actor.actor_id), actor.name, holder.class_name)

        self._background.spawn(take())

    def free_actor_names(self, actor_id: bytes) -> None:
        self._background.spawn(self.head.free_actor_names(actor_id))

    def find_actor(self, name: str) -> head_pb2.NamedActor | None:
        raise ActorRTError("an actor cannot wait for the head to look a name up; pass the actor's handle to it")

    def wait(self, refs, num_returns=1, timeout=None):
        return values.wait(self.worker, refs, num_returns, timeout)

    async def run(self) -> None:
        server, address = await start_server(
            self.bind_host, 0, [(self.servicer, node_pb2.DESCRIPTOR.services_by_name["Node"])], self.token,
            self.worker.tls,
        )
        self.worker.bind(address)
        await self.worker.serve_objects(self.bind_host)
        context.set_current(self)
        self._main_task = asyncio.current_task()
        lease = self.worker.lease
        lease.on_revoked = self._revoked
        asked_at = time.monotonic()
        reply = await self.head.register(self.requested_slot, address, os.getpid(), socket.gethostname(),
                                         self.worker.shared.host)
        lease.limit(asked_at, reply.lease_s)
        self.servicer.slot, self.servicer.epoch = reply.slot, reply.epoch
        self.worker.slot, self.worker.epoch = reply.slot, reply.epoch
        self.worker.router.set_incarnation(reply.slot, reply.epoch)
        # A restarted slot rebuilds its actors, and those of the dead slots the view says it inherits.
        self._inherited = self._slots_inherited_in(reply.view)
        self._moves_seen = {(m.actor, m.epoch) for m in reply.view.moved_actors}  # a restart rebuilds those here
        self._background.spawn(self._leases_from_store(reply.lease_s))
        if reply.epoch > 1:  # heartbeats and views go on during the recovery
            self.recoveries.start({reply.slot, *self._inherited}, reply.detection_ms, reply.restart_ms)
        else:
            self.worker.recovered.set()
        self.worker.apply_view(reply.view)
        # Tasks submitted outside any actor task come from the node itself.
        self.worker.submitter.process_context = SenderContext(ids.actor_id(f"node-{reply.slot}".encode(), reply.epoch))
        log.info("node %d (epoch %d) serving on %s", reply.slot, reply.epoch, address)
        try:
            await self._follow_head()
        finally:
            self._background.cancel_all()
            self.worker.host.stop()
            await self.worker.aclose()
            await server.stop(0.5)

    def _slots_inherited_in(self, view: head_pb2.ClusterView) -> set[int]:
        """Dead slots that will not come back whose actors this slot rebuilds and serves."""
        return {n.slot for n in view.nodes if n.HasField("heir") and n.heir == self.servicer.slot}

    async def _follow_head(self) -> None:
        lease = self.worker.lease
        why = await self.head.follow(self._apply_view, self._heartbeat,
                                     on_lease=lambda grant: lease.granted(grant.heartbeat, grant.seconds),
                                     on_deadlock=self.worker.awaits.deadlocked)
        log.error("%s; exiting", why)

    async def _leases_from_store(self, lease_s: float) -> None:
        """While the head's grants do not come (it is down or restarting), renew the lease in the
        store, which grants it unless the head declared this incarnation dead."""
        view = self.worker.membership.view
        store = store_of_view(view, self.worker.store_tls)
        lease, slot, epoch = self.worker.lease, self.servicer.slot, self.servicer.epoch
        try:
            while not lease.revoked:
                await asyncio.sleep(lease_s / 10)
                if lease.remaining() > lease_s / 2:
                    continue  # the head's grants come
                follow_view(store, self.worker.membership.view)
                sent_at = time.monotonic()
                try:
                    granted = await store_lease.renew(store, slot, epoch, lease_s)
                except ClusterError as exc:
                    log.warning("no lease from the store either: %s", exc)
                    continue
                if granted:
                    lease.extend(sent_at, lease_s)
                else:
                    lease.revoke(f"the head declared node {slot} (epoch {epoch}) dead")
        finally:
            await store.aclose()

    def _apply_view(self, view: head_pb2.ClusterView) -> None:
        inherited = self._slots_inherited_in(view) - self._inherited
        if inherited:  # dead slots that will not come back: this process rebuilds their actors
            log.warning("node %d inherits the actors of dead node(s) %s", self.servicer.slot, sorted(inherited))
            self._inherited |= inherited
            self.recoveries.start(inherited)
        promoted = [m for m in view.moved_actors if m.slot == self.servicer.slot
                    and (m.actor, m.epoch) not in self._moves_seen and m.actor not in self.worker.host.actors]
        self._moves_seen.update((m.actor, m.epoch) for m in view.moved_actors)
        if promoted:  # actors whose standby this node keeps: it takes their place
            log.warning("node %d takes the place of actor(s) %s", self.servicer.slot,
                        ", ".join(m.actor.hex()[:8] for m in promoted))
            self.recoveries.promote(promoted)
        self.worker.apply_view(view)
        if not self.worker.membership.incarnation_alive(self.servicer.slot, self.servicer.epoch):
            # Fail-stop: the cluster has declared this incarnation dead and told its callers so;
            # running their tasks any further would contradict that.
            self.worker.lease.revoke(f"the head declared node {self.servicer.slot} (epoch {self.servicer.epoch}) dead")

    def _revoked(self, why: str) -> None:
        """This incarnation was replaced (the view says so, or the store fenced it): it sends,
        writes and runs nothing more, and exits."""
        log.error("%s; exiting", why)
        asyncio.get_running_loop().call_soon(self._main_task.cancel)

    def _heartbeat(self) -> head_pb2.Heartbeat:
        now = asyncio.get_running_loop().time()
        return head_pb2.Heartbeat(slot=self.servicer.slot, epoch=self.servicer.epoch, stats=self.servicer.stats(),
                                  seq=self.worker.lease.heartbeat(), awaits=self.worker.awaits.report(now),
                                  confirmed=self.worker.awaits.confirmations(self.worker.host.yet_to_end, now))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--head", "head_address", required=True, metavar="HOST:PORT", help="The head's address.")
@click.option("--slot", type=int, default=-1, show_default=True, help="Slot to take (-1: a new one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--spare", is_flag=True, help="Wait, everything imported, until the head writes on stdin the slot to "
              "take and the log file to write (a node kept warm for restarts).")
def main(head_address: str, slot: int, host: str, spare: bool) -> None:
    """Run a node process in the foreground, with the cluster token in ACTORRT_TOKEN (and TLS files
    in ACTORRT_TLS_CERT, ACTORRT_TLS_KEY and ACTORRT_TLS_CA, when the cluster uses TLS)."""
    env = node_environment(os.environ)
    if env != dict(os.environ):  # started by other means: again, in the environment a node needs (hash seed, BLAS)
        # The same interpreter flags (``-X``, ``-W``, a coverage wrapper's) and arguments.
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    token, tls = daemon_setup("actorrt.cluster.node")
    if spare:
        line = sys.stdin.readline()
        if not line:
            return  # the head went away, or stopped with this one unused
        slot_text, log_path = line.rstrip("\n").split(" ", 1)
        slot = int(slot_text)
        out = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)

    async def amain() -> None:
        node = NodeProcess(head_address, token, slot, host, tls)
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
        try:
            await node.run()
        except asyncio.CancelledError:
            pass

    uvloop.run(amain())


if __name__ == "__main__":
    main()
