// greenswarm dashboard (DESIGN 11): polls the manager's reads every 2 s with the session cookie
// and redraws in place. Plain JavaScript, shipped with the package; every value from the
// server is set as text, never as HTML.
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
  function bar(label, use, alloc, capacityNote) {
    const row = [el("span", {}, label)];
    const track = el("div", { class: "bar" });
    track.append(el("div", { class: "alloc", style: "width:" + Math.min(100, alloc * 100) + "%" }));
    track.append(el("div", { class: "use", style: "width:" + Math.min(100, use * 100) + "%" }));
    if (alloc > 1) track.append(el("div", { class: "over", title: "booked past capacity" }));
    row.push(track, el("span", {}, pct(use) + " used / " + pct(alloc) + " booked" + (capacityNote || "")));
    return row;
  }

  function hostCard(host, power, records) {
    const cpuAlloc = host.cpu_allocated / host.cpu_capacity;
    const memAlloc = host.memory_allocated / host.memory_capacity;
    const p = power || host.power || {};
    const powerText = p.measured_w !== null && p.measured_w !== undefined
      ? el("span", {}, watts(p.measured_w) + " measured")
      : el("span", { class: "estimated" }, watts(p.estimated_w) + " estimated");
    const card = el("div", { class: "host", "data-host": host.id },
      el("div", { class: "title" }, el("span", { class: "name" }, host.name || host.id),
        el("span", {}, "class " + (host.class === null ? "empty" : host.class))),
      el("div", { class: "meta" }, "overbooking factor " + host.overbooking_factor.toFixed(2) + " · ",
        powerText));
    const bars = el("div", { class: "bars" });
    bars.append(...bar("CPU", host.cpu_util, cpuAlloc, ""), ...bar("mem", host.memory_util, memAlloc, ""));
    card.append(bars);
    const tasks = el("ul", { class: "tasks" });
    for (const task of host.tasks || []) {
      const record = records.get(task.id);
      const service = record && record.service;
      const cut = Number(task.cut_received || 0);
      tasks.append(el("li", { "data-task": task.id },
        el("span", {}, task.id + " (class " + task.class + ", " + task.type + ")"),
        el("span", {},
          cut > 0 ? el("span", { class: "cut" }, "cut " + (cut * 100).toFixed(0) + "% · ") : null,
          service ? "A " + pct(service.availability) : "")));
    }
    if (!(host.tasks || []).length) tasks.append(el("li", { class: "empty" }, "no task"));
    card.append(tasks);
    return card;
  }

  function drawHosts(hosts, power, records) {
    for (const region of document.querySelectorAll(".region")) {
      const list = region.querySelector(".hosts");
      const mine = hosts.filter((h) => h.region === region.dataset.region)
        .sort((a, b) => (a.class ?? 9) - (b.class ?? 9) || a.name.localeCompare(b.name));
      list.replaceChildren(...mine.map((h) => hostCard(h, power.hosts ? power.hosts[h.id] : null, records)));
      if (!mine.length) list.append(el("p", { class: "empty" }, "no host"));
    }
  }

  function drawQueue(records) {
    const body = document.querySelector("#queue tbody");
    const waiting = [...records.values()].filter((r) => r.status === "pending")
      .sort((a, b) => ((a.service || {}).q_s ?? 0) - ((b.service || {}).q_s ?? 0));
    body.replaceChildren(...waiting.map((r) => el("tr", { "data-request": r.id },
      el("td", {}, r.id), el("td", {}, r.class),
      el("td", {}, r.service ? r.service.q_s.toFixed(0) : "-"),
      el("td", {}, r.service ? pct(r.service.availability) : "-"))));
    if (!waiting.length) body.append(el("tr", {}, el("td", { class: "empty", colspan: "4" }, "empty")));
  }

  function drawCluster(power, hosts, records) {
    const c = power.cluster;
    const text = c
      ? [hosts.length + " hosts", records.size + " requests",
         (c.measured_w !== null ? watts(c.measured_w) + " measured, " : "") + watts(c.estimated_w) + " estimated",
         c.estimated_kwh.toFixed(4) + " kWh estimated" +
           (c.measured_hosts ? ", " + c.measured_kwh.toFixed(4) + " kWh measured" : "") + " since " + clock(c.since)]
      : [hosts.length + " hosts", records.size + " requests", "power: not available"];
    document.getElementById("cluster").textContent = text.join(" · ");
  }

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
      const host = e.host ? " on " + (names.get(e.host) || e.host) : "";
      list.prepend(el("li", { class: "event", "data-request": e.request, "data-kind": e.kind },
        el("span", { class: "time" }, clock(e.t) + " "),
        el("span", { class: "kind kind-" + e.kind }, e.kind),
        " " + e.request + host));
    }
    while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  }

  async function refresh() {
    const status = document.getElementById("status");
    try {
      const [hosts, requests, power] = await Promise.all([
        getJson("/hosts"), getJson("/requests?limit=1000"),
        getJson("/power").catch(() => ({})),
      ]);
      const records = new Map(requests.map((r) => [r.id, r]));
      const names = new Map(hosts.map((h) => [h.id, h.name || h.id]));
      drawHosts(hosts, power, records);
      drawQueue(records);
      drawCluster(power, hosts, records);
      await pollEvents(names);
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
    refresh();
    setInterval(refresh, POLL_MS);
  }

  const form = document.getElementById("login");
  if (form) setUpLogin(form);
  else setUpPage();
})();
