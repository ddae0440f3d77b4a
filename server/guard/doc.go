// Package guard holds the faucet's abuse controls as one chain of checks,
// run on every drip request before the engine spends anything:
//
//  1. IP deny list: a client inside a Deny prefix is refused (403), API
//     tokens included.
//  2. API token: "Authorization: Bearer <token>", when a tokens file is
//     configured. A known token replaces the per-address and per-IP limits
//     with its own quota and skips the proof of work; an unknown or malformed
//     Bearer token is refused (401), never treated as anonymous. Other
//     schemes (an ingress's basic auth) are not ours: such requests are
//     anonymous. Too many failures lock the client address out (429); see
//     "Token lock-out".
//  3. IP allow list: a client inside an Allow prefix skips the per-IP limit
//     and the proof of work.
//  4. Proof of work, for the remaining (anonymous) requests while a
//     difficulty is in force: the client fetches a signed challenge, finds a
//     decimal counter such that SHA-256(challenge ":" counter) starts with
//     the challenge's number of zero bits, and sends both back in the
//     X-Faucet-Challenge and X-Faucet-Solution headers. Each challenge serves
//     one drip, and is recorded as used before the balance cap reads the
//     node (a replayed solution cannot make it read account after account).
//     The difficulty rises with the rate of anonymous drips that were paid
//     (Chain.Dispensed); a challenge below the current difficulty is refused,
//     so easy challenges hoarded while the faucet was quiet do not get round
//     a raise.
//  5. Balance cap: a recipient that already holds the cap is refused (403).
//
// # Rate limits
//
// A request that passed the checks is charged against the rate limits
// (RateLimits.Reserve): one slot in each bucket it counts in, all or none,
// in a Limiter (memory, or the store shared by replicas). The buckets are
// the recipient's address (a contract principal counts as its deployer),
// or its stacking bucket, or, with an API token, the token's per-address
// bucket and its quota; and the client's IP (IPv6 by /64) unless the grant
// skips it. The caller releases the slots of a drip that sent nothing.
//
// # Token lock-out
//
// Failed API-token attempts count against the client address (IPv6 by
// /64), in a Limiter (Config.Failures: memory, or the store shared by
// replicas), whatever the recipient or asset. After 5 failures within
// 10 minutes the address is locked out: a request from it with a Bearer
// token is refused (429, CheckTokenLockout) without being judged, and
// counts as one more failure, so the wait (Rejection.RetryAfter) doubles
// to 20 and 40 minutes and then stays at an hour while the attempts go
// on; an hour without failures forgets them. Requests without a token
// from the address are refused too, by every process that has seen the
// lock-out. A right token is no failure and passes until the lock-out;
// during it, it is refused and counted like a wrong one, so a refusal
// never tells which guess was right. An unknown client address is never
// locked out.
//
// # Tokens file
//
// One token per line; blank lines and lines starting with '#' are ignored,
// and a field starting with '#' after the required ones starts a trailing
// comment. Fields are separated by whitespace:
//
//	NAME TOKEN QUOTA [PER_ADDRESS]
//
// NAME is 1 to 64 of [a-zA-Z0-9._-], unique in the file; it shows in logs.
// TOKEN is either the token itself (16 to 1024 printable ASCII characters)
// or "sha256:" followed by the 64 hex digits of its SHA-256, so that the file
// need not hold the token. QUOTA bounds all drips made with the token and
// PER_ADDRESS the drips per recipient (default: QUOTA), both as
// "N/duration" with a Go duration, e.g. "100/1h" or "1000/24h". Two entries
// with the same name or the same token are an error. Example:
//
//	# name        token                                                                    quota    per address
//	ci-pipeline   sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  500/1h   20/1h
//	workshop      e3b0c44298fc1c149afbf4c8                                                  100/24h
//
// The file is re-read periodically (Config.TokensReload); when its content
// changed and parses, the new set replaces the old one at once. A file that
// is gone or does not parse revokes every token until it is fixed (fail
// closed: an edit removing a leaked token must not leave it valid because of
// a typo elsewhere); the error is logged by file and line, never with a
// token.
package guard
