// flashgate proof-of-work solver: a dedicated Web Worker that the sale page starts to solve a challenge of the
// edge: the one the sale snapshot publishes, before the shopper's join, or the one a join is answered with
// (403 challenge_required). The work is the one edge/internal/challenge/doc.go documents: the smallest decimal s
// (tried "0", "1", "2", …) such that the SHA-256 of
//   challenge "~" account ":" s   for a published challenge (it starts with "p1."): the same string for every
//                                 shopper of the sale, so the work binds the account the join is made as;
//   challenge ":" s               for a personal one ("v1."), whose MAC binds the account already,
// starts with at least `bits` zero bits, counted from the top bit of the first byte.
//
// In:  {challenge, bits, account}  the challenge string, byte for byte as the edge sent it, its difficulty, and
//                                  the account (the user token's `sub`; needed for a published challenge only).
// Out: {tries, ms}        progress, about every PROGRESS_MS while it works;
//      {solution, tries, ms}  the answer, once (s as a string; tries = s + 1; ms spent solving);
//      {error}             the message could not be worked on (no WebCrypto, malformed input).
// The page stops it with terminate() when it gives up or the sale ends; one worker solves one challenge.
'use strict';

// BATCH digests are in flight at once: WebCrypto's digest is one promise per hash, and awaiting each in turn
// leaves the hashing idle while every answer makes its way back.
const BATCH = 128;
const PROGRESS_MS = 250;
const MAX_CHALLENGE_LEN = 256; // the edge's fit in challenge.MaxChallengeLen (182 bytes)
const MAX_ACCOUNT_BYTES = 256; // challenge.MaxAccountLen: the edge refuses the work of a longer account
const MAX_BITS = 32;

// zeroBits is the number of leading zero bits of the digest h.
function zeroBits(h) {
  let z = 0, i = 0;
  while (i < h.length && h[i] === 0) { z += 8; i++; }
  if (i < h.length) z += Math.clz32(h[i]) - 24;
  return z;
}

// solve returns the smallest solution s of bits for the hashed string prefix ‖ s, with the number of tries and
// the time spent; progress(tries, ms) is called about every PROGRESS_MS. The string is hashed as UTF-8 (an
// account may be any text; the challenge and s are ASCII), as the edge hashes the account's bytes.
async function solve(prefix, bits, progress) {
  const enc = new TextEncoder(), t0 = performance.now();
  let shown = t0;
  for (let base = 0; ; base += BATCH) {
    const pending = new Array(BATCH);
    for (let i = 0; i < BATCH; i++) pending[i] = crypto.subtle.digest('SHA-256', enc.encode(prefix + (base + i)));
    const digests = await Promise.all(pending);
    for (let i = 0; i < BATCH; i++) { // in order, so the answer is the smallest s, as the edge's Solve finds it
      if (zeroBits(new Uint8Array(digests[i])) >= bits) {
        return { solution: String(base + i), tries: base + i + 1, ms: performance.now() - t0 };
      }
    }
    const now = performance.now();
    if (progress && now - shown >= PROGRESS_MS) { shown = now; progress(base + BATCH, now - t0); }
  }
}

self.onmessage = async (e) => {
  const { challenge, bits, account } = e.data || {};
  if (typeof challenge !== 'string' || !challenge || challenge.length > MAX_CHALLENGE_LEN ||
    !/^[\x21-\x7e]+$/.test(challenge) || !Number.isInteger(bits) || bits < 0 || bits > MAX_BITS) {
    self.postMessage({ error: 'malformed challenge' });
    return;
  }
  // A published challenge is worked for one account, which must be one the edge takes: 1 to 256 UTF-8 bytes.
  const published = challenge.startsWith('p1.');
  if (published && (typeof account !== 'string' || !account || new TextEncoder().encode(account).length > MAX_ACCOUNT_BYTES)) {
    self.postMessage({ error: 'no account, or one too long, for a published challenge' });
    return;
  }
  if (!(self.crypto && self.crypto.subtle)) { // only in secure contexts: https, or localhost
    self.postMessage({ error: 'no WebCrypto' });
    return;
  }
  const prefix = published ? challenge + '~' + account + ':' : challenge + ':';
  try {
    self.postMessage(await solve(prefix, bits, (tries, ms) => self.postMessage({ tries, ms })));
  } catch (err) {
    self.postMessage({ error: String((err && err.message) || err) });
  }
};
