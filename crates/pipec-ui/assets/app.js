// pipec ui: the threads of a store, and one thread's graph, timeline, nodes, gates, cost
// and events, followed live while it runs. Every text from the store is put in the page as
// text (never as markup).
"use strict";

const state = { token: null, cursors: [], timer: null, selected: null, thread: null };

// ---- helpers --------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path, body) {
  const headers = { "Accept": "application/json" };
  if (state.token) headers["Authorization"] = "Bearer " + state.token;
  const init = { headers };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch("/api/" + path, init);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = data.error || { code: String(r.status), message: r.statusText };
    throw e;
  }
  return data;
}

function banner(error) {
  const b = document.getElementById("banner");
  b.replaceChildren();
  if (!error) { b.hidden = true; return; }
  b.hidden = false;
  b.append(el("strong", {}, error.code ? `${error.code} ` : ""), error.message || String(error));
  if (error.help) b.append(el("div", { class: "help" }, "help: " + error.help));
}

function time(ms) {
  if (!ms) return "";
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

function duration(ms) {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

function dollars(u) {
  if (!u || !u.model_calls) return "–";
  if (u.unpriced_calls === u.model_calls) return "unknown";
  const d = u.cost_usd >= 1 ? u.cost_usd.toFixed(2) : u.cost_usd.toFixed(4);
  return "$" + d + (u.unpriced_calls ? ` + ${u.unpriced_calls} unpriced` : "");
}

function usageText(u) {
  if (!u || !u.model_calls) return "";
  const cached = u.tokens_cached ? ` (${u.tokens_cached} cached)` : "";
  return `${u.model_calls} model call${u.model_calls === 1 ? "" : "s"}, ` +
    `${u.tokens_in}${cached} in / ${u.tokens_out} out tokens, ${dollars(u)}`;
}

function badge(status) {
  return el("span", { class: "badge " + status, "data-status": status }, status);
}

function stopPolling() {
  if (state.timer) clearTimeout(state.timer);
  state.timer = null;
}

// ---- the threads ------------------------------------------------------------------------

async function showThreads(params) {
  stopPolling();
  const main = document.getElementById("main");
  const status = params.get("status") || "";
  const pipeline = params.get("pipeline") || "";
  const before = params.get("before") || "";
  const form = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    const s = form.querySelector("[name=status]").value;
    const p = form.querySelector("[name=pipeline]").value.trim();
    if (s) q.set("status", s);
    if (p) q.set("pipeline", p);
    location.hash = "#/?" + q.toString();
  } },
    el("label", {}, "status ",
      el("select", { name: "status" },
        ["", "running", "paused", "completed", "failed", "blocked", "cancelled", "queued"].map((s) =>
          el("option", { value: s, selected: s === status }, s || "any")))),
    el("label", {}, "pipeline ", el("input", { name: "pipeline", value: pipeline, placeholder: "any" })),
    el("button", { type: "submit" }, "Filter"));
  const q = new URLSearchParams();
  if (status) q.set("status", status);
  if (pipeline) q.set("pipeline", pipeline);
  if (before) q.set("before", before);
  let data;
  try {
    data = await api("threads?" + q.toString());
    banner(null);
  } catch (e) {
    banner(e);
    main.replaceChildren(form);
    return;
  }
  const rows = data.threads.map((t) => el("tr", { "data-thread": t.id },
    el("td", {}, el("a", { href: "#/t/" + t.id }, t.id)),
    el("td", {}, t.pipeline),
    el("td", {}, badge(t.stale ? "stale" : t.status)),
    el("td", {}, time(t.created_ms)),
    el("td", {}, time(t.updated_ms)),
    el("td", { class: "num" }, dollars(t.usage))));
  const table = el("table", { class: "threads" },
    el("thead", {}, el("tr", {}, ["thread", "pipeline", "status", "created (UTC)", "updated (UTC)", "cost"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 6 }, "no threads"))));
  const paging = el("div", { class: "paging" });
  if (before) {
    paging.append(el("a", { href: "#/?" + (() => { const b = new URLSearchParams(q); b.delete("before"); return b.toString(); })() }, "newest"));
  }
  if (data.next) {
    const n = new URLSearchParams(q);
    n.set("before", data.next);
    paging.append(el("a", { href: "#/?" + n.toString(), class: "older" }, "older →"));
  }
  document.getElementById("where").textContent = "threads";
  main.replaceChildren(form, table, paging);
}

// ---- one thread -------------------------------------------------------------------------

function layout(graph) {
  const byName = new Map(graph.nodes.map((n) => [n.name, n]));
  const level = new Map();
  const depth = (name, seen) => {
    if (level.has(name)) return level.get(name);
    if (seen.has(name)) return 0;
    seen.add(name);
    const n = byName.get(name);
    const d = n ? Math.max(-1, ...n.deps.filter((x) => byName.has(x)).map((x) => depth(x, seen))) + 1 : 0;
    level.set(name, d);
    return d;
  };
  graph.nodes.forEach((n) => depth(n.name, new Set()));
  const columns = [];
  for (const n of graph.nodes) {
    const d = level.get(n.name);
    (columns[d] = columns[d] || []).push(n.name);
  }
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((name, y) => pos.set(name, { x: 20 + x * 190, y: 20 + y * 64 })));
  const width = 20 + columns.length * 190;
  const height = 20 + Math.max(1, ...columns.map((c) => c.length)) * 64;
  return { pos, width, height };
}

function nodeState(view, name) {
  const gate = view.gates.find((g) => g.gate === name);
  if (gate && gate.state === "pending") return "waiting";
  const row = view.nodes.find((n) => n.node === name);
  return row ? row.state : "pending";
}

function drawGraph(thread) {
  const { graph, view } = thread;
  const { pos, width, height } = layout(graph);
  const s = svg("svg", { class: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "pipeline graph" });
  for (const n of graph.nodes) {
    for (const d of n.deps) {
      const a = pos.get(d), b = pos.get(n.name);
      if (!a || !b) continue;
      s.append(svg("path", { class: "edge", d: `M${a.x + 150},${a.y + 20} C${a.x + 170},${a.y + 20} ${b.x - 20},${b.y + 20} ${b.x},${b.y + 20}` }));
    }
  }
  for (const n of graph.nodes) {
    const p = pos.get(n.name);
    const st = nodeState(view, n.name);
    const g = svg("g", { class: `node ${st}${state.selected === n.name ? " selected" : ""}`, "data-node": n.name, "data-state": st, transform: `translate(${p.x},${p.y})`, tabindex: "0",
      onclick: () => { state.selected = n.name; render(thread); } },
      svg("rect", { width: 150, height: 40, rx: 6 }),
      svg("text", { x: 8, y: 17, class: "name" }, n.name),
      svg("text", { x: 8, y: 32, class: "kind" }, `${n.kind}${n.each ? " · each" : ""} · ${st}`));
    s.append(g);
  }
  return s;
}

// A bar placed by the script's own style properties (the page allows no inline styles).
function placed(bar, left, width) {
  bar.style.left = left.toFixed(2) + "%";
  bar.style.width = width.toFixed(2) + "%";
  return bar;
}

function timeline(events) {
  // Lanes per attempt: each attempt's nodes as bars on the attempt's own time scale.
  const attempts = [];
  let current = null;
  const open = new Map();
  for (const e of events) {
    if (e.type === "thread_created" || e.type === "attempt_started") {
      current = { attempt: e.attempt, start: e.ts, end: e.ts, bars: [], outcome: "" };
      attempts.push(current);
      open.clear();
      continue;
    }
    if (!current) continue;
    current.end = Math.max(current.end, e.ts);
    if (e.type === "node_started") open.set(e.node, e.ts);
    if (["node_finished", "node_failed", "node_skipped"].includes(e.type) && open.has(e.node)) {
      current.bars.push({ label: e.node, start: open.get(e.node), end: e.ts, kind: e.type.slice(5) });
      open.delete(e.node);
    }
    if (e.type === "model_turn") current.bars.push({ label: `${e.node} · model turn ${e.turn}`, start: e.ts - (e.ms || 0), end: e.ts, kind: "model" });
    if (e.type === "gate_pending") current.bars.push({ label: `${e.gate} · asks`, start: e.ts, end: e.ts, kind: "gate" });
    if (["thread_paused", "thread_completed", "thread_failed", "thread_cancelled", "thread_blocked"].includes(e.type)) current.outcome = e.type.slice(7);
  }
  const box = el("div", { class: "timeline" });
  for (const a of attempts) {
    const span = Math.max(1, a.end - a.start);
    const lane = el("div", { class: "attempt" }, el("div", { class: "lane-title" }, `attempt ${a.attempt} · ${duration(span)} ${a.outcome ? "· " + a.outcome : ""}`));
    for (const b of a.bars) {
      const left = ((b.start - a.start) / span) * 100;
      const w = Math.max(0.5, ((b.end - b.start) / span) * 100);
      lane.append(el("div", { class: "bar-row" },
        el("span", { class: "bar-label" }, b.label),
        el("span", { class: "bar-track" }, placed(el("span", { class: "bar " + b.kind, title: duration(b.end - b.start) }), left, w))));
    }
    box.append(lane);
  }
  return box;
}

function gateForm(thread, gate, form) {
  const fields = form.schema.properties || {};
  const required = form.schema.required || [];
  const inputs = {};
  const f = el("form", { class: "gate-form", "data-gate": gate.gate });
  f.append(el("p", { class: "message" }, gate.message));
  for (const [key, field] of Object.entries(fields)) {
    let input;
    const id = `field-${gate.gate}-${key}`;
    const choices = field.oneOf || (field.enum || []).map((v) => ({ const: v, title: v }));
    if (field.type === "boolean") {
      input = el("input", { type: "checkbox", id, name: key, checked: field.default === true });
    } else if (field.type === "array") {
      const items = field.items || {};
      const opts = items.anyOf || (items.enum || []).map((v) => ({ const: v, title: v }));
      input = el("select", { id, name: key, multiple: true }, opts.map((o) => el("option", { value: o.const, selected: (field.default || []).includes(o.const) }, o.title)));
    } else if (choices.length) {
      input = el("select", { id, name: key }, choices.map((o) => el("option", { value: o.const, selected: field.default === o.const }, o.title)));
    } else if (field.type === "integer" || field.type === "number") {
      input = el("input", { type: "number", id, name: key, step: field.type === "integer" ? "1" : "any", value: field.default ?? "" });
    } else {
      input = el("input", { type: "text", id, name: key, value: field.default ?? "" });
    }
    inputs[key] = { input, field };
    f.append(el("label", { for: id }, field.title || key, required.includes(key) ? " *" : ""), input);
    if (field.description) f.append(el("small", {}, field.description));
  }
  const read = () => {
    const content = {};
    for (const [key, { input, field }] of Object.entries(inputs)) {
      if (field.type === "boolean") content[key] = input.checked;
      else if (field.type === "array") content[key] = [...input.selectedOptions].map((o) => o.value);
      else if (field.type === "integer" || field.type === "number") {
        if (input.value !== "") content[key] = Number(input.value);
      } else if (input.value !== "" || required.includes(key)) content[key] = input.value;
    }
    return content;
  };
  const submit = async (resume) => {
    try {
      await api(`threads/${thread.view.thread}/answer`, { gate: gate.gate, content: read() });
      if (resume) await api(`threads/${thread.view.thread}/resume`, {});
      banner(null);
    } catch (e) { banner(e); }
    await refresh(thread.view.thread, true);
  };
  f.append(el("div", { class: "buttons" },
    el("button", { type: "button", class: "primary answer-resume", onclick: () => submit(true) }, "Answer and resume"),
    el("button", { type: "button", class: "answer-only", onclick: () => submit(false) }, "Answer only")));
  return f;
}

function jsonGate(thread, gate) {
  const area = el("textarea", { rows: 4, name: "answer" }, "");
  const f = el("form", { class: "gate-form", "data-gate": gate.gate },
    el("p", { class: "message" }, gate.message),
    el("label", {}, "answer (JSON)"), area,
    el("button", { type: "button", class: "primary", onclick: async () => {
      try {
        await api(`threads/${thread.view.thread}/answer`, { gate: gate.gate, answer: JSON.parse(area.value) });
        banner(null);
      } catch (e) { banner(e.message ? e : { message: String(e) }); }
      await refresh(thread.view.thread, true);
    } }, "Answer"));
  return f;
}

function nodeDetails(thread) {
  const { view } = thread;
  const name = state.selected;
  if (!name) return el("p", { class: "hint" }, "Select a node in the graph to see its value, error and usage.");
  const row = view.nodes.find((n) => n.node === name);
  const reads = view.resources.filter((r) => r.by.includes(name));
  const heals = view.heals.filter((h) => h.producer === name || h.record.by_node === name);
  return el("div", { class: "details", "data-node": name },
    el("h3", {}, name),
    row ? el("dl", {},
      el("dt", {}, "state"), el("dd", {}, row.state),
      el("dt", {}, "time"), el("dd", {}, duration(row.ms)),
      el("dt", {}, "generation · tries · crashes"), el("dd", {}, `${row.generation} · ${row.tries} · ${row.crash_count}`),
      row.usage ? [el("dt", {}, "model calls"), el("dd", { class: "usage" }, usageText(row.usage))] : null,
      row.usage ? [el("dt", {}, "cost"), el("dd", { class: "cost" }, dollars(row.usage))] : null,
      row.error ? [el("dt", {}, "error"), el("dd", { class: "error" }, `${row.error.code}: ${row.error.message}`)] : null,
    ) : el("p", {}, "not run yet"),
    reads.length ? el("div", {}, el("h4", {}, "reads"), el("ul", {}, reads.map((r) => el("li", {}, `${r.uri} · ${r.fetches} fetch(es), ${r.cache_hits} cache hit(s), ${r.bytes} bytes`)))) : null,
    heals.length ? el("div", {}, el("h4", {}, "links healed"), el("ul", {}, heals.map((h) => el("li", {}, `${h.record.from_uri} → ${h.record.to.uri}`)))) : null,
    row && row.value !== null && row.value !== undefined ? el("div", {}, el("h4", {}, "value"), el("pre", {}, JSON.stringify(row.value, null, 2))) : null);
}

function render(thread) {
  const { view } = thread;
  state.thread = thread;
  const main = document.getElementById("main");
  document.getElementById("where").textContent = view.pipeline;
  const nodeNames = thread.graph ? thread.graph.nodes.map((n) => n.name) : [];
  const rerun = el("select", { class: "rerun-node" }, nodeNames.map((n) => el("option", { value: n, selected: n === state.selected }, n)));
  const act = async (path, body) => {
    try { await api(`threads/${view.thread}/${path}`, body); banner(null); } catch (e) { banner(e); }
    await refresh(view.thread, true);
  };
  const head = el("section", { class: "summary" },
    el("h2", {}, view.thread, " ", badge(view.status)),
    el("p", {}, `${view.pipeline} · ${view.attempts} attempt${view.attempts === 1 ? "" : "s"} · created ${time(view.created_ms)} · updated ${time(view.updated_ms)}`),
    el("p", { class: "cost-total" }, "cost ", el("strong", { class: "thread-cost" }, dollars(view.usage)), view.usage.model_calls ? ` · ${usageText(view.usage)}` : ""),
    view.error ? el("p", { class: "error" }, `${view.error.code}: ${view.error.message}`) : null,
    el("div", { class: "actions" },
      el("button", { class: "resume", onclick: () => act("resume", {}) }, "Resume"),
      el("button", { class: "cancel", onclick: () => act("cancel", {}) }, "Cancel"),
      el("span", {}, " run again from ", rerun, " ",
        el("button", { class: "rerun", onclick: () => act("resume", { rerun_from: [rerun.value] }) }, "Rerun"))));
  const gates = view.gates.filter((g) => g.state === "pending");
  const gateSection = gates.length ? el("section", { class: "gates" }, el("h3", {}, "waiting for an answer"),
    gates.map((g) => thread.forms[g.gate] ? gateForm(thread, g, thread.forms[g.gate]) : jsonGate(thread, g))) : null;
  const graphSection = thread.graph ? el("section", { class: "graph-box" }, drawGraph(thread)) :
    el("p", { class: "error" }, thread.plan_error ? thread.plan_error.message : "the plan cannot be read");
  const events = thread.events || [];
  main.replaceChildren(head, gateSection || "", el("div", { class: "split" },
    el("div", {}, graphSection, el("h3", {}, "timeline"), timeline(events)),
    el("aside", {}, nodeDetails(thread))),
    el("section", { class: "events" }, el("h3", {}, `events (${events.length})`),
      el("ol", {}, events.slice(-200).map((e) => el("li", {}, `#${e.seq} ${time(e.ts)} ${e.type} ${e.node || e.gate || ""}`)))));
}

async function refresh(id, soon) {
  stopPolling();
  let thread;
  try {
    thread = await api("threads/" + encodeURIComponent(id));
  } catch (e) {
    banner(e);
    return;
  }
  if (location.hash !== "#/t/" + id) return;
  render(thread);
  const live = ["running", "queued", "stale"].includes(thread.view.status);
  if (live || soon) state.timer = setTimeout(() => refresh(id, false), live ? 700 : 1500);
}

// ---- routes -------------------------------------------------------------------------------

function route() {
  const hash = location.hash || "#/";
  const token = hash.match(/token=([^&]+)/);
  if (token) {
    sessionStorage.setItem("pipec-ui-token", decodeURIComponent(token[1]));
    history.replaceState(null, "", location.pathname + "#/");
    return route();
  }
  state.token = sessionStorage.getItem("pipec-ui-token");
  const thread = hash.match(/^#\/t\/([0-9A-Za-z]+)/);
  if (thread) {
    state.selected = null;
    refresh(thread[1], false);
  } else {
    const q = hash.indexOf("?");
    showThreads(new URLSearchParams(q >= 0 ? hash.slice(q + 1) : ""));
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);
