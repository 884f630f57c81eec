// The actorrt dashboard: one page per hash route, fed by the head's server-sent events (one
// snapshot of every page a second). Each page mounts its skeleton once, then updates its tables
// and charts in place, so a search box keeps its text and charts do not flicker.
"use strict";

const COLORS = ["#0969da", "#1a7f37", "#cf222e", "#8250df", "#bc4c00", "#9a6700", "#1b7c83", "#bf3989"];
const PHASES = ["detection", "rollback round", "restart", "survivors' flush", "reading lineage", "replay"];
const PHASE_COLORS = ["#cf222e", "#8250df", "#bc4c00", "#9a6700", "#0969da", "#1a7f37"];

let snap = null;        // the newest snapshot
let current = null;     // the page shown: {name, arg, timer}
const charts = new Map();

// ---- formatting ---------------------------------------------------------------------------------

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function num(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number(value).toLocaleString("en-US", {maximumFractionDigits: digits, minimumFractionDigits: digits});
}
function bytes(value) {
  if (value === null || value === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (value >= 1024 && i < units.length - 1) { value /= 1024; i++; }
  return `${num(value, i ? 1 : 0)} ${units[i]}`;
}
function ms(value) {
  if (value === null || value === undefined) return "–";
  return value >= 1000 ? `${num(value / 1000, 2)} s` : `${num(value, value < 10 ? 1 : 0)} ms`;
}
function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString("en-GB");
}
function fact(label, value, attrs = "") {
  return `<div><span>${esc(label)}</span><b ${attrs}>${value}</b></div>`;
}
function $(selector, root = document) { return root.querySelector(selector); }

// ---- charts (uPlot) -------------------------------------------------------------------------------

// Draw (or update in place) a chart of `columns` ({t: [...], name: [...]}) for `names` into the
// element with id `id`; `band` ([from, to] seconds) shades a span, e.g. a recovery.
function chart(id, title, columns, names, {band = null, unit = ""} = {}) {
  const el = document.getElementById(id);
  if (!el) return;
  const t = columns.t || [];
  const data = [t, ...names.map(n => columns[n] || t.map(() => null))];
  const key = names.join("|") + (band ? band.join(",") : "");
  const existing = charts.get(id);
  if (existing && existing.root.isConnected && existing.actorrtKey === key) {
    existing.setData(data);
    return;
  }
  if (existing) existing.destroy();
  el.innerHTML = `<h4>${esc(title)}</h4>`;
  const hooks = band ? {drawClear: [u => {
    const x0 = u.valToPos(band[0], "x", true), x1 = u.valToPos(band[1], "x", true);
    u.ctx.save();
    u.ctx.fillStyle = "rgba(207, 34, 46, 0.10)";
    u.ctx.fillRect(x0, u.bbox.top, Math.max(2, x1 - x0), u.bbox.height);
    u.ctx.restore();
  }]} : {};
  const plot = new uPlot({
    width: Math.max(300, el.clientWidth - 8), height: 170, hooks,
    series: [{}, ...names.map((n, i) => ({label: n, stroke: COLORS[i % COLORS.length], width: 1.5,
                                          value: (u, v) => v === null ? "–" : num(v, v < 10 ? 2 : 0) + unit}))],
    axes: [{}, {size: 60, values: (u, vals) => vals.map(v => num(v, v < 10 ? 1 : 0) + unit)}],
    scales: {x: band ? {min: Math.min(band[0], t[0] ?? band[0]), max: Math.max(band[1], t[t.length - 1] ?? band[1])} : {}},
    legend: {live: false},
  }, data, el);
  plot.actorrtKey = key;
  charts.set(id, plot);
}

// ---- pages ----------------------------------------------------------------------------------------

const pages = {
  cluster: {
    mount() {
      return `<div class="card"><div class="facts" id="cluster-facts"></div></div>
        <h2>Nodes</h2><table id="nodes"><thead><tr><th>slot</th><th>state</th><th class="num">epoch</th>
          <th>address</th><th class="num">pid</th><th>host</th><th class="num">CPU</th><th class="num">memory</th>
          <th class="num">heartbeat</th><th class="num">actors</th><th>last failure</th></tr></thead><tbody></tbody></table>
        <div class="charts"><div class="chart card" id="chart-cpu"></div><div class="chart card" id="chart-rss"></div></div>
        <h2>Lineage store shards</h2><table id="shards"><thead><tr><th>address</th><th class="num">pid</th>
          <th class="num">memory</th><th class="num">keys</th><th class="num">ops/s</th><th class="num">writes KiB/s</th>
          <th>replicas</th><th class="num">replication lag</th><th class="num">restarts</th><th class="num">failovers</th>
          <th></th></tr></thead><tbody></tbody></table>`;
    },
    update(s) {
      const c = s.cluster;
      $("#cluster-facts").innerHTML = fact("fault tolerance", esc(c.mode), 'data-fact="mode"')
        + fact("nodes alive", `${c.nodes.filter(n => n.state === "alive").length} / ${c.nodes.length}`, 'data-fact="alive"')
        + fact("drivers", c.drivers) + fact("global rollbacks", c.rollbacks)
        + fact("head CPU", `${num(s.head.cpu_percent, 1)} %`, 'data-fact="head-cpu"') + fact("head memory", bytes(s.head.rss_bytes));
      $("#nodes tbody").innerHTML = c.nodes.map(n => `<tr data-slot="${n.slot}" data-state="${esc(n.state)}">
        <td>${n.slot}</td><td class="state-${esc(n.state)}">${esc(n.state)}${n.managed ? "" : ' <span class="muted">(added)</span>'}</td>
        <td class="num">${n.epoch}</td><td>${esc(n.address)}</td><td class="num">${n.pid || "–"}</td><td>${esc(n.hostname)}</td>
        <td class="num">${n.cpu_percent === null ? "–" : num(n.cpu_percent, 1) + " %"}</td><td class="num">${bytes(n.rss_bytes)}</td>
        <td class="num">${n.heartbeat_age_s === null || n.heartbeat_age_s === undefined ? "–" : num(n.heartbeat_age_s, 1) + " s ago"}</td>
        <td class="num">${n.actors}</td><td class="muted">${esc(n.last_failure)}</td></tr>`).join("");
      const slots = c.nodes.map(n => n.slot);
      chart("chart-cpu", "CPU per node (% of a core)", c.series, slots.map(x => `cpu ${x}`), {unit: "%"});
      chart("chart-rss", "Memory per node (MiB)", c.series, slots.map(x => `rss ${x}`));
      $("#shards tbody").innerHTML = c.shards.map(h => `<tr data-shard="${esc(h.address)}">
        <td>${esc(h.address)}</td><td class="num">${h.pid || "–"}</td><td class="num">${bytes(h.used_memory_bytes)}</td>
        <td class="num">${num(h.keys)}</td><td class="num">${num(h.ops_per_s)}</td><td class="num">${num(h.write_kb_per_s, 1)}</td>
        <td>${esc(h.replicas.join(", ")) || '<span class="muted">none</span>'}</td>
        <td class="num">${h.replication_lag_bytes === null || h.replication_lag_bytes === undefined ? "–" : bytes(h.replication_lag_bytes)}</td>
        <td class="num">${h.restarts}</td><td class="num">${h.failovers}</td><td class="error">${esc(h.error || "")}</td></tr>`).join("")
        || `<tr><td colspan="11" class="muted">${c.external_store ? "an external store: its operators watch it" : "no shards"}</td></tr>`;
    },
  },

  actors: {
    mount() {
      return `<input type="search" id="actor-search" placeholder="search class, name, label, node or ID">
        <table id="actors"><thead><tr><th>actor</th><th>class</th><th>name / label</th><th class="num">node</th>
          <th>state</th><th class="num">queued</th><th class="num">executed</th><th class="num">restarts</th></tr></thead>
          <tbody></tbody></table>`;
    },
    bind() {
      $("#actor-search").addEventListener("input", () => snap && this.update(snap));
      $("#actors tbody").addEventListener("click", e => {
        const row = e.target.closest("tr[data-actor]");
        if (row) location.hash = `#/actors/${row.dataset.actor}`;
      });
    },
    update(s) {
      const query = $("#actor-search").value.trim().toLowerCase();
      const shown = s.actors.filter(a => !query || [a.id, a.class_name, a.name, a.label, `node ${a.slot}`, String(a.slot)]
        .some(v => String(v).toLowerCase().includes(query)));
      $("#actors tbody").innerHTML = shown.map(a => `<tr class="link" data-actor="${a.id}">
        <td><code>${a.id.slice(0, 12)}</code></td><td>${esc(a.class_name)}</td><td>${esc(a.name || a.label)}</td>
        <td class="num">${a.slot}</td><td class="state-${a.state}">${a.state}</td><td class="num">${num(a.queued)}</td>
        <td class="num">${num(a.executed)}</td><td class="num">${a.restarts}</td></tr>`).join("")
        || `<tr><td colspan="8" class="empty">${s.actors.length ? "no actor matches" : "no actors yet"}</td></tr>`;
    },
  },

  actor: {
    mount(id) {
      return `<p><a href="#/actors">← all actors</a></p><div id="actor-detail" data-actor="${esc(id)}" class="empty">loading…</div>`;
    },
    bind(id) {
      const load = async () => {
        const el = $("#actor-detail");
        if (!el || el.dataset.actor !== id) return;
        const response = await fetch(`/api/actors/${encodeURIComponent(id)}`);
        const a = await response.json();
        if (!response.ok) { el.innerHTML = `<p class="error">${esc(a.error)}</p>`; return; }
        el.className = "";
        el.innerHTML = `<div class="card"><h2>${esc(a.name || a.label || a.class_name)}</h2><div class="facts">
            ${fact("class", esc(a.class_name))}${fact("node", a.slot)}${fact("epoch", a.epoch)}${fact("state", a.state)}
            ${fact("queued", num(a.queued))}${fact("executed", num(a.executed))}${fact("restarts", a.restarts)}
            ${fact("results kept", bytes(a.results_kept_bytes))}</div><p class="muted">ID <code>${esc(a.id)}</code></p></div>
          <h3>Metrics it publishes</h3>${Object.keys(a.metrics).length ? `<table id="actor-metrics"><tbody>${Object.entries(a.metrics)
            .map(([k, v]) => `<tr><td>${esc(k)}</td><td class="num">${num(v, 2)}</td></tr>`).join("")}</tbody></table>`
            : '<p class="empty">none (define <code>__actorrt_metrics__</code>)</p>'}
          <h3>Checkpoints</h3>${a.checkpoints.length ? `<table id="actor-checkpoints"><thead><tr><th class="num">number</th>
            <th class="num">written by node</th><th class="num">size</th><th>written</th></tr></thead><tbody>${a.checkpoints
            .map(c => `<tr><td class="num">${c.seq}</td><td class="num">${c.slot}</td><td class="num">${bytes(c.bytes)}</td>
              <td>${clock(c.written)}</td></tr>`).join("")}</tbody></table>` : '<p class="empty">none taken</p>'}
          <h3>Last recovery of its node</h3>${a.last_recovery ? recoveryCard(a.last_recovery, false) : '<p class="empty">none</p>'}`;
      };
      load();
      current.timer = setInterval(load, 2000);
    },
    update() {},
  },

  flows: {
    mount() { return `<div id="flows"></div>`; },
    update(s) {
      const root = $("#flows");
      if (!laidOut(root, s.flows.map(f => f.name).join("|"), "No dataflow is running.")) {
        root.innerHTML = s.flows.map((f, i) => `<section class="card" data-flow="${esc(f.name)}">
          <h2>${esc(f.name)}</h2><div class="facts" data-summary></div><div data-graph></div>
          <div class="charts"><div class="chart" id="flow-rates-${i}"></div><div class="chart" id="flow-latency-${i}"></div></div>
          </section>`).join("");
      }
      s.flows.forEach((f, i) => {
        const section = root.querySelector(`section[data-flow="${CSS.escape(f.name)}"]`);
        section.querySelector("[data-summary]").innerHTML =
          fact("records in / s", num(f.records_in_per_s), 'data-metric="records_in_per_s"')
          + fact("records out / s", num(f.records_out_per_s), 'data-metric="records_out_per_s"')
          + fact("backlog (batches)", num(f.backlog_batches), 'data-metric="backlog_batches"')
          + fact("latency p50", ms(f.latency_p50_ms), 'data-metric="latency_p50_ms"')
          + fact("latency p99", ms(f.latency_p99_ms), 'data-metric="latency_p99_ms"');
        section.querySelector("[data-graph]").innerHTML = flowGraph(f);
        chart(`flow-rates-${i}`, "Records per second", f.series, ["records_in_per_s", "records_out_per_s"]);
        chart(`flow-latency-${i}`, "Latency where records leave the flow (ms)", f.series,
              ["latency_p50_ms", "latency_p90_ms", "latency_p99_ms"]);
      });
    },
  },

  recoveries: {
    mount() { return `<div id="recoveries"></div>`; },
    update(s) {
      const root = $("#recoveries");
      const ids = s.recoveries.map(r => `${r.id}:${Object.keys(r.latency).join(",")}`).join("|");
      if (!laidOut(root, ids, "No node has failed since the head started.")) {
        root.innerHTML = s.recoveries.map(r => recoveryCard(r, true)).join("");
      }
      for (const r of s.recoveries) {
        const section = root.querySelector(`section[data-failure="${r.id}"]`);
        section.dataset.done = r.done;
        section.querySelector("[data-body]").innerHTML = recoveryBody(r);
        const band = [r.at, r.at + r.total_ms / 1000];
        Object.entries(r.latency).forEach(([flow, columns], j) => {
          chart(`recovery-${r.id}-${j}`, `${flow}: latency p99 (ms) around the failure`, columns, ["latency_p99_ms"], {band});
        });
      }
    },
  },

  lineage: {
    mount() {
      return `<div class="card"><div class="facts" id="lineage-facts"></div></div>
        <table id="lineage"><thead><tr><th>process</th><th class="num">epoch</th><th class="num">uncommitted (stash)</th>
          <th class="num">flushed</th><th class="num">committed</th><th class="num">flush latency p50</th>
          <th class="num">mean</th><th class="num">bytes per task</th><th class="num">specs per write</th>
          <th class="num">lineage forwarded / task</th><th class="num">refused</th></tr></thead><tbody></tbody></table>
        <div class="charts"><div class="chart card" id="chart-stash"></div><div class="chart card" id="chart-flush"></div>
          <div class="chart card" id="chart-bytes"></div></div>`;
    },
    update(s) {
      const l = s.lineage;
      const total = l.processes.reduce((a, p) => a + p.bytes_written, 0), flushed = l.processes.reduce((a, p) => a + p.flushed, 0);
      $("#lineage-facts").innerHTML = fact("mode", esc(l.mode)) + fact("uncommitted specs", num(l.processes.reduce((a, p) => a + p.stash_size, 0)))
        + fact("bytes per task", flushed ? num(total / flushed) : "–", 'data-fact="bytes-per-task"') + fact("written", bytes(total));
      $("#lineage tbody").innerHTML = l.processes.map(p => `<tr data-process="${esc(p.key)}"><td>${esc(p.process)}</td>
        <td class="num">${p.epoch ?? "–"}</td><td class="num">${num(p.stash_size)}</td><td class="num">${num(p.flushed)}</td>
        <td class="num">${num(p.committed)}</td><td class="num">${ms(p.store_latency_ms_p50)}</td><td class="num">${ms(p.store_latency_ms_mean)}</td>
        <td class="num">${num(p.bytes_per_task)}</td><td class="num">${num(p.specs_per_write, 1)}</td>
        <td class="num">${num(p.forwarded_mean, 2)}</td><td class="num">${num(p.refused)}</td></tr>`).join("")
        || `<tr><td colspan="11" class="empty">${l.mode === "lineage_stash" || l.mode === "write_first" ? "no process reports yet" : `ft="${esc(l.mode)}" logs no lineage`}</td></tr>`;
      const keys = l.processes.map(p => p.key);
      chart("chart-stash", "Uncommitted lineage per process (specs in the stash)", l.series, keys.map(x => `stash ${x}`));
      chart("chart-flush", "Flush latency p50 (ms)", l.series, keys.map(x => `latency ${x}`));
      chart("chart-bytes", "Lineage bytes per task", l.series, keys.map(x => `bytes/task ${x}`));
    },
  },
};

// Whether `root` is laid out for the items `key` names: if not, and there are none, it says
// `empty`; a caller lays out the items when this is false and `key` is not empty.
function laidOut(root, key, empty) {
  if (root.dataset.key === key) return true;
  root.dataset.key = key;
  if (!key) root.innerHTML = `<p class="empty">${esc(empty)}</p>`;
  return !key;
}

// A flow's stages as a graph: a column per depth (a stage after its inputs), edges from inputs.
function flowGraph(f) {
  const byKey = new Map(f.stages.map(s => [s.key, s]));
  const depth = new Map();
  const depthOf = s => {
    if (!depth.has(s.key)) {
      depth.set(s.key, 0);
      depth.set(s.key, s.inputs.length ? 1 + Math.max(...s.inputs.map(k => byKey.has(k) ? depthOf(byKey.get(k)) : 0)) : 0);
    }
    return depth.get(s.key);
  };
  const columns = [];
  for (const s of f.stages) (columns[depthOf(s)] ||= []).push(s);
  const W = 210, H = 66, GX = 60, GY = 16, pos = new Map();
  columns.forEach((col, x) => col.forEach((s, y) => pos.set(s.key, {x: 10 + x * (W + GX), y: 10 + y * (H + GY)})));
  const height = 20 + Math.max(1, ...columns.map(c => (c ? c.length : 0))) * (H + GY);
  const edges = f.stages.flatMap(s => s.inputs.filter(k => pos.has(k)).map(k => {
    const a = pos.get(k), b = pos.get(s.key);
    const x0 = a.x + W, y0 = a.y + H / 2, x1 = b.x, y1 = b.y + H / 2, mx = (x0 + x1) / 2;
    return `<path d="M${x0},${y0} C${mx},${y0} ${mx},${y1} ${x1},${y1}"/>`;
  }));
  const boxes = f.stages.map(s => {
    const p = pos.get(s.key);
    const latency = s.latency_p99_ms === null ? "" : ` · p99 ${ms(s.latency_p99_ms)}`;
    return `<g data-stage="${esc(s.key)}" transform="translate(${p.x},${p.y})"><rect width="${W}" height="${H}"/>
      <text x="10" y="18"><tspan font-weight="600">${esc(s.name)}</tspan> ×${s.parallelism}</text>
      <text x="10" y="36" class="small" data-rate>${num(s.records_in_per_s)} in/s · ${num(s.records_out_per_s)} out/s</text>
      <text x="10" y="53" class="small">nodes ${esc(s.slots.join(","))} · backlog ${num(s.backlog_batches)}${latency}</text></g>`;
  });
  const width = 20 + columns.length * (W + GX);
  return `<svg class="graph" viewBox="0 0 ${width} ${height}" style="max-width:${width}px">${edges.join("")}${boxes.join("")}</svg>`;
}

function timeline(r) {
  const total = Math.max(r.total_ms, 1);
  return r.phases.map(p => `<div class="phase" data-phase="${esc(p.name)}" title="${esc(p.name)}: ${ms(p.ms)}"
      style="flex: ${Math.max(p.ms / total, 0.004)} 0 0">${p.ms / total > 0.12 ? esc(p.name) : ""}</div>`).join("");
}

// A failure's card: its body (redrawn at every update) and, on the recoveries page, its charts.
function recoveryCard(r, withCharts) {
  const charts = withCharts ? `<div class="charts">${Object.keys(r.latency).map((_, j) => `<div class="chart" id="recovery-${r.id}-${j}"></div>`).join("")}</div>` : "";
  return `<section class="card" data-failure="${r.id}" data-done="${r.done}"><div data-body>${recoveryBody(r)}</div>${charts}</section>`;
}

function recoveryBody(r) {
  const legend = r.phases.map(p => `<span data-phase-ms="${esc(p.name)}"><i style="background:${PHASE_COLORS[PHASES.indexOf(p.name)]}"></i>${esc(p.name)} ${ms(p.ms)}</span>`).join("");
  const what = r.with_slot === null ? `node ${r.slot} (epoch ${r.epoch}) failed` : `node ${r.slot} (epoch ${r.epoch}) went back with node ${r.with_slot}`;
  return `<h3>${what} at ${clock(r.at)} <span class="badge ${r.done ? "done" : "running"}">${r.done ? "recovered" : "recovering"}</span></h3>
    <p class="muted">${esc(r.reason)}${r.flows.length ? ` · flows touched: ${esc(r.flows.join(", "))}` : ""}</p>
    <div class="timeline" data-timeline>${timeline(r)}</div><div class="legend">${legend}</div>
    <div class="facts">${fact("total", ms(r.total_ms), 'data-fact="total"')}${fact("actors rebuilt", r.actors)}
      ${fact("tasks replayed", num(r.tasks_replayed), 'data-fact="tasks-replayed"')}${fact("replay rate", `${num(r.replay_tasks_per_s)} tasks/s`)}
      ${fact("from a checkpoint", r.from_checkpoint)}${r.promoted ? fact("standbys promoted", r.from_standby) : ""}
      ${fact("sends skipped", num(r.sends_skipped))}</div>`;
}

// ---- routing and the live feed -------------------------------------------------------------------

function route() {
  const [, name = "cluster", arg] = location.hash.split("/");
  const page = name === "actors" && arg ? "actor" : (pages[name] ? name : "cluster");
  if (current && current.timer) clearInterval(current.timer);
  for (const c of charts.values()) c.destroy();
  charts.clear();
  current = {name: page, arg, timer: null};
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("current", a.dataset.nav === (page === "actor" ? "actors" : page)));
  const main = $("#page");
  main.dataset.page = page;
  main.innerHTML = pages[page].mount(arg);
  if (pages[page].bind) pages[page].bind(arg);
  if (snap) pages[page].update(snap);
}

function connect() {
  const live = $("#live");
  const events = new EventSource("/api/events");
  events.onmessage = e => {
    try {
      snap = JSON.parse(e.data);
      live.dataset.state = "live";
      live.textContent = `live · ${clock(snap.now)}`;
      pages[current.name].update(snap);
    } catch (error) {  // one bad update must not stop the next ones
      console.error("dashboard update failed", error);
    }
  };
  events.onerror = async () => {
    live.dataset.state = "lost";
    live.textContent = "connection lost: retrying…";
    // The browser retries the stream by itself, unless it was refused: logged out (a new token).
    const answer = await fetch("/api/snapshot").catch(() => null);
    if (answer && answer.status === 401) location.href = "/login";
  };
}

window.addEventListener("hashchange", route);
route();
connect();
