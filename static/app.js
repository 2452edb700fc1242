// flashgate shopper page: sign in, join the line, wait for admission, reserve, watch the hold.
// Served as-is by the edge (no build step), so it is plain browser JavaScript with no dependencies.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  // The shop may hand over its token in the URL fragment (#user_token=…), which never reaches any server log.
  // It leaves the address at once, whatever becomes of it below, so that it stays in no history entry.
  const handed = new URLSearchParams(location.hash.slice(1)).get('user_token');
  if (handed) history.replaceState(null, '', location.pathname + location.search);
  const sale = new URLSearchParams(location.search).get('sale') || 'demo';
  const salePath = '/v1/sales/' + encodeURIComponent(sale);
  // Ids from the page's address become parts of API paths, and the shopper's token goes with those requests:
  // only the alphabet the servers use, so that a crafted `?sale=..` or `?order=..` cannot steer the page (and
  // the token) to another path.
  const validID = (s, max) => new RegExp('^[A-Za-z0-9_-]{1,' + max + '}$').test(s);
  if (!validID(sale, 64)) {
    $('sale-status').textContent = 'No such sale';
    $('notice').textContent = 'This link does not name a valid sale.';
    $('notice').hidden = false;
    return;
  }
  const MIN_POLL_MS = 1000; // never hammer the edge, whatever it answers

  // sessionStorage, not localStorage: tokens die with the tab, and a reload resumes where we were.
  const K = { user: 'fg.user_token', who: 'fg.user_id', queue: 'fg.queue.' + sale, res: 'fg.reservation.' + sale };
  const store = {
    get: (k) => { try { return sessionStorage.getItem(k); } catch (_) { return null; } },
    set: (k, v) => { try { v == null ? sessionStorage.removeItem(k) : sessionStorage.setItem(k, v); } catch (_) { /* private mode */ } },
  };

  let snap = null;        // last sale snapshot (with the challenge it publishes, if any)
  let admission = '';     // admission token, kept in memory only: it is single-use and short-lived
  let reserving = false;  // a reserve request is in flight
  let joining = false;    // a join request (or its retry) is pending
  let lineOver = '';      // 'closed' or 'sold_out' once the line says so for good
  let resv = null;        // current reservation
  let pollTimer = 0, pollGen = 0, resTimer = 0;
  let place = 0;          // our place while waiting in line (0: not known, as in the pre-queue before the draw)
  let preIndex = 0;       // our pre-queue index while our drawn place is not known and we can work it out
  let drawing = false;    // working the drawn place out
  let placeFromDraw = false, pace = null; // the place is our own reckoning: estimate the wait from now_serving's pace
  let proof = null;       // {challenge, solution}: the solved proof of work the next join carries
  let checks = 0;         // challenges met since the shopper pressed Join
  let checkFailed = false; // the last check gave up: the join button offers to try again
  let solver = null;      // {worker, stop} while the proof-of-work worker runs
  const keys = {};        // idempotency key per SKU, reused on retry so a retry can never reserve twice

  // A request that never answers (a half-dead connection, a stalled proxy) must not stop the page: after this
  // long it counts as a network problem, which every caller asks again. Longer than any answer the edge holds
  // on purpose (a snapshot watch: to the end of its second).
  const REQUEST_TIMEOUT_MS = 10000;
  const timeoutSignal = () => (typeof AbortSignal !== 'undefined' && AbortSignal.timeout ? AbortSignal.timeout(REQUEST_TIMEOUT_MS) : undefined);

  // One fetch wrapper so every answer has the same shape: {status, data, retry (Retry-After seconds)}.
  async function api(method, path, { token, user, body, queue, proof } = {}) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    if (queue) headers['X-Queue-Token'] = queue;
    if (proof) { headers['X-Challenge'] = proof.challenge; headers['X-Challenge-Solution'] = proof.solution; }
    if (user && store.get(K.user)) headers['X-User-Token'] = store.get(K.user);
    if (body) headers['Content-Type'] = 'application/json';
    try {
      // Personal answers must never be cached; the public snapshot keeps the default so the CDN can absorb
      // the crowd ('no-store' would add Cache-Control: no-cache to the request).
      const sent = performance.now();
      const signal = timeoutSignal();
      const r = await fetch(path, { method, headers, body: body && JSON.stringify(body), cache: token ? 'no-store' : 'default', signal });
      noteServerDate(r, sent, !!token || method !== 'GET');
      let data = {};
      try { data = await r.json(); } catch (e) {
        if (signal && signal.aborted) throw e; // the body never came: a network problem, not an empty answer
        /* else an empty or non-JSON body, e.g. from a proxy */
      }
      const ra = parseInt(r.headers.get('Retry-After'), 10), next = parseInt(r.headers.get('Flashgate-Next-At'), 10);
      return { status: r.status, data: data || {}, retry: ra > 0 ? ra : 0, nextAt: next > 0 ? next : 0 };
    } catch (_) {
      return { status: 0, data: { error: 'network', message: 'Network problem.' }, retry: 2 };
    }
  }
  // ---- the server's clock ----
  // Countdowns (the start, the end, a hold) follow the server's clock, not the device's, which may be minutes off.
  // Each answer's Date header (whole seconds) bounds the offset from performance.now() (monotonic: setting the
  // device's clock does not move it) to the server's time: when the answer arrived, the server's time was at least
  // Date (plus Age, from a cache); an answer made for this very request (personal or not a GET, and without Age)
  // was made after it was sent, so before Date + 1 s. The offset is the middle of the tightest bounds so far;
  // bounds that stop overlapping (the device slept, a clock was stepped) start afresh.
  const clockBounds = { lo: -Infinity, hi: Infinity };
  function noteServerDate(r, sentAt, fresh) {
    const date = Date.parse(r.headers.get('Date') || ''), age = parseInt(r.headers.get('Age'), 10) || 0;
    if (!Number.isFinite(date)) return; // e.g. an answer from a proxy without one
    const lo = date + age * 1000 - performance.now(), hi = fresh && !age ? date + 1000 - sentAt : Infinity;
    if (lo > clockBounds.hi || hi < clockBounds.lo) { clockBounds.lo = -Infinity; clockBounds.hi = Infinity; }
    clockBounds.lo = Math.max(clockBounds.lo, lo); clockBounds.hi = Math.min(clockBounds.hi, hi);
  }
  // serverNow is the server's time now, in ms since 1970: the device's clock until an answer has come.
  function serverNow() {
    const { lo, hi } = clockBounds;
    if (lo === -Infinity) return Date.now();
    return performance.now() + (hi === Infinity ? lo + 500 : (lo + hi) / 2);
  }

  const msg = (res) => res.data.message || res.data.error || 'Unexpected answer (HTTP ' + res.status + ').';
  const busy = (res) => res.status === 0 || res.status === 429 || res.status === 503;

  // The notice remembers who wrote it, so a success only clears its own message, not someone else's.
  let noticeFrom = '';
  function notice(text, from) { const n = $('notice'); n.textContent = text; n.hidden = !text; noticeFrom = text ? from : ''; }
  function clearNotice(from) { if (noticeFrom === from) notice('', ''); }
  // Busy answers (503 please_wait, 429) and lost connections: calmly say what happens next and when, and that a
  // place in line is kept; then the caller retries by itself, and its next good answer takes the notice away.
  function retryNotice(res, from) {
    const s = res.retry || 2;
    const lost = navigator.onLine === false ? 'You are offline' : 'Connection lost';
    const what = res.status === 0 ? lost + ' — reconnecting in ' + s + ' s…'
      : (res.status === 429 ? 'Too many requests' : 'The sale is very busy') + ' — please wait, trying again in ' + s + ' s.';
    const inLine = store.get(K.queue) && !(resv && (resv.status === 'held' || resv.status === 'paid'));
    notice(what + (inLine ? ' You keep your place in line.' : ''), from);
    return s * 1000;
  }

  const pad = (n) => String(n).padStart(2, '0');
  function clock(ms) {
    const s = Math.max(0, Math.floor(ms / 1000)), h = Math.floor(s / 3600);
    return (h ? h + ':' : '') + pad(Math.floor((s % 3600) / 60)) + ':' + pad(s % 60);
  }
  function price(s) {
    const amount = (s.price_minor || 0) / 100;
    try { return new Intl.NumberFormat(undefined, { style: 'currency', currency: s.currency }).format(amount); }
    catch (_) { return amount.toFixed(2) + ' ' + (s.currency || ''); }
  }
  // The account id is the JWT's `sub`; decoding (not verifying) it is enough to say who is signed in.
  function claimsOf(jwt) {
    try { return JSON.parse(atob(jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))) || {}; } catch (_) { return {}; }
  }
  const subOf = (jwt) => { const sub = claimsOf(jwt || '').sub; return typeof sub === 'string' ? sub : ''; };
  // randomUUID exists only in secure contexts (https, localhost); plain-http dev hosts get a v4 UUID by hand.
  const uuid = () => crypto.randomUUID ? crypto.randomUUID() : '10000000-1000-4000-8000-100000000000'
    .replace(/[018]/g, (c) => (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16));

  // ---- the pre-queue draw ----
  // At the start the pre-queue is shuffled, and the snapshot reveals the seed (docs/FAIRNESS.md). A page in the
  // pre-queue works its drawn place out itself from its index (its queue token's `pos`) rather than asking the
  // edge, so the whole pre-queue does not come back to the edge in the sale's first seconds only to hear it.
  // P(i) of `feistel-sha256-8`: 0 when the page cannot work it out (no WebCrypto off https and localhost, or a
  // draw too large for exact arithmetic here); the page then asks the edge as before.
  async function drawnPlace(seedHex, n, i) {
    if (!(crypto.subtle && /^([0-9a-f]{2}){1,55}$/.test(seedHex || '') && n >= 1 && n <= 2 ** 48 && i >= 1 && i <= n)) return 0;
    const seed = seedHex.match(/../g).map((b) => parseInt(b, 16));
    let bits = 2;
    while (2 ** bits < n) bits += 2;
    const half = 2 ** (bits / 2); // at most 2^24: halves and round values are exact 32-bit integers
    const msg = new Uint8Array(seed.length + 9), at = seed.length;
    msg.set(seed);
    const encrypt = async (x) => {
      let left = Math.floor(x / half), right = x % half;
      for (let r = 0; r < 8; r++) {
        const view = new DataView(msg.buffer);
        msg[at] = r; view.setUint32(at + 1, 0); view.setUint32(at + 5, right); // seed ‖ byte(r) ‖ uint64_be(R)
        const f = new DataView(await crypto.subtle.digest('SHA-256', msg)).getUint32(4) % half; // low bits of the first 8 bytes
        [left, right] = [right, (left ^ f) >>> 0];
      }
      return left * half + right;
    };
    let x = i - 1;
    do { x = await encrypt(x); } while (x >= n); // cycle-walking back into 1..n
    return x + 1;
  }
  const DRAW_BACKSTOP_MS = 10000; // how much later than told a pre-queue page asks, should the draw not show
  // When to ask for our status after a waiting answer: when told, but a pre-queue page that can work out its
  // place waits for the snapshot's draw instead of the poll it was told to make after the start: it asks
  // DRAW_BACKSTOP_MS after its told moment (keeping the edge's spread) should the draw not show by then.
  function waitingPoll(d, afterMs) {
    const claims = claimsOf(store.get(K.queue) || '');
    preIndex = d.pre_queue && !d.position && claims.pre && crypto.subtle ? (claims.pos || 0) : 0;
    const start = snap ? Date.parse(snap.starts_at) : NaN;
    if (!preIndex || !(serverNow() + afterMs >= start)) return afterMs; // before the start: as told
    return afterMs + DRAW_BACKSTOP_MS;
  }
  async function placeFromSnapshot() {
    const want = preIndex, d = snap.draw;
    drawing = true;
    const p = await drawnPlace(d.seed, d.pre_queue, want).catch(() => 0);
    drawing = false;
    // Signed out, rejoined or answered meanwhile (any answer but "waiting" ends the wait for the draw).
    if (preIndex !== want || admission || resv || lineOver) return;
    preIndex = 0;
    if (!p) return; // the backstop poll asks the edge
    placeFromDraw = true; pace = { t: Date.now(), ns: snap.now_serving };
    showQueue(ownAnswer(p));
    if (snap.now_serving >= place) { place = 0; startPolling(0); }
    // Our turn shows in the snapshot; the poll only backs that up, at a moment of 45–60 s our place fixes.
    else startPolling(45000 + 15 * (((p % 1000) * 2654435761) % 1000));
  }
  // Our own answer from the snapshot, with the wait at the pace now_serving has moved since we placed ourselves.
  function ownAnswer(p) {
    const dt = (Date.now() - pace.t) / 1000, rate = dt >= 2 ? (snap.now_serving - pace.ns) / dt : 0;
    return { state: 'waiting', position: p, now_serving: snap.now_serving,
      estimated_wait_s: rate > 0 ? Math.ceil(Math.max(0, p - snap.now_serving) / rate) : null };
  }

  // ---- the sale snapshot (cheap: served from edge memory and the CDN) ----
  // Read once a second: it is how a shopper far back in line hears "sold out" without any per-shopper call.
  // Each read is a watch of the second the last answer named (?at=, Flashgate-Next-At): the edge holds it
  // until that second ends or the sale has news, so the news comes as it happens, and the next read goes
  // out as the answer comes, never sooner than a second after the last one.
  const STATUS = { upcoming: 'Starting soon', open: 'On sale now', sold_out: 'Sold out', ended: 'Sale over' };
  let watchAt = 0;
  async function loadSale() {
    const sent = Date.now();
    const res = await api('GET', salePath + (watchAt ? '?at=' + watchAt : ''));
    let wait = snap && snap.final ? 30000 : Math.max(0, 1000 - (Date.now() - sent));
    watchAt = res.status === 200 && !res.data.final ? res.nextAt : 0;
    if (res.status === 200) {
      snap = res.data; clearNotice('sale'); renderSale();
      if (preIndex && !drawing && snap.draw && snap.draw.seed) placeFromSnapshot();
      if (placeFromDraw && place && snap.sold_out && snap.final) { // no poll is due soon to say so
        showQueue({ state: 'sold_out', final: true }); lineOver = 'sold_out'; stopPolling(); updateJoin();
      } else if (placeFromDraw && place) showQueue(ownAnswer(place));
      // The snapshot shows when our turn has come: ask for the admission now, not at the next poll (whose
      // poll_after_ms is the longest to wait, so the line need not ask every second while it moves slowly).
      if (place && snap.now_serving >= place) { place = 0; startPolling(0); }
      // A check for a sale that has ended or sold out for good would lead nowhere.
      if (solver && (snap.status === 'ended' || (snap.sold_out && snap.final))) { joining = false; endCheck(); updateJoin(); }
    }
    else if (!noticeFrom || noticeFrom === 'sale') { // never hide a queue or purchase message behind this one
      if (busy(res)) wait = Math.max(wait, retryNotice(res, 'sale'));
      else notice(res.status === 404 ? 'There is no sale called "' + sale + '".' : msg(res), 'sale');
    }
    setTimeout(loadSale, wait);
  }
  function renderSale() {
    document.title = (snap.name || sale) + ' — flash sale';
    $('sale-name').textContent = snap.name || sale;
    $('sale-status').textContent = STATUS[snap.status] || snap.status;
    $('sale-status').dataset.status = snap.status;
    $('skus').replaceChildren(...(snap.skus || []).map((s) => {
      const li = document.createElement('li'), out = s.available_hint <= 0;
      li.className = out ? 'out' : '';
      const hint = out ? 'sold out' : s.available_hint > 0 ? s.available_hint + ' left' : '';
      li.append(...[['name', s.name], ['price', price(s)], ['hint', hint]].map(([cls, text]) => {
        const span = document.createElement('span'); span.className = cls; span.textContent = text; return span;
      }));
      return li;
    }));
    tick(); renderBuy(); updateJoin();
  }

  // Once a second: the start countdown and the hold countdown, computed locally between polls, on the server's
  // clock (serverNow).
  function tick() {
    const now = serverNow();
    if (snap) {
      const left = Date.parse(snap.starts_at) - now;
      $('countdown').textContent = snap.status === 'upcoming' && left > 0 ? 'Starts in ' + clock(left)
        : snap.status === 'open' && snap.ends_at ? 'Ends in ' + clock(Date.parse(snap.ends_at) - now) : '';
    }
    if (resv) {
      const left = Date.parse(resv.expires_at) - now;
      if (resv.status === 'held' && left > 0) holdTimer(clock(left));
      else $('res-countdown').textContent = resv.status === 'held' ? 'Time is up — checking…' : holdEnd(resv);
    }
  }
  // The hold's time left ticks in a timer (role=timer, aria-live=off) so that screen readers do not read it out
  // every second; the reservation's live region reads out what replaces it.
  function holdTimer(left) {
    const el = $('res-countdown');
    let t = el.querySelector('[role="timer"]');
    if (!t) {
      t = document.createElement('span');
      t.setAttribute('role', 'timer'); t.setAttribute('aria-live', 'off');
      el.replaceChildren('Reserved! Pay within ', t);
    }
    t.textContent = left;
  }
  // holdEnd says, in plain words, what the end of a hold means for the shopper. A cancelled hold on which a
  // payment was started is a failed payment: the origin releases the hold at once.
  function holdEnd(r) {
    if (r.status === 'paid') return 'Paid — thank you!';
    if (r.status === 'expired') return 'Your hold has expired — the unit went back to the line.';
    if (r.status !== 'cancelled') return '';
    if (r.order_key || r.order_id) return 'Your payment did not go through — nothing was charged, and the unit went back to the line.';
    return 'This reservation was cancelled — the unit went back to the line.';
  }

  // ---- signing in ----
  function renderAuth() {
    const token = store.get(K.user);
    $('signin-form').hidden = !!token;
    $('signed-in').hidden = !token;
    $('who').textContent = token ? store.get(K.who) || subOf(token) || 'you' : '';
    if (!store.get(K.queue)) showQueue(null); // refresh the "sign in first" hint
    updateJoin();
  }
  function setUser(token, who) {
    if (store.get(K.who) !== who) forgetSale(); // queue places and holds belong to the previous account
    store.set(K.user, token); store.set(K.who, who);
    renderAuth();
  }
  function forgetSale() {
    stopPolling(); clearTimeout(resTimer);
    if (solver) { joining = false; endCheck(); }
    proof = null; checkFailed = false;
    admission = ''; resv = null; lineOver = ''; preIndex = 0; placeFromDraw = false;
    store.set(K.queue, null); store.set(K.res, null);
    showQueue(null); renderBuy(); $('reservation').hidden = true;
  }
  $('signin-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const id = $('signin-user').value.trim();
    if (!id) return; $('signin-button').disabled = true;
    const res = await api('POST', '/v1/dev/login', { body: { user_id: id } });
    $('signin-button').disabled = false;
    if (res.status === 200 || res.status === 201) { clearNotice('signin'); setUser(res.data.user_token, subOf(res.data.user_token) || id); }
    else if (res.status === 404) notice('Sign-in is handled by the shop: sign in there and come back to this page.', 'signin');
    else notice(busy(res) ? 'Sign-in is busy, please try again in a moment.' : msg(res), 'signin');
  });
  $('signout').addEventListener('click', (e) => {
    e.preventDefault(); forgetSale(); store.set(K.user, null); store.set(K.who, null); notice('', ''); renderAuth();
  });

  // ---- the line ----
  function updateJoin() {
    const b = $('join-button'), inLine = !!store.get(K.queue);
    // The line itself may know first (closed / final sold out) before the next snapshot says so.
    const ended = lineOver === 'closed' || (snap && snap.status === 'ended');
    const over = ended || lineOver === 'sold_out' || (snap && snap.sold_out && snap.final);
    b.disabled = !store.get(K.user) || over || inLine || joining;
    b.textContent = ended ? 'Sale over' : over ? 'Sold out' : inLine ? 'You are in line' : solver ? 'Checking…'
      : checkFailed ? 'Try again' : 'Join the line';
  }
  async function join() {
    const user = store.get(K.user);
    if (!user) { joining = false; proof = null; updateJoin(); return; }
    joining = true; updateJoin();
    // A queue token held from before is shown: the place it carries comes back, whatever the edge lost.
    const res = await api('POST', salePath + '/queue', { token: user, queue: store.get(K.queue), proof });
    if (busy(res)) { setTimeout(join, retryNotice(res, 'join')); return; } // stay "joining" (with any proof) until it lands
    proof = null; // taken, or refused with a fresh challenge
    if (res.status === 403 && res.data.error === 'challenge_required') { prove(personal(res.data)); return; } // still "joining"
    joining = false; endCheck();
    if (res.status === 202 || res.status === 200) {
      clearNotice('join'); checkFailed = false;
      store.set(K.queue, res.data.queue_token);
      showQueue(Object.assign({ state: 'waiting' }, res.data));
      startPolling(waitingPoll(res.data, res.data.poll_after_ms));
    } else if (res.status === 401) {
      store.set(K.user, null); renderAuth();
      notice('Your sign-in has expired (' + msg(res) + ') — please sign in again.', 'join');
    } else notice(msg(res), 'join');
    updateJoin();
  }
  $('join-button').addEventListener('click', () => {
    checks = 0; checkFailed = false; proof = null;
    // The sale publishes a challenge: solve it before joining, so that one join gets the place.
    const pub = published();
    if (pub) { joining = true; prove(pub); } else join();
  });

  // ---- the proof of work (edge/internal/challenge/doc.go) ----
  // When ops ask for one, the sale snapshot publishes a challenge (the same for every shopper, changed every
  // minute), and on Join the page solves it first, for the signed-in account, then joins with the solution: one
  // join, where answering each join with a challenge took two. A join without a solution the edge takes (the
  // page could not solve first; the solution came too late; ops raised the difficulty meanwhile; or the shop's
  // signals mark the account as low trust, which must solve a harder one) is answered 403 challenge_required
  // with a personal challenge, which the page solves to join again, as before sales published one.
  // Each is solved in a Web Worker (static/challenge-worker.js: SHA-256 with WebCrypto, off the main thread, so
  // the page stays responsive). After MAX_CHECKS challenges for one press of Join, the published one included,
  // the page stops and offers Try again.
  const MAX_CHECKS = 3;
  // The edge takes a personal challenge's solution for 2 minutes after it issued it, a published one's for 2
  // minutes after its minute started: at least one minute after the page read it. A solve slower than that gets
  // a personal challenge with its full 2 minutes.
  const CHECK_LIMIT_MS = 100000;
  const MAX_ACCOUNT_BYTES = 256; // the longest account the edge binds a challenge to (challenge.MaxAccountLen)
  // WebCrypto (and so the check) exists only in secure contexts: https, or localhost.
  const canCheck = () => !!(window.isSecureContext && typeof Worker === 'function' && window.crypto && crypto.subtle);

  // published is the challenge the last snapshot publishes, {challenge, bits}, when the page can solve it before
  // joining as the signed-in account (the JWT's `sub`: the account the edge takes the join as); otherwise null,
  // and the page joins without, as before: the edge's 403 says what is needed (a challenge, a secure connection).
  function published() {
    const c = snap && snap.challenge, account = subOf(store.get(K.user));
    if (!c || typeof c.value !== 'string' || !c.value.startsWith('p1.') || !account || !canCheck() ||
      new TextEncoder().encode(account).length > MAX_ACCOUNT_BYTES) return null;
    // Its difficulty comes from the JSON: the string is opaque (edge/internal/challenge/doc.go).
    return { challenge: c.value, bits: c.difficulty_bits };
  }
  // personal is the challenge of a 403 challenge_required answer, {challenge, bits, message}: the challenge is
  // opaque but for its difficulty, the third field from the right.
  function personal(d) {
    const challenge = typeof d.challenge === 'string' ? d.challenge : '', f = challenge.split('.');
    return { challenge, bits: f.length >= 7 ? Number(f[f.length - 3]) : NaN, message: d.message };
  }

  // prove solves the challenge {challenge, bits, message?} for the signed-in account, with the check shown on
  // the page, and joins with the solution; the page is "joining" throughout.
  async function prove({ challenge, bits, message }) {
    const user = store.get(K.user);
    if (!user) { joining = false; endCheck(); updateJoin(); return; } // signed out meanwhile
    if (!canCheck()) {
      giveUp("This sale checks that you're a person before you join, and that needs a secure connection: " +
        'open the sale at its https address to join the line.', false);
      return;
    }
    if (!Number.isInteger(bits) || bits < 0 || bits > 32) { giveUp(message || 'Unexpected answer from the sale.', true); return; }
    if (++checks > MAX_CHECKS) {
      giveUp("We could not finish checking that you're a person: the sale refused " + MAX_CHECKS + ' answers in a row. ' +
        'Press Try again to start over.', true);
      return;
    }
    clearNotice('join');
    showCheck(bits, 0);
    let r;
    // Signing out, or in as another account, stops the worker (forgetSale): the solution is for this account.
    try { r = await solveChallenge(challenge, bits, subOf(user)); } catch (e) {
      giveUp(e.message === 'took too long' ? "Checking that you're a person is taking too long on this device. Press Try again."
        : "We could not check that you're a person in this browser. Press Try again, or use another browser.", true);
      return;
    }
    if (!r) return; // stopped: signed out, or the sale is over
    proof = { challenge, solution: r.solution };
    join();
  }

  // solveChallenge solves one challenge for account (the work of a published one binds it) in a fresh worker:
  // its answer {solution, tries, ms}, null when stopped (endCheck), or an error when the worker cannot run or
  // takes longer than CHECK_LIMIT_MS.
  function solveChallenge(challenge, bits, account) {
    return new Promise((resolve, reject) => {
      const worker = new Worker('/static/challenge-worker.js'); // a throw here rejects
      const timer = setTimeout(() => end(reject, new Error('took too long')), CHECK_LIMIT_MS);
      const end = (settle, v) => {
        clearTimeout(timer); worker.terminate();
        if (solver && solver.worker === worker) solver = null;
        settle(v);
      };
      solver = { worker, stop: () => end(resolve, null) };
      updateJoin();
      worker.onmessage = (e) => {
        const m = e.data || {};
        if (!solver || solver.worker !== worker) return; // stopped meanwhile
        if (typeof m.solution === 'string') end(resolve, m);
        else if (m.error) end(reject, new Error(m.error));
        else showCheck(bits, m.tries);
      };
      worker.onerror = (e) => { e.preventDefault(); end(reject, new Error(e.message || 'the worker did not start')); };
      worker.postMessage({ challenge, bits, account });
    });
  }

  // showCheck says that the page is checking, and how far along: the share of the average work (2^bits tries)
  // done so far. A solve's length is chance: about 1 in 20 takes three times the average.
  function showCheck(bits, tries) {
    const st = $('queue-state'), avg = 2 ** bits, p = $('check-progress');
    if (st.dataset.state !== 'checking') {
      st.dataset.state = 'checking';
      st.textContent = "Checking that you're a person — this takes a few seconds on a phone.";
    }
    $('check').hidden = false;
    if (tries && tries < avg) p.value = tries / avg; else p.removeAttribute('value'); // no value: indeterminate
    const pct = Math.round((100 * tries) / avg);
    $('check-hint').textContent = (checks > 1 ? 'Checking again (' + checks + ' of ' + MAX_CHECKS + '). ' : '') +
      (!tries ? 'Starting…' : !pct ? 'Just started.' : tries < avg ? 'About ' + pct + '% of the usual work done.'
        : 'Taking longer than usual — still working.');
  }
  // endCheck stops the worker, if one runs, and takes the check off the page.
  function endCheck() {
    if (solver) solver.stop();
    $('check').hidden = true;
    if ($('queue-state').dataset.state === 'checking') showQueue(null);
  }
  // giveUp ends the check with a message; retry: the join button reads Try again.
  function giveUp(text, retry) {
    joining = false; checkFailed = retry;
    endCheck(); notice(text, 'join'); updateJoin();
  }

  function startPolling(afterMs) {
    stopPolling(); const gen = pollGen;
    pollTimer = setTimeout(() => pollStatus(gen), Math.max(MIN_POLL_MS, afterMs || 0));
  }
  function stopPolling() { clearTimeout(pollTimer); pollGen++; } // bumping the generation voids in-flight polls

  async function pollStatus(gen) {
    const qt = store.get(K.queue);
    if (!qt) { updateJoin(); return; }
    const res = await api('GET', salePath + '/queue/status', { token: qt, user: true });
    if (gen !== pollGen) return; // stopped meanwhile (signed out, reserved, rejoined)
    if (res.status === 200) {
      const d = res.data;
      placeFromDraw = false; preIndex = 0; // the edge's own answer from here on (waitingPoll looks again)
      clearNotice('poll'); showQueue(d);
      if (d.state === 'admitted' && d.admission_token) { admission = d.admission_token; renderBuy(); return; }
      if (d.state === 'closed' || (d.state === 'sold_out' && d.final)) { lineOver = d.state; stopPolling(); updateJoin(); return; }
      const after = d.poll_after_ms || res.retry * 1000;
      startPolling(d.state === 'waiting' ? waitingPoll(d, after) : after);
    } else if (res.status === 401) { // queue token no longer good for us (other account or sale): join afresh
      preIndex = 0; placeFromDraw = false;
      store.set(K.queue, null); showQueue(null); updateJoin();
      notice(msg(res) + ' — please join the line again.', 'poll');
    } else if (busy(res)) startPolling(retryNotice(res, 'poll'));
    else { notice(msg(res) + ' — retrying…', 'poll'); startPolling(5000); }
  }

  function showQueue(d) {
    const set = (id, v) => { $(id).textContent = v; };
    if (!d) {
      place = 0;
      ['position', 'now-serving', 'ahead', 'eta'].forEach((id) => set(id, '–'));
      set('queue-state', store.get(K.user) ? 'Not in line yet.' : 'Sign in, then join the line.');
      $('queue-state').dataset.state = ''; $('progress').value = 0; return;
    }
    const pos = d.position || 0, serving = d.now_serving || 0, ahead = Math.max(0, pos - serving - 1); // places up to now_serving are admitted
    place = d.state === 'waiting' ? pos : 0;
    // Pre-queue places are drawn at the start, so until then the position is 0 (pre_queue: true on join).
    const pre = d.state === 'waiting' && !pos;
    set('position', pos ? '#' + pos : '–');
    set('now-serving', '#' + serving);
    set('ahead', pos ? String(ahead) : '–');
    set('eta', d.state === 'waiting' && !pre && d.estimated_wait_s != null ? 'about ' + d.estimated_wait_s + ' s' : '–');
    $('progress').max = pos || 1;
    $('progress').value = pre ? 0 : Math.min(serving, pos || 1);
    $('queue-state').dataset.state = d.state;
    set('queue-state', {
      waiting: pre ? 'You are in the pre-queue; places are drawn at random when the sale starts.'
        : ahead ? 'You are in line — ' + ahead + (ahead === 1 ? ' person' : ' people') + ' ahead of you.' : 'Almost your turn…',
      admitted: "It's your turn! Pick an item below.",
      sold_out: d.final ? 'Sold out.' : 'Sold out for now — units may come back, staying in line.',
      closed: 'The sale is over.',
    }[d.state] || d.state);
  }

  // ---- buying ----
  function renderBuy() {
    $('buy').hidden = !admission;
    if (!admission || !snap) return;
    (snap.skus || []).forEach((s) => {
      let b = $('buy-' + s.sku);
      if (!b) { // created once per SKU, so the button (and its idempotency key) stays the same click-target
        b = Object.assign(document.createElement('button'), { type: 'button', id: 'buy-' + s.sku });
        b.addEventListener('click', () => reserve(s.sku));
        $('buy-buttons').append(b);
      }
      b.textContent = 'Buy ' + s.name;
      b.disabled = reserving;
    });
  }
  async function reserve(sku) {
    if (!admission || reserving) return;
    keys[sku] = keys[sku] || uuid();
    reserving = true; renderBuy(); notice('Reserving…', 'buy');
    const res = await api('POST', salePath + '/reserve', { token: admission, user: true, body: { sku, idempotency_key: keys[sku] } });
    reserving = false;
    if (res.status === 201 || res.status === 200) {
      clearNotice('buy'); delete keys[sku]; admission = ''; renderBuy(); holdReservation(res.data); return;
    }
    if (res.status === 401) { // admission token expired or already used: ask the line for a fresh one
      admission = ''; renderBuy(); notice('Your turn has lapsed — getting a fresh one…', 'poll'); startPolling(0); return;
    }
    if (busy(res)) { const ms = retryNotice(res, 'buy'); renderBuy(); setTimeout(() => reserve(sku), ms); return; }
    if (res.status === 409 && res.data.error === 'sold_out') notice('Sold out.', 'buy');
    else if (res.status === 403 && res.data.error === 'limit_reached') notice('You already bought one.', 'buy');
    else notice(msg(res), 'buy');
    renderBuy();
  }

  // ---- the reservation (hold) ----
  function holdReservation(r) {
    const same = resv && resv.reservation_id === r.reservation_id;
    resv = Object.assign(same ? resv : {}, r);
    resv.status = resv.status || 'held';
    store.set(K.res, JSON.stringify(resv));
    stopPolling(); clearTimeout(resTimer); // while a hold lives, the line has nothing more to give us
    $('reservation').hidden = false;
    $('res-id').textContent = resv.reservation_id;
    $('res-status').textContent = resv.status;
    $('queue-state').textContent = resv.status === 'paid' ? 'Done — enjoy your purchase!'
      : resv.status === 'held' ? 'You have a reservation — see below.' : 'Checking the line for you…';
    $('pay-button').hidden = resv.status !== 'held';
    tick();
    if (resv.status === 'held') {
      // Every 5 s (a payment may settle it), and just after its time runs out, so that its end shows at once.
      const left = Date.parse(resv.expires_at) - serverNow();
      resTimer = setTimeout(pollReservation, left > 0 ? Math.min(5000, left + 500) : 2000);
    } else if (resv.status !== 'paid') { // expired or cancelled: forget it, and back to the line to try again
      store.set(K.res, null);
      if (store.get(K.queue)) startPolling(0); else { showQueue(null); updateJoin(); }
    }
  }
  async function pollReservation() {
    if (!resv) return;
    const res = await api('GET', '/v1/reservations/' + encodeURIComponent(resv.reservation_id), { token: store.get(K.user) });
    if (!resv) return; // signed out meanwhile
    if (res.status === 200) { clearNotice('res'); holdReservation(res.data); return; }
    let wait = 5000;
    if (res.status === 401) notice('Sign in again to keep watching your reservation.', 'res');
    else if (res.status === 404) { notice('That reservation no longer exists.', 'res'); store.set(K.res, null); return; }
    else if (busy(res)) wait = Math.max(wait, retryNotice(res, 'res'));
    else notice(msg(res), 'res');
    resTimer = setTimeout(pollReservation, wait);
  }
  // Paying: create (or get back, thanks to the stored key) the order, then go to the gateway's page.
  $('pay-button').addEventListener('click', async () => {
    if (!resv) return;
    resv.order_key = resv.order_key || uuid(); store.set(K.res, JSON.stringify(resv));
    $('pay-button').disabled = true;
    let res = await api('POST', '/v1/orders', { token: store.get(K.user), body: { reservation_id: resv.reservation_id, idempotency_key: resv.order_key } });
    // A slow gateway: the order is made, its payment link is not yet; read the order until it is there.
    for (let tries = 0; (res.status === 201 || res.status === 200) && res.data.status === 'pending_payment' && !res.data.payment && tries < 40; tries++) {
      notice('Preparing your payment…', 'res');
      await new Promise((ok) => setTimeout(ok, res.data.poll_after_ms || 1000));
      const again = await api('GET', '/v1/orders/' + encodeURIComponent(res.data.order_id), { token: store.get(K.user) });
      if (again.status === 200) res = again;
      else if (!busy(again)) { res = again; break; }
    }
    $('pay-button').disabled = false;
    const url = res.data.payment && res.data.payment.pay_url;
    if ((res.status === 201 || res.status === 200) && res.data.status === 'pending_payment' && url) { clearNotice('res'); location.href = url; return; }
    if ((res.status === 201 || res.status === 200) && res.data.status === 'pending_payment') { notice('The payment page is not ready yet — press Pay again in a moment.', 'res'); return; }
    if (res.status === 200 && res.data.status === 'paid') { pollReservation(); return; }
    if (res.status === 409 && res.data.error === 'hold_expired') { notice('Your hold expired before payment.', 'res'); pollReservation(); }
    else notice(busy(res) ? 'Busy — please press Pay again in ' + (res.retry || 2) + ' s.' : msg(res), 'res');
  });

  // ---- the order, back from the gateway's page (?order=…) ----
  const orderNote = {
    pending_payment: 'Waiting for the gateway to confirm your payment…',
    paid: 'Paid — the item is yours.',
    refunded: 'Your payment came after your hold had ended, so the money goes back to you.',
    cancelled: 'No payment was taken: it did not go through, or the hold ended first.',
  };
  async function watchOrder(id, tries = 0, seen = '') {
    const res = await api('GET', '/v1/orders/' + encodeURIComponent(id), { token: store.get(K.user) });
    if (res.status !== 200) {
      if (busy(res) && tries < 30) setTimeout(() => watchOrder(id, tries + 1, seen), 2000);
      else if (res.status === 401) notice('Sign in again to see your order.', 'res');
      return;
    }
    const o = res.data;
    $('order').hidden = false;
    $('order-id').textContent = o.order_id;
    $('order-status').textContent = o.status.replace('_', ' ');
    $('order-status').dataset.status = o.status;
    const refund = o.refund ? (o.refund.status === 'issued' ? ' Refund issued.' : ' Refund on its way.') : '';
    $('order-note').textContent = (orderNote[o.status] || '') + refund;
    // Confirmation comes by webhook a moment after the gateway's page: look again shortly. A cancelled order
    // too, for half a minute: its hold may have ended while the shopper paid, and that payment, on its way,
    // turns it refunded (the money goes back) — the page must not leave them told no payment was taken.
    const settling = o.status === 'pending_payment' || (o.refund && o.refund.status !== 'issued') ||
      (o.status === 'cancelled' && tries < 30);
    if (settling && tries < 60) {
      setTimeout(() => watchOrder(id, tries + 1, o.status), 1000);
    }
    if (resv && o.status !== 'pending_payment' && o.status !== seen) pollReservation(); // once per change
  }

  // ---- a sign-in handed over in the address ----
  // A crafted link could carry someone else's token and sign the shopper in as them (who could then be led to
  // pay for that account's order). So with nobody signed in, the page asks first, naming the account the token
  // names (decoded for display only: the servers check the token), and keeps the token only on Continue; until
  // then it is in memory only and nothing is asked as that account. Signed in already, a token for the same
  // account replaces the old one, and another account's is ignored with a notice.
  let pendingHandover = null; // {token, who} while the shopper is asked
  const shortWho = (who) => (who.length > 64 ? who.slice(0, 63) + '…' : who);
  function askHandover(token, who) {
    const d = $('handover');
    if (typeof d.showModal !== 'function') { // no <dialog>: never sign in unasked
      notice('A sign-in link for ' + shortWho(who) + ' was not used: please sign in here.', 'handover'); return;
    }
    pendingHandover = { token, who };
    $('handover-who').textContent = shortWho(who);
    d.returnValue = '';
    d.showModal(); // modal: nothing else on the page is reachable until it is answered (Escape is Not me)
  }
  $('handover-continue').addEventListener('click', () => $('handover').close('continue'));
  $('handover-cancel').addEventListener('click', () => $('handover').close('not-me'));
  $('handover').addEventListener('close', () => {
    const p = pendingHandover;
    pendingHandover = null;
    if (!p) return;
    if ($('handover').returnValue === 'continue' && !store.get(K.user)) {
      setUser(p.token, p.who);
      notice('Signed in as ' + shortWho(p.who) + '.', 'handover');
      resume();
    } else {
      notice('The sign-in link was not used. Sign in with your own account.', 'handover');
      $('signin-user').focus();
    }
  });

  // ---- start ----
  const returned = new URLSearchParams(location.search).get('order');
  // What a signed-in page picks up again: its hold, its place in line, the order it came back with.
  function resume() {
    if (!store.get(K.user)) return;
    let saved = null;
    try { saved = JSON.parse(store.get(K.res) || 'null'); } catch (_) { /* ignore a corrupt entry */ }
    if (saved && saved.reservation_id) { holdReservation(saved); pollReservation(); }
    else if (store.get(K.queue)) { $('queue-state').textContent = 'Resuming your place in line…'; startPolling(0); }
    if (returned && validID(returned, 128)) watchOrder(returned);
  }
  if (handed) {
    const handedWho = subOf(handed), current = store.get(K.user);
    if (!handedWho) notice('The sign-in link is not valid; please sign in.', 'handover');
    else if (!current) askHandover(handed, handedWho);
    else if (subOf(current) === handedWho) setUser(handed, handedWho);
    else notice('A sign-in link for another account (' + shortWho(handedWho) + ') was ignored: you are signed in as ' + (store.get(K.who) || subOf(current)) + '. Sign out first to switch.', 'handover');
  }
  renderAuth();
  loadSale();
  setInterval(tick, 1000);
  resume();
})();
