// The Holdfast console: polls /api/status every second, looks things up through
// /api/lookup, and follows /api/events (server-sent events). No framework, no CDN.
"use strict";

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function bar(fill) {
  const pct = Math.max(0, Math.min(1, fill)) * 100;
  const b = el("span", { class: "bar" + (fill >= 0.9 ? " full" : fill >= 0.7 ? " warn" : "") });
  const inner = el("span");
  inner.style.width = pct.toFixed(1) + "%";
  b.append(inner);
  return b;
}

const percent = (f) => (f > 0 && f < 0.0001 ? "<0.01" : (f * 100).toFixed(f > 0 && f < 0.01 ? 2 : 1)) + "%";

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// The slot length (ms) from the last status: slots are counted from the Unix epoch.
let slotMs = 0;
const slotTime = (slot) => (slotMs && slot && Number(slot) ? new Date(Number(slot) * slotMs) : null);
const iso = (d) => d.toISOString().replace("T", " ");
function when(d) {
  if (!d) return "";
  const s = Math.round((d - Date.now()) / 1000);
  return iso(d) + (s > 0 ? " (in " + s + " s)" : s < 0 ? " (" + -s + " s ago)" : " (now)");
}

const memberText = (m) =>
  m.resource_id || (m.pool_id && m.pool_id + " ×" + (m.quantity || 0)) ||
  (m.range_id && m.range_id + " = " + (m.value ?? "?")) || (m.work && "work " + m.work.run_id + "/" + (m.work.name || "next")) || "";

// leaseText is a lease view as an operator reads it: times instead of slots.
function leaseText(l) {
  const lines = ["lease " + l.lease_id + " · " + (l.state || "?") + " · epoch " + (l.lease_epoch || "?") +
    (l.holder_id ? " · holder " + l.holder_id : "")];
  if (l.allocated_at) lines.push("  allocated  " + l.allocated_at.replace("T", " "));
  if (l.deadline_slot && (l.state === "reserved" || l.keepalive_slots)) lines.push("  expires    " + when(slotTime(l.deadline_slot)));
  if (l.retire_after_slot) lines.push("  retires    " + when(slotTime(l.retire_after_slot)));
  lines.push("  members    " + (l.members || []).map(memberText).join(", "));
  const labels = Object.entries(l.labels || {}).sort().map(([k, v]) => k + "=" + v);
  if (labels.length) lines.push("  labels     " + labels.join(", "));
  return lines.join("\n");
}

// lookupText is a lookup's answer: its code, then what it found.
function lookupText(r) {
  const out = [r.code + (r.message ? ": " + r.message : "") + (r.applied_lsn ? " · applied lsn " + r.applied_lsn : "")];
  if (r.value_state) out.push("value " + r.value_state);
  if (r.lease) out.push(leaseText(r.lease));
  for (const l of r.leases || []) out.push(leaseText(l));
  if (r.leases && !r.leases.length) out.push("no live leases");
  if (r.next_cursor || r.truncated) out.push("(more: narrow the lookup)");
  if (r.error) out.push(r.error);
  return out.join("\n");
}

function renderStatus(s) {
  slotMs = Number(s.slot_ms) || 0;
  $("#whoami").textContent = (s.cluster ? "cluster node " + s.node : "single process " + s.node) + " · " +
    "version " + s.version + " · slot " + s.slot_ms + " ms";
  const p = $("#problem");
  p.hidden = !s.problem;
  p.textContent = s.problem || "";
  fill($("#nodes tbody"), (s.nodes || []).map((n) => el("tr", { "data-node": n.node },
    el("td", {}, n.node || "(this process)"),
    el("td", {}, (n.shards || []).join(", ") || "—"),
    el("td", { class: n.lapsing || n.lost ? "lapsing" : "" }, !s.cluster ? "—" :
      n.lost ? "lost " + Math.round((n.lost_ago_ms || 0) / 1000) + " s ago, held " + ((n.held || []).join(", ") || "nothing") :
      n.lapsing ? "lapsing, " + n.renewal_age_ms + " ms behind" : n.renewal_age_ms + " ms behind the freshest"))));
  fill($("#shards tbody"), s.shards.map((sh) => {
    const owner = sh.owner || (sh.here ? "this process" : "no owner");
    return el("tr", { "data-shard": sh.shard },
      el("td", { class: "num" }, sh.shard),
      el("td", { class: sh.owner || sh.here ? "owner" : "owner halted" }, owner),
      el("td", { class: "num" }, sh.applied_lsn),
      el("td", { class: "num" }, sh.here ? (sh.writes_per_sec || 0).toFixed(1) : "—"),
      el("td", { class: "num" }, sh.here ? sh.queue_depth || 0 : "—"),
      el("td", { class: "num" + (sh.expiry_lag_ms > 5000 ? " halted" : "") }, sh.here ? (sh.expiry_lag_ms || 0) + " ms" : "—"),
      el("td", { class: "num" }, sh.leases ? sh.leases.reserved + " / " + sh.leases.active + " / " + sh.leases.revoking : "—"),
      sh.halted ? el("td", { class: "halted" }, "HALTED") :
        sh.fullest_table ? el("td", {}, bar(sh.fullest_fill), sh.fullest_table + " " + percent(sh.fullest_fill)) : el("td", {}, "—"));
  }));
  const fills = (rows) => rows.map((o) => el("tr", { "data-id": o.tenant + "/" + o.id },
    el("td", {}, o.tenant), el("td", {}, o.id),
    el("td", { class: "num" }, o.used + " / " + (o.size === 0 ? "2^64" : o.size)),
    el("td", { class: "fill" }, bar(o.fill), percent(o.fill))));
  fill($("#pools tbody"), fills(s.fullest_pools || []));
  fill($("#ranges tbody"), fills(s.fullest_ranges || []));
}

async function poll() {
  try {
    const r = await fetch("/api/status", { cache: "no-store" });
    renderStatus(await r.json());
  } catch (e) {
    const p = $("#problem");
    p.hidden = false;
    p.textContent = "status: " + e;
  }
  setTimeout(poll, 1000);
}

$("#lookup").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const kind = $("#lookup-kind").value;
  const q = $("#lookup-q").value.trim();
  const params = new URLSearchParams();
  if ($("#lookup-tenant").value.trim()) params.set("tenant", $("#lookup-tenant").value.trim());
  if (kind === "range") {
    const [range, value] = q.split(/\s+/);
    params.set("range", range || "");
    params.set("value", value || "");
  } else {
    params.set(kind, q);
  }
  const out = $("#lookup-result");
  out.textContent = "…";
  try {
    const r = await fetch("/api/lookup?" + params, { cache: "no-store" });
    const reply = await r.json();
    out.replaceChildren(lookupText(reply), el("details", {}, el("summary", {}, "the reply as sent"),
      JSON.stringify(reply, null, 2)));
    out.className = "";
  } catch (e) {
    out.textContent = String(e);
  }
});

let source = null;
function follow(tenant) {
  if (source) source.close();
  const list = $("#events");
  list.replaceChildren();
  source = new EventSource("/api/events" + (tenant ? "?tenant=" + encodeURIComponent(tenant) : ""));
  $("#tail-state").textContent = "following " + (tenant || "every tenant");
  source.onmessage = (m) => {
    const d = JSON.parse(m.data);
    const e = d.event || {};
    const members = ((e.lease && e.lease.members) || []).map(memberText);
    const what = [e.event, e.lease && e.lease.lease_id, e.lease && e.lease.state, e.lease && e.lease.holder_id,
      members.join(","), e.resource && e.resource.resource_id, e.pool && e.pool.pool_id, e.range && e.range.range_id]
      .filter(Boolean).join(" ");
    const at = slotTime(e.slot);
    list.prepend(el("li", { "data-subject": d.subject, class: d.recent ? "recent" : "" },
      el("time", {}, at ? iso(at).slice(11) : "slot " + (e.slot || "?")),
      " · lsn " + (e.lsn || "?") + " · shard " + (e.shard ?? "?") + " · " + d.subject + (what ? " · " + what : "")));
    while (list.children.length > 200) list.lastChild.remove();
  };
  source.addEventListener("skipped", (m) => {
    list.prepend(el("li", { class: "muted" }, m.data + " events skipped (this page fell behind)"));
  });
  source.onerror = () => { $("#tail-state").textContent = "reconnecting…"; };
  source.onopen = () => { $("#tail-state").textContent = "following " + (tenant || "every tenant"); };
}
$("#tail").addEventListener("submit", (ev) => {
  ev.preventDefault();
  follow($("#tail-tenant").value.trim());
});

poll();
// The live tail opens once the page has loaded: a stream opened before keeps the page
// loading for ever (a headless browser's --screenshot waits for the load event).
if (document.readyState === "complete") follow("");
else window.addEventListener("load", () => setTimeout(() => follow(""), 0));
