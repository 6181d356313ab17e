// greenswarm dashboard: the warnings (DESIGN 9, 11). Polls the manager's health every 2 s and
// shows, above everything else, what needs an operator: records the reconciliation skips
// because they fail (by id, with the error), nodes that are Down or gone (by name), a failed
// pass, Redis or Docker not answering. Hidden when all is well. Its own file, so that it works
// with whatever the rest of the page is; every value is set as text, never as HTML. /healthz
// gives those details to a dashboard session only (its cookie goes along); while Redis does not
// answer, the session cannot be checked and the answer has the checks alone.
"use strict";

(function () {
  const POLL_MS = 2000;
  const box = document.getElementById("warnings");
  if (!box) return;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child instanceof Node ? child : String(child));
    return node;
  }

  const since = (t) => "since " + new Date(t * 1000).toLocaleTimeString();

  // DESIGN 13: which manager this page talks to, leader or standby, in the header
  function drawRole(health) {
    const role = document.getElementById("role");
    if (!role || !health.role) return;
    role.dataset.role = health.role;
    role.textContent = health.role === "leader" ? "leader" :
      "standby" + (health.leader ? " (leader: " + health.leader + ")" : health.leader_known ? "" : ", no leader now");
  }

  function draw(health) {
    drawRole(health);
    const parts = [];
    const reconcile = health.reconcile || {};
    const failing = reconcile.failing || [];
    const down = health.nodes_down || [];
    // without the details (no session could be checked), the counts alone
    const failingCount = reconcile.failing ? failing.length : (reconcile.failing_count || 0);
    const downCount = health.nodes_down ? down.length : (health.nodes_down_count || 0);
    if (health.redis === false || health.docker === false) {
      const what = [health.redis === false ? "Redis" : null, health.docker === false ? "Docker" : null];
      const error = health.redis_error || health.docker_error;  // shown to a session only
      parts.push(el("p", { "data-warning": "degraded" },
        what.filter(Boolean).join(" and ") + " does not answer" + (error ? ": " + error : "")));
    }
    if (reconcile.error) {
      parts.push(el("p", { "data-warning": "pass" }, "The last reconciliation with the Swarm failed: " + reconcile.error));
    }
    if (downCount) {
      parts.push(el("h3", {}, downCount === 1 ? "1 node is down" : downCount + " nodes are down"));
    }
    if (down.length) {
      parts.push(el("ul", { class: "down" }, ...down.map((node) =>
        el("li", { "data-node": node.id, title: node.id }, el("strong", {}, node.name), " " + since(node.since)))));
    }
    if (failingCount) {
      const errors = reconcile.errors_total === 1 ? "1 error" : reconcile.errors_total + " errors";
      parts.push(el("h3", {}, (failingCount === 1 ? "1 record fails and is" : failingCount + " records fail and are") +
        " skipped by the reconciliation (" + errors + " so far)"));
    }
    if (failing.length) {
      parts.push(el("ul", { class: "failing" }, ...failing.map((fault) =>
        el("li", { "data-record": fault.id }, el("code", {}, fault.id),
          " (" + (fault.kind || "record") + ", " + since(fault.since) + "): " + fault.error))));
    }
    box.replaceChildren(...parts);
    box.hidden = parts.length === 0;
  }

  async function poll() {
    try {
      // 503 (Redis or Docker down) has the same JSON body: it is read all the same
      const answer = await fetch("/healthz", { credentials: "same-origin", headers: { Accept: "application/json" } });
      draw(await answer.json());
    } catch (error) {
      box.replaceChildren(el("p", { "data-warning": "unreachable" }, "The manager does not answer: " + error.message));
      box.hidden = false;
    }
  }

  poll();
  setInterval(poll, POLL_MS);
})();
