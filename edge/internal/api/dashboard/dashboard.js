// The ops dashboard. It reads the edge's admin routes every REFRESH_MS with
// the admin token the operator signs in with (kept in this tab's
// sessionStorage only), and changes a sale's admission only after the
// operator confirms. Times and rates come from the edge's clock
// (overview.node.time), never the device's.
"use strict";

const REFRESH_MS = 1500;
// Rates (admitted, reserve answers, the origin's failures a second) are
// measured over overviews at least this far apart.
const RATE_WINDOW_S = 3;

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem("flashgate.token") || "",
  operator: sessionStorage.getItem("flashgate.operator") || "",
  selected: "",
  history: [],    // the overviews of the last minute, oldest first: [{t, ov}], t by the edge's clock
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

// refresh reads the edge and shows it, then comes again in REFRESH_MS for
// as long as the operator is signed in, whatever went wrong: a page that
// stopped refreshing would look current while it is not.
let timer = 0;
async function refresh() {
  clearTimeout(timer);
  try {
    await show();
  } catch (err) {
    renderBanners([["bad", "This page failed to show what the edge answered (" + ((err && err.message) || err) +
      "): what is below may be old. It keeps trying."]]);
  } finally {
    clearTimeout(timer); // one timer, however many refreshes ran at once
    if (state.token) timer = setTimeout(refresh, REFRESH_MS);
  }
}

// show reads the overview and what the selected sale needs, and renders
// them with their banners.
async function show() {
  const banners = [];
  try {
    state.overview = await getJSON("/admin/overview");
  } catch (err) {
    if (!state.token) return;
    banners.push(["bad", "This edge does not answer (" + err.message + "): nothing below is current."]);
    renderBanners(banners);
    return;
  }
  const ov = state.overview;
  record(ov);
  if (!state.selected && ov.sales.length) state.selected = ov.sales[0].sale_id;
  renderNode(ov.node);
  renderSales(ov);
  renderReserves(ov);
  renderOrigin(ov, banners);
  renderNodes(ov.nodes, banners);
  renderRestores(ov.counters);
  for (const s of ov.sales) {
    if (s.rebuilding) {
      banners.push(["bad", "Redis lost the line of sale " + s.sale_id + "; rebuilding from the origin. " +
        "Its shoppers' joins and polls are told to wait until it is back."]);
    }
  }
  if (!ov.node.redis_ok) {
    banners.push(["bad", "Redis is unreachable from this edge: the line does not move, and shoppers are told to wait."]);
  }
  if (!ov.node.origin_ok) {
    banners.push(["bad", "The origin is unreachable from this edge: the sales' state shown here is getting old."]);
  }
  for (const id of ov.node.stale_sales) {
    banners.push(["warn", "Sale " + id + ": this edge's view of it is stale; its shoppers are told to wait."]);
  }
  await Promise.all([refreshSale(banners), refreshAdminChanges(banners)]);
  pendingBanner(banners);
  renderBanners(banners);
}

// record keeps the overviews of the last minute: the edge's counts are
// cumulative, and rates are their differences over its clock.
function record(ov) {
  const t = Date.parse(ov.node.time) / 1000;
  const h = state.history;
  h.push({ t, ov });
  while (h.length > 1 && t - h[0].t > 60) h.shift();
}

// perSecond is how fast value(overview) grew over the last RATE_WINDOW_S or
// more, or null before there are overviews that far apart, when one of
// them lacks it, or when it went down (the edge restarted).
function perSecond(value) {
  const h = state.history;
  const last = h[h.length - 1];
  for (let i = h.length - 2; i >= 0; i--) {
    if (last.t - h[i].t < RATE_WINDOW_S) continue;
    const then = value(h[i].ov), now = value(last.ov);
    if (then === undefined || now === undefined || now < then) return null;
    return (now - then) / (last.t - h[i].t);
  }
  return null;
}

// measured is the sale's admitted-a-second, or null (perSecond).
function measured(id) {
  return perSecond((ov) => {
    const s = ov.sales.find((x) => x.sale_id === id);
    return s && s.admission ? s.admission.now_serving : undefined;
  });
}

function rateText(r) {
  return r === null ? "…" : fmt.format(Math.round(r * 10) / 10);
}

// when is an RFC 3339 time as the page shows it: to the second, UTC.
function when(iso) {
  return iso.replace("T", " ").replace(/\..*Z$/, "Z");
}

function renderNode(n) {
  const parts = ["Edge " + (n.ready ? "ready" : "NOT ready"), "edge time " + when(n.time)];
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
    cell(tr, rateText(m), "num");
    cell(tr, fmt.format(s.available), "num");
    const tuned = a && a.autotune && a.autotune.on ? ", tuning itself" : "";
    const adm = cell(tr, s.rebuilding ? "REBUILDING" : a ? (a.paused ? "PAUSED" : "running") + tuned : "unknown");
    if (s.rebuilding || (a && a.paused)) adm.className = "paused";
    const pick = () => { state.selected = s.sale_id; refresh(); };
    tr.addEventListener("click", pick);
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") pick(); });
    body.appendChild(tr);
  }
}

// countRow adds a row of a count, value(overview): as it stands, and a
// second over the last few seconds.
function countRow(body, label, value) {
  const tr = document.createElement("tr");
  cell(tr, label);
  cell(tr, fmt.format(value(state.overview)), "num");
  cell(tr, rateText(perSecond(value)), "num");
  body.appendChild(tr);
  return tr;
}

// RESERVE_ANSWERS name the reserve answers by HTTP status, as the edge
// counts them (its own and the origin's, passed on: docs/API.md); any
// other status is listed as it is.
const RESERVE_ANSWERS = [
  ["201", "Reserved"],
  ["200", "Already held: the same reservation again"],
  ["409", "Sold out, or the sale over"],
  ["403", "Limit reached"],
  ["429", "Rate limited"],
  ["401", "Token refused"],
  ["503", "Please wait, from this edge or the origin"],
];

function renderReserves(ov) {
  const body = $("reserves").tBodies[0];
  body.replaceChildren();
  const named = new Set(RESERVE_ANSWERS.map(([status]) => status));
  const others = Object.keys(ov.reserves.answers).filter((status) => !named.has(status)).sort();
  for (const [status, label] of RESERVE_ANSWERS.concat(others.map((status) => [status, "Other"]))) {
    const tr = countRow(body, label + " (" + status + ")", (o) => o.reserves.answers[status] || 0);
    tr.dataset.status = status;
  }
}

// ORIGIN_OUTCOMES name how a reserve sent on to the origin ended.
const ORIGIN_OUTCOMES = [
  ["ok", "Answered"],
  ["error", "Failed: connection refused or broken, or timed out"],
  ["busy", "Not sent: every connection to it busy"],
];

function renderOrigin(ov, banners) {
  const body = $("origin").tBodies[0];
  body.replaceChildren();
  for (const [outcome, label] of ORIGIN_OUTCOMES) {
    countRow(body, label, (o) => o.reserves.origin[outcome] || 0).dataset.outcome = outcome;
  }
  const failing = perSecond((o) => (o.reserves.origin.error || 0) + (o.reserves.origin.busy || 0));
  if (failing) {
    banners.push(["warn", "The origin fails " + rateText(failing) + " reserves a second from this edge " +
      "(connection failed, timed out, or every connection busy): their shoppers are told to wait."]);
  }
  // Timed by this edge from before it waits for a free connection to the
  // origin: the round trip as the edge sees it, its own queue included.
  const l = ov.reserves.latency;
  const window = l ? Math.round(l.window_s) + " s" : "";
  const what = "Round trip to the origin as this edge sees it, including any wait for a free connection";
  $("latency").textContent = !l ? what + ": measuring…"
    : !l.count ? "The origin answered no reserve in the last " + window + "."
    : what + ", over the last " + window + " (" + fmt.format(l.count) + " answers): p50 " + ms(l.p50_s) +
      " · p99 " + ms(l.p99_s) + ".";
}

// ms is a time in seconds as milliseconds, to a tenth below 10 ms.
function ms(s) {
  const v = s * 1000;
  return fmt.format(v < 10 ? Math.round(v * 10) / 10 : Math.round(v)) + " ms";
}

function renderRestores(c) {
  $("restores").textContent = "Lines this edge put into Redis from the origin's copy: " +
    fmt.format(c.line_restores_total || 0) + " (creating a sale's line counts as one); restores that failed: " +
    fmt.format(c["line_failures.restore"] || 0) + ".";
}

// renderLine says whether the sale's line is in Redis or being rebuilt,
// and when it last was.
function renderLine(s) {
  const p = $("line");
  p.className = s.rebuilding ? "paused" : "";
  const last = s.restored_at ? when(s.restored_at) + " (Redis's clock)" : "";
  if (!s.admission) {
    p.textContent = "This edge has not read the line yet.";
  } else if (s.rebuilding) {
    p.textContent = "REBUILDING: Redis lost this line; it is being restored from the origin's copy." +
      (last ? " The rebuild before: " + last + "." : "");
  } else if (last) {
    p.textContent = "In Redis. Last rebuilt from the origin's copy at " + last + ".";
  } else {
    p.textContent = "In Redis, never lost since it was created.";
  }
}

async function refreshSale(banners) {
  const s = (state.overview.sales || []).find((x) => x.sale_id === state.selected);
  $("sale").hidden = !s;
  if (!s) return;
  $("sale-title").textContent = s.name + " (" + s.sale_id + ")";
  renderLine(s);
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
    banners.push(["warn", "Redis lost this sale's stock (" + open.kind + "): the origin is rebuilding it from Postgres " +
      "and the reserve journal; reserves are answered please_wait until it ends."]);
  }
  $("durability").textContent = "Order writer behind by " + (Math.round(b.writer_lag_s * 10) / 10) + " s · " +
    "reservations restored after Redis losses: " + b.reservations_restored +
    " · reservations lost: " + b.reservations_lost + " · Redis losses of the stock: " + losses.length;
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
    cell(tr, when(c.at));
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

// refreshAdminChanges lists the admin changes that are not a sale's
// admission: the defences and tarpit releases, each recorded at the origin
// before it was made.
async function refreshAdminChanges(banners) {
  let list;
  try {
    list = (await getJSON("/admin/changes")).changes;
  } catch (err) {
    banners.push(["warn", "The record of defence changes cannot be read (" + err.message + ")."]);
    return;
  }
  if (!Array.isArray(list)) {
    banners.push(["warn", "The record of defence changes came back in a form this page does not know."]);
    return;
  }
  const body = $("admin-changes").tBodies[0];
  body.replaceChildren();
  for (const c of list) {
    const tr = document.createElement("tr");
    cell(tr, when(c.at));
    cell(tr, c.actor);
    cell(tr, describeAdmin(c));
    body.appendChild(tr);
  }
  if (!list.length) {
    const tr = document.createElement("tr");
    cell(tr, "No defence changes or tarpit releases yet.").colSpan = 3;
    body.appendChild(tr);
  }
}

// OUTCOMES name the second record of an admin change that did not plainly
// succeed, by the suffix of its what (docs/API.md, GET /admin/changes).
const OUTCOMES = [
  ["_failed", " — did not land"],
  ["_unknown", " — not known whether it landed: check the defences and the tarpit"],
];

// describeAdmin says what an admin change did: the defence settings that
// differ between before and after, or the account released.
function describeAdmin(c) {
  let what = String(c.what), outcome = "";
  for (const [suffix, text] of OUTCOMES) {
    if (what.endsWith(suffix)) {
      what = what.slice(0, -suffix.length);
      outcome = text;
      break;
    }
  }
  if (what === "tarpit_release") {
    return "released " + (c.before ? c.before.account : "?") + " from the tarpit" + outcome;
  }
  if (what === "defences") {
    const diffs = [];
    diff(c.before || {}, c.after || {}, "", diffs);
    return "defences: " + (diffs.length ? diffs.join(", ") : "no change") + outcome;
  }
  return what + outcome;
}

// diff lists the leaves of two settings objects that differ, as
// "path: before → after", leaving out their version.
function diff(b, a, prefix, out) {
  for (const k of Object.keys(Object.assign({}, b, a)).sort()) {
    if (k === "version") continue;
    const x = b[k], y = a[k], path = prefix + k;
    if (x && y && typeof x === "object" && typeof y === "object") {
      diff(x, y, path + ".", out);
    } else if (JSON.stringify(x) !== JSON.stringify(y)) {
      out.push(path + ": " + JSON.stringify(x) + " → " + JSON.stringify(y));
    }
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
