// flashgate proof-of-work solver: a dedicated Web Worker that the sale page starts when the edge answers a join
// with 403 challenge_required. The work is the one edge/internal/challenge/doc.go documents: the smallest
// decimal s (tried "0", "1", "2", …) such that SHA-256(challenge ":" s) starts with at least `bits` zero bits,
// counted from the top bit of the first byte.
//
// In:  {challenge, bits}  the challenge string, byte for byte as the edge sent it, and its difficulty.
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
const MAX_BITS = 32;

// zeroBits is the number of leading zero bits of the digest h.
function zeroBits(h) {
  let z = 0, i = 0;
  while (i < h.length && h[i] === 0) { z += 8; i++; }
  if (i < h.length) z += Math.clz32(h[i]) - 24;
  return z;
}

// solve returns the smallest solution of challenge at bits, with the number of tries and the time spent;
// progress(tries, ms) is called about every PROGRESS_MS.
async function solve(challenge, bits, progress) {
  const enc = new TextEncoder(), prefix = challenge + ':', t0 = performance.now();
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
  const { challenge, bits } = e.data || {};
  if (typeof challenge !== 'string' || !challenge || challenge.length > MAX_CHALLENGE_LEN ||
    !/^[\x21-\x7e]+$/.test(challenge) || !Number.isInteger(bits) || bits < 0 || bits > MAX_BITS) {
    self.postMessage({ error: 'malformed challenge' });
    return;
  }
  if (!(self.crypto && self.crypto.subtle)) { // only in secure contexts: https, or localhost
    self.postMessage({ error: 'no WebCrypto' });
    return;
  }
  try {
    self.postMessage(await solve(challenge, bits, (tries, ms) => self.postMessage({ tries, ms })));
  } catch (err) {
    self.postMessage({ error: String((err && err.message) || err) });
  }
};
