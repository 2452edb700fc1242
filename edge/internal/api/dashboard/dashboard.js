// The ops dashboard. It reads the edge's admin routes every REFRESH_MS with
// the admin token the operator signs in with (kept in this tab's
// sessionStorage only), and changes a sale's admission only after the
// operator confirms. Times and rates come from the edge's clock
// (overview.node.time), never the device's.
"use strict";

const REFRESH_MS = 1500;
// Admitted a second is measured over readings at least this far apart.
const RATE_WINDOW_S = 3;

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem("flashgate.token") || "",
  operator: sessionStorage.getItem("flashgate.operator") || "",
  selected: "",
  readings: {},   // sale id -> [{t, serving}], oldest first, from the edge's clock
  pending: null,  // a change the origin recorded that Redis has not taken yet
  overview: null,
  booksError: false,
};

function headers(extra) {
  return Object.assign({ Authorization: "Bearer " + state.token }, extra || {});
}

async function getJSON(path) {
  const r = await fetch(path, { headers: headers(), cache: "no-store" });
  if (r.status === 401) {
    signOut("The admin token was refused.");
    throw new Error("unauthorized");
  }
  if (!r.ok) throw new Error(path + " answered " + r.status);
  return r.json();
}

function signOut(message) {
  state.token = "";
  sessionStorage.removeItem("flashgate.token");
  $("main").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message || "";
  $("token").focus();
}

$("signin").addEventListener("submit", async (e) => {
  e.preventDefault();
  state.token = $("token").value.trim();
  state.operator = $("operator").value.trim();
  sessionStorage.setItem("flashgate.operator", state.operator);
  try {
    await getJSON("/admin/overview");
  } catch (err) {
    if (state.token) $("signin-error").textContent = "The edge could not be read: " + err.message;
    return;
  }
  sessionStorage.setItem("flashgate.token", state.token);
  $("token").value = "";
  start();
});

function start() {
  $("signin").hidden = true;
  $("main").hidden = false;
  refresh();
}

let timer = 0;
async function refresh() {
  clearTimeout(timer);
  const banners = [];
  try {
    state.overview = await getJSON("/admin/overview");
  } catch (err) {
    if (!state.token) return;
    banners.push(["bad", "This edge does not answer (" + err.message + "): nothing below is current."]);
    renderBanners(banners);
    timer = setTimeout(refresh, REFRESH_MS);
    return;
  }
  const ov = state.overview;
  record(ov);
  if (!state.selected && ov.sales.length) state.selected = ov.sales[0].sale_id;
  renderNode(ov.node);
  renderSales(ov);
  renderNodes(ov.nodes, banners);
  if (!ov.node.redis_ok) {
    banners.push(["bad", "Redis is unreachable from this edge: the line does not move, and shoppers are told to wait."]);
  }
  if (!ov.node.origin_ok) {
    banners.push(["bad", "The origin is unreachable from this edge: the sales' state shown here is getting old."]);
  }
  for (const id of ov.node.stale_sales) {
    banners.push(["warn", "Sale " + id + ": this edge's view of it is stale; its shoppers are told to wait."]);
  }
  await refreshSale(banners);
  pendingBanner(banners);
  renderBanners(banners);
  timer = setTimeout(refresh, REFRESH_MS);
}

// record keeps each sale's now_serving readings of the last minute.
function record(ov) {
  const t = Date.parse(ov.node.time) / 1000;
  for (const s of ov.sales) {
    if (!s.admission) continue;
    const r = (state.readings[s.sale_id] = state.readings[s.sale_id] || []);
    r.push({ t, serving: s.admission.now_serving });
    while (r.length > 1 && t - r[0].t > 60) r.shift();
  }
}

// measured is the sale's admitted-a-second over the last RATE_WINDOW_S or
// more, or null before there are readings that far apart.
function measured(id) {
  const r = state.readings[id] || [];
  const last = r[r.length - 1];
  for (let i = r.length - 2; i >= 0; i--) {
    if (last.t - r[i].t >= RATE_WINDOW_S) return (last.serving - r[i].serving) / (last.t - r[i].t);
  }
  return null;
}

function renderNode(n) {
  const parts = ["Edge " + (n.ready ? "ready" : "NOT ready"), "edge time " + n.time.replace("T", " ").replace(/\..*Z$/, "Z")];
  $("node").textContent = parts.join(" · ");
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

const fmt = new Intl.NumberFormat("en");

// A node that has not written itself for this long is silent.
const SILENT_S = 5;

function renderNodes(nodes, banners) {
  const body = $("nodes").tBodies[0];
  body.replaceChildren();
  if (!nodes) {
    const tr = document.createElement("tr");
    cell(tr, "The roster is in Redis, which this edge cannot read now.").colSpan = 5;
    body.appendChild(tr);
    return;
  }
  for (const n of nodes) {
    const tr = document.createElement("tr");
    const silent = n.age_s > SILENT_S;
    cell(tr, n.id + (n.this ? " (this one)" : ""));
    cell(tr, silent ? "silent" : n.ready ? "yes" : "NO", !silent && n.ready ? "" : "paused");
    cell(tr, n.origin_ok ? "reached" : "NOT reached", n.origin_ok ? "" : "paused");
    cell(tr, n.redis_ok ? "reached" : "NOT reached", n.redis_ok ? "" : "paused");
    cell(tr, Math.round(n.age_s) + " s ago", "num");
    body.appendChild(tr);
    if (silent) banners.push(["warn", "Edge node " + n.id + " has not been heard from for " + Math.round(n.age_s) + " s."]);
  }
}

function renderSales(ov) {
  const body = $("sales").tBodies[0];
  body.replaceChildren();
  for (const s of ov.sales) {
    const tr = document.createElement("tr");
    tr.tabIndex = 0;
    tr.dataset.sale = s.sale_id;
    if (s.sale_id === state.selected) tr.className = "selected";
    const a = s.admission;
    cell(tr, s.name + " (" + s.sale_id + ")");
    cell(tr, s.sold_out ? "sold out" : s.status);
    cell(tr, a ? fmt.format(a.queue_length) : "—", "num");
    cell(tr, a ? fmt.format(a.now_serving) : "—", "num");
    cell(tr, a ? fmt.format(a.rate_per_s) + " /s" : "—", "num");
    const m = measured(s.sale_id);
    cell(tr, m === null ? "…" : fmt.format(Math.round(m * 10) / 10), "num");
    cell(tr, fmt.format(s.available), "num");
    const tuned = a && a.autotune && a.autotune.on ? ", tuning itself" : "";
    const adm = cell(tr, a ? (a.paused ? "PAUSED" : "running") + tuned : "unknown");
    if (a && a.paused) adm.className = "paused";
    const pick = () => { state.selected = s.sale_id; refresh(); };
    tr.addEventListener("click", pick);
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") pick(); });
    body.appendChild(tr);
  }
}

async function refreshSale(banners) {
  const s = (state.overview.sales || []).find((x) => x.sale_id === state.selected);
  $("sale").hidden = !s;
  if (!s) return;
  $("sale-title").textContent = s.name + " (" + s.sale_id + ")";
  const rate = $("rate");
  if (document.activeElement !== rate && s.admission) rate.placeholder = String(s.admission.rate_per_s);
  $("pause").hidden = !s.admission || s.admission.paused;
  $("resume").hidden = !s.admission || !s.admission.paused;
  const at = s.admission && s.admission.autotune;
  $("autotune-off").hidden = !(at && at.on);
  $("autotune-state").textContent = at && at.on
    ? "The rate tunes itself between " + at.min_rate_per_s + " and " + at.max_rate_per_s +
      " shoppers a second, from the back end's latency, errors and backlog; a rate set by hand stops it."
    : "The rate is set by hand.";
  const id = encodeURIComponent(s.sale_id);
  try {
    const [books, changes] = await Promise.all([
      getJSON("/admin/sales/" + id + "/books"),
      getJSON("/admin/sales/" + id + "/changes"),
    ]);
    renderBooks(books, banners);
    renderChanges(changes.changes);
  } catch (err) {
    banners.push(["bad", "The origin does not answer this edge (" + err.message + "): stock and changes are not current."]);
  }
  renderFairness(state.overview.counters);
}

function renderBooks(b, banners) {
  const body = $("books").tBodies[0];
  body.replaceChildren();
  for (const k of b.skus) {
    const tr = document.createElement("tr");
    cell(tr, k.sku);
    cell(tr, fmt.format(k.total), "num");
    cell(tr, fmt.format(k.redis.available), "num");
    cell(tr, fmt.format(k.redis.held), "num");
    cell(tr, fmt.format(k.redis.sold), "num");
    const drift = k.drift.available || k.drift.held || k.drift.sold;
    cell(tr, drift ? [k.drift.available, k.drift.held, k.drift.sold].join(" / ") : "none", "num");
    cell(tr, fmt.format(k.pending_intents) + " intents", "num");
    body.appendChild(tr);
  }
  const losses = b.redis_losses || [];
  const open = losses.find((l) => !l.rebuilt_at);
  if (open) {
    banners.push(["warn", "Redis lost this sale's state (" + open.kind + "): a rebuild from Postgres is running; admission is paused until it ends."]);
  }
  $("durability").textContent = "Order writer behind by " + (Math.round(b.writer_lag_s * 10) / 10) + " s · " +
    "reservations restored after Redis losses: " + b.reservations_restored +
    " · reservations lost: " + b.reservations_lost + " · Redis losses: " + losses.length;
}

function renderFairness(c) {
  const parts = [];
  for (const [k, v] of Object.entries(c).sort()) {
    if (k.startsWith("challenges.") || k.startsWith("tarpit_") || k === "rejections.rate_limited" || k === "joins_total") {
      parts.push(k.replace(/_total$/, "").replace(".", " ") + ": " + fmt.format(v));
    }
  }
  $("fairness").textContent = parts.length ? parts.join(" · ") : "No fairness counters yet.";
}

function describe(c) {
  const b = c.before, a = c.after, what = [];
  if (b.rate_per_s !== a.rate_per_s) what.push("rate " + b.rate_per_s + " → " + a.rate_per_s + " /s");
  if (b.paused !== a.paused) what.push(a.paused ? "paused" : "resumed");
  if (b.challenge_bits !== a.challenge_bits) what.push("proof of work " + b.challenge_bits + " → " + a.challenge_bits + " bits");
  if (b.autotune !== a.autotune) what.push(a.autotune ? "tuning itself" : "tuning stopped");
  return what.length ? what.join(", ") : "no change (" + a.rate_per_s + " /s, " + (a.paused ? "paused" : "running") + ")";
}

function renderChanges(list) {
  const body = $("changes").tBodies[0];
  body.replaceChildren();
  for (const c of list) {
    const tr = document.createElement("tr");
    cell(tr, c.at.replace("T", " ").replace(/\..*Z$/, "Z"));
    cell(tr, c.actor);
    cell(tr, describe(c));
    body.appendChild(tr);
  }
  if (!list.length) {
    const tr = document.createElement("tr");
    cell(tr, "No admission changes yet.").colSpan = 3;
    body.appendChild(tr);
  }
}

// pendingBanner shows a change the origin recorded but Redis has not taken,
// until this edge's reading of the sale shows it.
function pendingBanner(banners) {
  const p = state.pending;
  if (!p) return;
  const s = state.overview.sales.find((x) => x.sale_id === p.sale);
  const a = s && s.admission;
  const done = a && (p.change.paused === undefined || a.paused === p.change.paused) &&
    (p.change.rate_per_s === undefined || a.rate_per_s === p.change.rate_per_s);
  if (done) {
    state.pending = null;
    return;
  }
  banners.push(["warn", "Recorded, not yet in effect: " + p.text.replace(/\.$/, "") +
    ". The edges put it into Redis as soon as they reach it."]);
}

function renderBanners(list) {
  const box = $("banners");
  box.replaceChildren();
  for (const [kind, text] of list) {
    const div = document.createElement("div");
    div.className = "banner " + kind;
    div.setAttribute("role", kind === "bad" ? "alert" : "status");
    div.textContent = text;
    box.appendChild(div);
  }
}

// confirm asks the operator to confirm text; resolves true or false.
function confirmChange(text) {
  return new Promise((resolve) => {
    const d = $("confirm");
    $("confirm-text").textContent = text;
    d.returnValue = "";
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
    d.showModal();
    $("confirm-ok").focus();
  });
}

async function change(body, text) {
  const sale = state.selected;
  if (!(await confirmChange(text + " Confirm?"))) return;
  const h = headers({ "Content-Type": "application/json" });
  if (state.operator) h["X-Operator"] = state.operator;
  let r;
  try {
    r = await fetch("/admin/sales/" + encodeURIComponent(sale) + "/admission", {
      method: "PUT", headers: h, body: JSON.stringify(body),
    });
  } catch (err) {
    renderBanners([["bad", "The change was not sent (" + err.message + "): nothing changed."]]);
    return;
  }
  if (r.status === 202) state.pending = { sale, change: body, text };
  if (r.status === 503) {
    renderBanners([["bad", "The origin could not be reached: nothing changed. Try again."]]);
    return;
  }
  if (r.status >= 400) {
    const e = await r.json().catch(() => ({}));
    renderBanners([["bad", "Refused: " + (e.message || r.status)]]);
    return;
  }
  refresh();
}

$("rate-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = Number($("rate").value);
  const s = state.overview.sales.find((x) => x.sale_id === state.selected);
  const from = s && s.admission ? s.admission.rate_per_s : "?";
  change({ rate_per_s: v }, "Change the admission rate of " + state.selected + " from " + from + " to " + v + " shoppers a second.")
    .then(() => { $("rate").value = ""; });
});
$("autotune-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const lo = Number($("autotune-min").value), hi = Number($("autotune-max").value);
  change({ autotune: true, autotune_min_rate_per_s: lo, autotune_max_rate_per_s: hi },
    "Let the admission rate of " + state.selected + " tune itself between " + lo + " and " + hi + " shoppers a second.");
});
$("autotune-off").addEventListener("click", () => {
  const s = state.overview.sales.find((x) => x.sale_id === state.selected);
  const rate = s && s.admission ? s.admission.rate_per_s : 0;
  change({ rate_per_s: rate }, "Stop tuning " + state.selected + " and keep its rate at " + rate + " shoppers a second.");
});
$("pause").addEventListener("click", () =>
  change({ paused: true }, "Pause admission to " + state.selected + ": nobody more is let in until you resume."));
$("resume").addEventListener("click", () =>
  change({ paused: false }, "Resume admission to " + state.selected + " (it ramps up to the rate set)."));

$("operator").value = state.operator;
if (state.token) start(); else signOut("");
