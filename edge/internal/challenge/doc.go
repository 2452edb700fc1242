// Package challenge is the edge's proof of work: before a place in
// line is given, the shopper's page spends about a second of CPU on a
// challenge bound to its account, its sale and a short time window, so that
// holding many places costs many such seconds. It is stateless: a challenge is
// signed, not stored, and Verify checks one in microseconds without Redis.
//
// There are two kinds. A sale's published challenge (Publish) is the same for
// every account for a minute: the sale snapshot, which the CDN caches,
// carries it, so a page solves it before it joins and joins once; the work
// binds the account. A personal challenge (Issue) is what a join without a
// valid solution gets with its 403 challenge_required: bound to the account
// by its MAC, it also serves accounts the trust rules ask more of than the
// published difficulty.
//
// # The personal challenge
//
// A personal challenge is one ASCII string of at most MaxChallengeLen bytes:
//
//	v1.<kid>.<sale>.<window>.<bits>.<nonce>.<mac>
//
// whose fields are:
//
//   - kid: the tokens.KeySet key that signed it, [A-Za-z0-9._-]{1,32}. It is
//     the only field that may hold a dot, so the others are read from the
//     right.
//   - sale: the sale id, [A-Za-z0-9_-]{1,64}.
//   - window: the Unix second the edge issued it, in decimal without leading
//     zeros. Verify takes a solution from ClockSkew before then until Validity
//     after.
//   - bits: the difficulty, 0 to MaxDifficultyBits, in decimal without
//     leading zeros.
//   - nonce: 16 random bytes, base64url without padding (22 characters).
//   - mac: HMAC-SHA256 of uint16_be(len(account)) ‖ account ‖ the challenge
//     up to (not including) the dot before mac, base64url without padding (43
//     characters). Its key is HMAC-SHA256(secret, "flashgate challenge v1")
//     for the kid's secret, so no challenge MAC is ever a token or request
//     signature made with the same secret.
//
// The account is not in the string: the MAC binds it, and the verifier takes
// it from the request's user token. A client treats the string as opaque,
// except to read bits (the third field from the right).
//
// # The published challenge
//
// A published challenge is one ASCII string, shorter than a personal one:
//
//	p1.<kid>.<sale>.<window>.<bits>.<mac>
//
// with kid, sale and bits as above, window the Unix second its minute
// (PublicWindow) started, a multiple of 60, and mac the HMAC-SHA256 of the
// challenge up to the dot before mac under HMAC-SHA256(secret, "flashgate
// public challenge v1"). It depends on nothing but the key, the sale, the
// minute and the difficulty: every node with the same active key publishes
// the same string for a minute, and nobody without the key can know it
// before its minute starts. Verify takes it from ClockSkew before its window
// starts until Validity after, so a page that read it late in its minute
// still has a minute to solve it.
//
// # The work
//
// A solution of a published challenge is a string s of 1 to MaxSolutionLen
// ASCII digits such that
//
//	SHA-256(challenge ‖ "~" ‖ account ‖ ":" ‖ s)
//
// starts with at least bits zero bits, where account is the joining
// account's id (the user token's sub), as UTF-8. The solution is digits
// only, so the last colon ends the account, and one account's solution is
// another's only by the odds of a guess (2^-bits).
//
// A solution of a personal challenge is a string s of 1 to MaxSolutionLen
// ASCII digits such that
//
//	SHA-256(challenge ‖ ":" ‖ s)
//
// starts with at least bits zero bits, counted from the most significant bit
// of the first byte. Any such s is taken; Solve tries s = "0", "1", "2", ...
// and the page's Web Worker does the same with WebCrypto:
//
//	const bits = Number(challenge.split('.').at(-3));
//	const enc = new TextEncoder();
//	for (let n = 0; ; n++) {
//	  const s = String(n);
//	  const h = new Uint8Array(await crypto.subtle.digest('SHA-256', enc.encode(challenge + ':' + s)));
//	  let z = 0, i = 0;
//	  while (i < h.length && h[i] === 0) { z += 8; i++; }
//	  if (i < h.length) z += Math.clz32(h[i]) - 24;
//	  if (z >= bits) return s;
//	}
//
// The page must send the challenge back byte for byte as it got it.
//
// # Difficulty
//
// Each try succeeds with probability 2^-bits, independently, so a solve takes
// 2^bits hashes on average, and its length is geometric: about 1 solve in 20
// takes three times the average, 1 in 100 takes 4.6 times. The rates below are
// estimates, not measurements of any phone: WebCrypto's digest is one promise
// per hash, which in a Worker on a mid-range phone gives perhaps 50,000 to
// 200,000 hashes a second.
//
//	bits  hashes on average  at 50k/s  at 100k/s  at 200k/s
//	  14             16,384     0.3 s      0.2 s      0.1 s
//	  16             65,536     1.3 s      0.7 s      0.3 s
//	  17            131,072     2.6 s      1.3 s      0.7 s
//	  18            262,144     5.2 s      2.6 s      1.3 s
//	  20          1,048,576      21 s       10 s      5.2 s
//
// DefaultDifficultyBits, 17, aims at about a second on such a phone. A server
// core with SHA instructions does millions of these hashes a second in Go
// (BenchmarkSolve reports the rate), and a GPU far more: at a difficulty a phone
// can bear, the work costs a bot milliseconds of native CPU per account. It
// prices a flood of joins from many accounts; it does not stop a bot that pays.
//
// # Reuse
//
// Nothing records a challenge or its solution, and nothing needs to. A join
// is idempotent per account: an account holds one place, and joining again
// returns it (docs/FAIRNESS.md), so the same account showing a solution again
// gains nothing it did not have. Another account fails a personal
// challenge's MAC and a published one's work; the same account in another
// sale fails either's MAC. And a challenge cannot be farmed ahead: its
// window starts when the edge issues or publishes it (the clock's now, never
// a later time) and closes Validity after, so no work can be done for a
// window before it opens, nor kept for long.
package challenge
