"""The head's web dashboard over real HTTP: its door (the cluster token), its bind, its answers
to bad requests, and its pages in a real browser (headless Chromium driven by Selenium) while a
dataflow runs and a node is killed."""

from __future__ import annotations

import collections
import json
import re
import socket
import threading
import time
import urllib.parse

import pytest
from selenium.webdriver.common.by import By

import actorrt
from actorrt.cluster.head_options import HeadOptions
from actorrt.cluster.launch import start_head
from actorrt.exceptions import ClusterError
from actorrt.streaming import Dataflow, Fed
from tests.support.browser import artifacts_dir, attributes, chromium, text_of, wait_for
from tests.support.http import fetch
from tests.support.listening import LOOPBACK, listening_address

KEYS = 40
STAGES = 'section[data-flow="clicks"] g[data-stage]'
RATE_IN, RATE_OUT = (f'[data-flow="clicks"] [data-metric="records_{d}_per_s"]' for d in ("in", "out"))
DRIVER_ROW = '#lineage tr[data-process^="driver "]'


@pytest.fixture(scope="module")
def dashboard():
    """A three-node cluster serving its dashboard on any free port: (its address, the login link)."""
    link = actorrt.init(num_nodes=3, store_shards=2, dashboard_port=0)["dashboard_url"]
    try:
        yield link.split("?")[0], link
    finally:
        actorrt.shutdown()


def _token(link: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["token"][0]


# ---- the door ---------------------------------------------------------------------------------------

def test_without_the_token_the_dashboard_shows_nothing_but_its_login_page(dashboard):
    base, link = dashboard
    status, headers, body = fetch(base + "api/snapshot")
    assert status == 401 and "log in" in json.loads(body)["error"]
    status, _, body = fetch(base)
    assert status == 401 and b'action="/login"' in body and b"actorrt_dashboard" not in body
    for header in ({"Authorization": "Bearer not-the-token"}, {"Authorization": "Bearer caf\xe9"},
                   {"Cookie": "actorrt_dashboard=caf\xe9"}):  # (bytes that are not UTF-8: refused, no error)
        status, _, body = fetch(base + "api/snapshot", header)
        assert status == 401, header
    status, headers, body = fetch(base + "?token=not-the-token")
    assert status == 401 and b"not this cluster" in body and "Set-Cookie" not in headers
    status, headers, _ = fetch(base + "login", data=b"token=not-the-token")
    assert status == 401 and "Set-Cookie" not in headers


def test_the_token_in_a_link_logs_in_and_leaves_the_address(dashboard):
    base, link = dashboard
    status, headers, _ = fetch(link)
    assert status == 303 and headers["Location"] == "/"
    cookie = headers["Set-Cookie"].split(";")[0]
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Lax" in headers["Set-Cookie"]
    assert "Secure" not in headers["Set-Cookie"]  # plain HTTP on loopback: it would never come back
    assert _token(link) not in cookie  # the cookie holds a digest, not the token
    status, _, body = fetch(base, {"Cookie": cookie})
    assert status == 200 and b'id="page"' in body
    status, headers, _ = fetch(base + "login", data=urllib.parse.urlencode({"token": _token(link)}).encode())
    assert status == 303 and headers["Set-Cookie"].split(";")[0] == cookie
    # The redirect stays on this server, whatever the path looks like.
    for path, kept in (("/api/snapshot?x=1&", "/api/snapshot?x=1"), ("//evil.example/?", "/evil.example/"),
                       ("/%5Cevil.example/?", "/evil.example/")):
        status, headers, _ = fetch(f"{base.rstrip('/')}{path}token={_token(link)}")
        assert status == 303 and headers["Location"] == kept, (path, headers["Location"])


def test_a_script_reads_the_snapshot_with_the_token_as_a_bearer(dashboard):
    base, link = dashboard
    status, headers, body = fetch(base + "api/snapshot", {"Authorization": f"Bearer {_token(link)}"})
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    snapshot = json.loads(body)
    assert [n["slot"] for n in snapshot["cluster"]["nodes"]] == [0, 1, 2]
    assert all(n["state"] == "alive" and n["rss_bytes"] > 0 for n in snapshot["cluster"]["nodes"])
    assert len(snapshot["cluster"]["shards"]) == 2 and all("error" not in s for s in snapshot["cluster"]["shards"])
    assert "default-src 'self'" in headers["Content-Security-Policy"] and headers["X-Frame-Options"] == "DENY"


def test_bad_requests_get_clear_errors_and_the_dashboard_serves_on(dashboard):
    base, link = dashboard
    bearer = {"Authorization": f"Bearer {_token(link)}"}
    status, _, body = fetch(base + "api/actors/not-hex", bearer)
    assert status == 400 and "hexadecimal" in json.loads(body)["error"]
    status, _, body = fetch(base + "api/actors/" + "ab" * 16, bearer)
    assert status == 404 and "no live actor" in json.loads(body)["error"]
    for escape in ("static/%2e%2e/%2e%2e/server.py", "static/..%2f..%2fserver.py", "static/%2e%2e%2f__init__.py"):
        status, _, body = fetch(base + escape, bearer)
        assert status in (403, 404) and b"import" not in body, escape
    status, _, _ = fetch(base + "api/snapshot", bearer)
    assert status == 200


def test_the_page_loads_only_assets_served_from_the_package(dashboard):
    base, link = dashboard
    status, _, body = fetch(base, {"Authorization": f"Bearer {_token(link)}"})
    assets = re.findall(rb'(?:src|href)="([^"#]+)"', body)
    assert assets and all(a.startswith(b"/static/") or a == b"data:," for a in assets), assets
    for asset in (a.decode() for a in assets if a.startswith(b"/static/")):
        status, headers, content = fetch(base + asset.lstrip("/"))
        assert status == 200 and content, asset
        assert headers["Content-Type"].split(";")[0] in ("text/css", "text/javascript", "application/javascript")


def test_the_dashboard_binds_loopback_unless_asked(dashboard):
    base, _ = dashboard
    assert urllib.parse.urlsplit(base).hostname == "127.0.0.1"
    assert listening_address(urllib.parse.urlsplit(base).port) == LOOPBACK


def test_a_dashboard_port_already_taken_stops_the_head_saying_so(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ClusterError, match=f"the dashboard cannot serve on 127.0.0.1:{port}: .*in use"):
            start_head(tmp_path, HeadOptions(nodes=1, store_shards=1, dashboard_port=port))


# ---- in a browser ---------------------------------------------------------------------------------

def _feed(running, stop: threading.Event, fed: list[int]) -> None:
    while not stop.is_set():
        batch = list(range(len(fed), len(fed) + 100))
        running.feed(batch)
        fed.extend(batch)
        time.sleep(0.02)


def _number(chrome, selector: str) -> float | None:
    text = (text_of(chrome, selector) or "").strip().replace(",", "")
    return None if text in ("", "–") else float(text.split()[0])


def _shot(chrome, name: str) -> None:
    chrome.save_screenshot(str(artifacts_dir() / f"{name}.png"))


def test_the_pages_show_the_nodes_a_flow_s_rates_and_a_recovery_phase_by_phase(dashboard):
    base, link = dashboard
    flow = Dataflow("clicks", batch_size=20, max_in_flight=8)
    (flow.source(Fed()).map(lambda n: (n % KEYS, 1), parallelism=2)
     .key_by(lambda kv: kv[0]).fold(lambda: 0, lambda total, kv: total + kv[1], parallelism=2).collect())
    running = flow.start(timeout=240)
    stop, fed = threading.Event(), []
    feeder = threading.Thread(target=_feed, args=(running, stop, fed))
    try:
        with chromium() as chrome:
            chrome.get(base + "?token=not-the-token")
            assert "not this cluster" in text_of(chrome, "#login-error")
            chrome.find_element(By.NAME, "token").send_keys(_token(link))
            chrome.find_element(By.CSS_SELECTOR, "#login button").click()
            # Cluster: the three nodes, alive, with their CPU and memory.
            wait_for(chrome, lambda c: len(c.find_elements(By.CSS_SELECTOR, '#nodes tr[data-state="alive"]')) == 3,
                     what="three live nodes on the cluster page")
            assert "token" not in chrome.current_url
            assert text_of(chrome, '#nodes tr[data-slot="1"] td:nth-child(8)').endswith("MiB")
            _shot(chrome, "cluster")

            # Flows: the graph of the flow's stages, then its rates rising once records come.
            chrome.get(base + "#/flows")
            wait_for(chrome, lambda c: len(c.find_elements(By.CSS_SELECTOR, STAGES)) == 3, what="the flow's stages")
            assert not _number(chrome, RATE_IN) and not _number(chrome, RATE_OUT)
            feeder.start()  # the page, never reloaded, shows the rates rise from nothing
            wait_for(chrome, lambda c: (_number(c, RATE_IN) or 0) > 100 and (_number(c, RATE_OUT) or 0) > 100,
                     what="records entering and leaving the flow")
            assert _number(chrome, '[data-flow="clicks"] [data-metric="latency_p99_ms"]') is not None
            _shot(chrome, "flows")

            # Recoveries: kill a node that runs the flow's operators, and watch it come back.
            chrome.get(base + "#/recoveries")
            wait_for(chrome, lambda c: c.find_elements(By.CSS_SELECTOR, "#recoveries .empty"), what="no failure yet")
            actorrt.kill_node(1)
            section = '#recoveries section[data-failure][data-done="true"]'
            wait_for(chrome, lambda c: c.find_elements(By.CSS_SELECTOR, section), timeout=60, what="a recovered node")
            phases = attributes(chrome, f"{section} .phase", "data-phase")
            assert phases[:2] == ["detection", "restart"] and phases[-1] == "replay", phases
            assert "reading lineage" in phases
            assert _number(chrome, f'{section} [data-fact="tasks-replayed"]') > 0
            assert "node 1 (epoch 1) failed" in text_of(chrome, section)
            assert "flows touched: clicks" in text_of(chrome, section)
            wait_for(chrome, lambda c: c.find_elements(By.CSS_SELECTOR, f"{section} .uplot"), what="its latency chart")
            time.sleep(3)  # a few more points after the recovery on its chart
            _shot(chrome, "recoveries")

            # Back on the cluster page: node 1 is alive again, in its second incarnation.
            chrome.get(base + "#/cluster")
            wait_for(chrome, lambda c: attributes(c, '#nodes tr[data-slot="1"]', "data-state") == ["alive"]
                     and text_of(c, '#nodes tr[data-slot="1"] td:nth-child(3)') == "2", what="node 1 back in epoch 2")

            # Actors: search for the fold's instances, open one, see its node's last recovery.
            chrome.get(base + "#/actors")
            wait_for(chrome, lambda c: len(c.find_elements(By.CSS_SELECTOR, "#actors tr[data-actor]")) >= 5)
            chrome.find_element(By.ID, "actor-search").send_keys("fold")
            wait_for(chrome, lambda c: len(c.find_elements(By.CSS_SELECTOR, "#actors tr[data-actor]")) == 2,
                     what="the fold's two instances")
            _shot(chrome, "actors")
            chrome.find_element(By.CSS_SELECTOR, "#actors tr[data-actor]").click()
            wait_for(chrome, lambda c: c.find_elements(By.CSS_SELECTOR, "#actor-detail .card"), what="the actor's page")
            assert "Operator" in text_of(chrome, "#actor-detail")

            # Lineage store: every live node's stash and flushes, and this driver's, which fed the flow.
            chrome.get(base + "#/lineage")
            wait_for(chrome, lambda c: attributes(c, "#lineage tr[data-process]", "data-process")[:3] == ["0", "1", "2"]
                     and len(c.find_elements(By.CSS_SELECTOR, DRIVER_ROW)) == 1, what="three nodes and this driver")
            assert _number(chrome, f"{DRIVER_ROW} td:nth-child(4)") > 0  # the spec versions it flushed
            assert _number(chrome, '[data-fact="bytes-per-task"]') > 0
            _shot(chrome, "lineage")
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join()
    result = running.finish(timeout=120)
    final = {}
    for key, total in result.outputs:
        final[key] = total
    assert final == collections.Counter(n % KEYS for n in fed)  # exactly once, through the kill
