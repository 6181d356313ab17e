// greenswarm dashboard (DESIGN 11): polls the manager's reads every 2 s with the session cookie
// and redraws in place. Plain JavaScript, shipped with the package (with uPlot, vendored, for
// the charts); every value from the server is set as text, never as HTML.
"use strict";

(function () {
  const POLL_MS = 2000;
  const MAX_EVENTS = 200;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const pct = (v) => (v === null || v === undefined ? "-" : (v * 100).toFixed(0) + "%");
  const watts = (v) => (v === null || v === undefined ? "-" : v.toFixed(1) + " W");
  const bytes = (v) => (v >= 2 ** 30 ? (v / 2 ** 30).toFixed(1) + " GiB" : (v / 2 ** 20).toFixed(0) + " MiB");
  const clock = (t) => new Date(t * 1000).toLocaleTimeString();

  async function getJson(path) {
    const answer = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (answer.status === 401) {
      window.location.assign("/dashboard/login");
      throw new Error("logged out");
    }
    if (!answer.ok) throw new Error(path + ": HTTP " + answer.status);
    return answer.json();
  }

  // -- login page ------------------------------------------------------------------------
  function setUpLogin(form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const error = document.getElementById("error");
      error.textContent = "";
      const answer = await fetch("/dashboard/login", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ token: document.getElementById("token").value }),
      });
      if (answer.ok) {
        window.location.assign("/dashboard");
      } else {
        const body = await answer.json().catch(() => ({}));
        error.textContent = body.message || "HTTP " + answer.status;
      }
    });
  }

  // -- the page --------------------------------------------------------------------------
  // What operators ask first (kWh, SLO fulfilment per class), then charts over time from the
  // manager's own history (GET /history, drawn with uPlot, vendored), then one compact row per
  // host (its tasks when opened), the queue and the events. Host names come from the server
  // (GET /hosts, and each event's host_name, a host that left included).
  const REGION_ORDER = { EED: 0, DEE: 1, LEE: 2 };
  const HISTORY_KEPT = 20000;  // samples the page keeps (a day at 10 s is 8,640)
  const RECORD_REFRESH_MS = 10000;  // an opened host's task records are read again this often
  const expanded = new Set();
  const records = new Map();  // request id -> {record, at}: the tasks of opened hosts
  let lastHosts = [];

  function bar(use, alloc) {
    const track = el("div", { class: "bar" });
    track.append(el("div", { class: "alloc", style: "width:" + Math.min(100, alloc * 100) + "%" }));
    track.append(el("div", { class: "use", style: "width:" + Math.min(100, use * 100) + "%" }));
    if (alloc > 1) track.append(el("div", { class: "over", title: "booked past capacity" }));
    return el("div", { class: "cell-bar", title: pct(use) + " used / " + pct(alloc) + " booked" },
      track, el("span", { class: "figure" }, pct(use) + " / " + pct(alloc)));
  }

  function powerState(p) {
    // its power state (DESIGN 3.15): shown when it is not simply on, and advise's advice
    const state = p && p.state ? p.state : "on";
    if (state !== "on") return el("span", { class: "power-state power-" + state, title: "since " + clock(p.since) }, state + " ");
    if (p && p.advice) return el("span", { class: "power-state power-advice", title: p.advice_detail || "" }, "advise: " + p.advice + " ");
    return null;
  }

  function powerCell(p) {
    const state = p && p.state ? p.state : "on";
    if (p && p.measured_w !== null && p.measured_w !== undefined) return el("td", { class: "num", "data-power": state }, powerState(p), watts(p.measured_w));
    return el("td", { class: "num estimated", title: "estimated (no RAPL)", "data-power": state }, powerState(p), watts(p ? p.estimated_w : null));
  }

  function hostRow(host) {
    const open = expanded.has(host.id);
    const toggle = el("button", { class: "expand", type: "button", "aria-expanded": String(open),
      title: open ? "hide its tasks" : "show its tasks" }, open ? "\u25BE" : "\u25B8");
    toggle.addEventListener("click", () => {
      if (expanded.has(host.id)) expanded.delete(host.id); else expanded.add(host.id);
      drawHosts(lastHosts);
      if (expanded.has(host.id)) refreshRecords(lastHosts).then(() => drawHosts(lastHosts));
    });
    const name = host.name || host.id;
    return el("tr", { class: "host", "data-host": host.id, "data-region": host.region },
      el("td", { class: "name", title: name + " (" + host.id + ")" }, toggle, el("span", { class: "host-name" }, name)),
      el("td", {}, el("span", { class: "region region-" + host.region }, host.region)),
      el("td", {}, host.class === null ? "empty" : String(host.class)),
      el("td", { class: "num" }, host.overbooking_factor.toFixed(2)),
      el("td", {}, bar(host.cpu_util, host.cpu_allocated / host.cpu_capacity)),
      el("td", {}, bar(host.memory_util, host.memory_allocated / host.memory_capacity)),
      powerCell(host.power),
      el("td", { class: "num tasks-count" }, String((host.tasks || []).length)));
  }

  function tasksRow(host) {
    const list = el("ul", { class: "task-grid" });
    for (const task of host.tasks || []) {
      const known = records.get(task.id);
      const service = known && known.record.service;
      const cut = Number(task.cut_received || 0);
      list.append(el("li", { "data-task": task.id, title: task.id },
        el("span", { class: "id" }, task.id),
        el("span", {}, "c" + task.class + " " + task.type,
          cut > 0 ? el("span", { class: "cut" }, " cut " + (cut * 100).toFixed(0) + "%") : null,
          task.suspended ? el("span", { class: "paused" }, " paused") : null,
          service ? " A " + pct(service.availability) : "")));
    }
    if (!(host.tasks || []).length) list.append(el("li", { class: "empty" }, "no task"));
    return el("tr", { class: "host-tasks", "data-host-tasks": host.id }, el("td", { colspan: "8" }, list));
  }

  function drawHosts(hosts) {
    const filter = document.getElementById("host-filter").value.trim().toLowerCase();
    const shown = hosts.filter((h) => !filter || [h.name, h.id, h.region, "class " + h.class]
      .some((text) => String(text).toLowerCase().includes(filter)))
      .sort((a, b) => (REGION_ORDER[a.region] ?? 9) - (REGION_ORDER[b.region] ?? 9)
        || (a.class ?? 9) - (b.class ?? 9) || (a.name || "").localeCompare(b.name || ""));
    const rows = [];
    for (const host of shown) {
      rows.push(hostRow(host));
      if (expanded.has(host.id)) rows.push(tasksRow(host));
    }
    if (!rows.length) rows.push(el("tr", {}, el("td", { class: "empty", colspan: "8" }, hosts.length ? "no host matches" : "no host")));
    document.querySelector("#hosts tbody").replaceChildren(...rows);
    const byRegion = ["EED", "DEE", "LEE"].map((r) => hosts.filter((h) => h.region === r).length + " " + r);
    document.getElementById("host-count").textContent = hosts.length + " (" + byRegion.join(", ") + ")";
  }

  async function refreshRecords(hosts) {
    const now = Date.now();
    const wanted = hosts.filter((h) => expanded.has(h.id)).flatMap((h) => (h.tasks || []).map((t) => t.id))
      .filter((id) => !records.has(id) || now - records.get(id).at > RECORD_REFRESH_MS);
    for (let i = 0; i < wanted.length; i += 8) {  // a few at a time
      await Promise.all(wanted.slice(i, i + 8).map((id) =>
        getJson("/requests/" + encodeURIComponent(id))
          .then((record) => records.set(id, { record, at: now })).catch(() => null)));
    }
  }

  function drawQueue(waiting) {
    const body = document.querySelector("#queue tbody");
    const sorted = [...waiting].sort((a, b) => ((a.service || {}).q_s ?? 0) - ((b.service || {}).q_s ?? 0));
    body.replaceChildren(...sorted.slice(0, 100).map((r) => el("tr", { "data-request": r.id },
      el("td", {}, r.id), el("td", {}, r.class),
      el("td", {}, r.service ? r.service.q_s.toFixed(0) : "-"),
      el("td", {}, r.service ? pct(r.service.availability) : "-"))));
    if (!sorted.length) body.append(el("tr", {}, el("td", { class: "empty", colspan: "4" }, "empty")));
    document.getElementById("queue-count").textContent = sorted.length + " waiting, most urgent first";
  }

  function moved(moves) {
    // consolidation's moves (DESIGN 3.15), when the manager consolidates
    if (!moves) return "";
    return moves.moved + " service" + (moves.moved === 1 ? "" : "s") + " moved" +
      (moves.undone ? ", " + moves.undone + " move" + (moves.undone === 1 ? "" : "s") + " undone" : "") + "; ";
  }

  function drawSummary(power, slo, hosts) {
    const c = power.cluster;
    if (c) {
      document.getElementById("kwh").textContent = c.estimated_kwh.toFixed(4) + " kWh";
      document.getElementById("energy-since").textContent = "since " + clock(c.since);
      const sw = power.switching;
      const switched = sw ? "with switching (" + Object.entries(sw.hosts).filter(([, n]) => n)
        .map(([state, n]) => n + " " + state).join(", ") + "; " + moved(sw.moves) + c.estimated_kwh_all_on.toFixed(4) +
        " kWh had all stayed on); " : "";
      document.getElementById("watts").textContent = "estimated " + switched +
        (c.measured_hosts ? c.measured_kwh.toFixed(4) + " kWh measured on " + c.measured_hosts + " hosts; " : "") +
        "now " + watts(c.estimated_w) + (c.measured_w !== null ? " (" + watts(c.measured_w) + " measured)" : "");
    }
    const tiles = (slo.classes || []).map((row) => {
      const share = row.fulfilment;
      const big = el("div", { class: "big" + (share !== null && share < 0.9 ? " low" : "") },
        share === null ? "-" : (share * 100).toFixed(1) + "%");
      return el("div", { class: "slo-class", "data-class": String(row.class) },
        el("h2", {}, "Class " + row.class + " SLO ", el("small", {}, "A \u2265 " + pct(row.objective))),
        big,
        el("div", { class: "small" }, row.requests
          ? (row.met + row.meeting) + " of " + row.requests + " met or meeting; " + row.missing + " missing now"
          : "no request yet"),
        // preemptions that kept work (DESIGN 3.14), when there were any
        row.suspensions || row.checkpoint_restarts
          ? el("div", { class: "small preempted" }, (row.suspensions || 0) + " suspended, " +
            (row.resumes || 0) + " resumed, " + (row.checkpoint_restarts || 0) + " checkpointed restarts")
          : null);
    });
    document.getElementById("slo").replaceChildren(...tiles);
    const tasks = hosts.reduce((n, h) => n + (h.tasks || []).length, 0);
    document.getElementById("counts").textContent = hosts.length + " hosts \u00B7 " + tasks + " tasks";
  }

  // -- charts over time (uPlot) ------------------------------------------------------------
  const samples = [];
  let historyCursor = "0";
  const charts = {};
  const SERIES = {
    power: [
      { label: "estimated W", stroke: "#2e9e55", scale: "W", key: "estimated_w" },
      { label: "measured W", stroke: "#2e7bb8", scale: "W", key: "measured_w" },
      { label: "kWh", stroke: "#d9822b", scale: "kWh", key: "estimated_kwh", dash: [4, 3] },
    ],
    hosts: [{ label: "hosts on", stroke: "#1f6b3a", key: "hosts_on", step: true }],
    util: [
      { label: "CPU used", stroke: "#2e9e55", key: "cpu_util", pct: true },
      { label: "CPU booked", stroke: "#2e9e55", key: "cpu_allocated", pct: true, dash: [5, 3] },
      { label: "mem used", stroke: "#2e7bb8", key: "memory_util", pct: true },
      { label: "mem booked", stroke: "#2e7bb8", key: "memory_allocated", pct: true, dash: [5, 3] },
    ],
    queue: [{ label: "waiting", stroke: "#b83a2e", key: "queue", step: true }],
    slo: [1, 2, 3, 4].map((c, i) => ({ label: "class " + c, stroke: ["#1f6b3a", "#2e7bb8", "#d9822b", "#7a4fb8"][i],
      slo: String(c), pct: true })),
  };

  function columns(name) {
    const xs = samples.map((s) => s.t);
    const ys = SERIES[name].map((def) => samples.map((s) => {
      const raw = def.slo ? (s.slo || {})[def.slo] : s[def.key];
      return raw === null || raw === undefined ? null : (def.pct ? raw * 100 : raw);
    }));
    return [xs, ...ys];
  }

  function makeChart(name) {
    const box = document.getElementById("chart-" + name);
    const defs = SERIES[name];
    const scales = [...new Set(defs.map((d) => d.scale || "y"))];
    const label = (scale) => (v) => (v === null ? "" : defs[0].pct ? +v.toFixed(1) + "%"
      : scale === "kWh" ? +v.toPrecision(3) + ""
      : Math.abs(v) >= 1000 ? +(v / 1000).toFixed(1) + "k" : String(+v.toFixed(2)));
    const axes = [{}, ...scales.map((scale, i) => ({ scale, side: i === 0 ? 3 : 1, size: 56,
      grid: { show: i === 0 }, values: (u, ticks) => ticks.map(label(scale)) }))];
    const opts = {
      width: Math.max(200, box.clientWidth), height: 130,
      legend: { show: true, live: false },
      cursor: { show: true },
      // counts and shares from 0 (a share up to 100 % at least); power and energy as they vary
      scales: Object.fromEntries([["x", { time: true }], ...scales.map((s) => [s,
        s === "W" || s === "kWh" ? { auto: true }
          : { range: (u, min, max) => [0, Math.max(defs[0].pct ? 100 : 1, (max || 0) * 1.1)] }])]),
      axes,
      series: [{}, ...defs.map((d) => ({ label: d.label, stroke: d.stroke, scale: d.scale || "y", width: 1.5,
        dash: d.dash, paths: d.step ? uPlot.paths.stepped({ align: 1 }) : undefined, spanGaps: false }))],
    };
    box.replaceChildren();
    charts[name] = new uPlot(opts, columns(name), box);
  }

  function drawCharts() {
    for (const name of Object.keys(SERIES)) {
      const box = document.getElementById("chart-" + name);
      if (typeof uPlot === "undefined") { box.replaceChildren(el("p", { class: "empty" }, "charts unavailable")); continue; }
      if (!charts[name]) makeChart(name); else charts[name].setData(columns(name));
      box.dataset.points = String(samples.length);
    }
  }

  async function pollHistory() {
    let page;
    do {
      page = await getJson("/history?since=" + encodeURIComponent(historyCursor) + "&limit=10000");
      historyCursor = page.next;
      samples.push(...page.samples);
    } while (page.samples.length === 10000);
    if (samples.length > HISTORY_KEPT) samples.splice(0, samples.length - HISTORY_KEPT);
    drawCharts();
  }

  window.addEventListener("resize", () => {
    for (const [name, chart] of Object.entries(charts)) {
      chart.setSize({ width: Math.max(200, document.getElementById("chart-" + name).clientWidth), height: 130 });
    }
  });

  // -- events --------------------------------------------------------------------------------
  let cursor = null;
  async function pollEvents(names) {
    if (cursor === null) {
      const first = await getJson("/events?since=0&limit=1000");
      cursor = first.next;
      addEvents(first.events.slice(-50), names);
    }
    const page = await getJson("/events?since=" + encodeURIComponent(cursor) + "&limit=1000");
    cursor = page.next;
    addEvents(page.events, names);
  }

  function addEvents(events, names) {
    const list = document.getElementById("timeline");
    for (const e of events) {
      const name = e.host ? (e.host_name || names.get(e.host) || e.host) : null;
      const where = name ? " on " + name + (e.cluster ? " (cluster " + e.cluster + ")" : "") : "";
      list.prepend(el("li", { class: "event", "data-request": e.request, "data-kind": e.kind },
        el("span", { class: "time" }, clock(e.t) + " "),
        el("span", { class: "kind kind-" + e.kind }, e.kind),
        " " + e.request + where));
    }
    while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  }

  async function refresh() {
    const status = document.getElementById("status");
    try {
      const [hosts, waiting, power, slo] = await Promise.all([
        getJson("/hosts"), getJson("/requests?status=pending&limit=1000"),
        getJson("/power").catch(() => ({})), getJson("/slo").catch(() => ({})),
      ]);
      lastHosts = hosts;
      await refreshRecords(hosts);
      drawSummary(power, slo, hosts);
      drawHosts(hosts);
      drawQueue(waiting);
      await pollHistory();
      await pollEvents(new Map(hosts.map((h) => [h.id, h.name || h.id])));
      status.textContent = "updated " + new Date().toLocaleTimeString();
    } catch (error) {
      status.textContent = String(error.message || error);
    }
  }

  function setUpPage() {
    document.getElementById("logout").addEventListener("click", async () => {
      await fetch("/dashboard/logout", { method: "POST", credentials: "same-origin" });
      window.location.assign("/dashboard/login");
    });
    document.getElementById("host-filter").addEventListener("input", () => drawHosts(lastHosts));
    let running = false;
    const tick = async () => {
      if (running) return;  // a slow answer never piles up polls
      running = true;
      try { await refresh(); } finally { running = false; }
    };
    tick();
    setInterval(tick, POLL_MS);
  }

  const form = document.getElementById("login");
  if (form) setUpLogin(form);
  else setUpPage();
})();
