package guard

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// CheckTokenLockout refuses a client address after too many failed API-token
// attempts (see "Token lock-out" in the package doc).
const CheckTokenLockout = "token_lockout"

// lockoutTiers are the lock-out's sliding windows. Every failed attempt
// takes a slot in each tier's bucket; tier k locks the address out while
// its bucket holds Requests slots, until the Requests-th newest leaves the
// Window. Each tier asks one failure more over twice the window, so a burst
// of guesses is told to wait 10, 20, 40, then 60 minutes: exponential,
// capped at an hour, and an hour without failures forgets them all. No
// wrong token is judged while a tier is full, so an address gets at most
// the last tier's Requests (8) judged wrong tokens per hour.
var lockoutTiers = []Limit{
	{Requests: 5, Window: 10 * time.Minute},
	{Requests: 6, Window: 20 * time.Minute},
	{Requests: 7, Window: 40 * time.Minute},
	{Requests: 8, Window: time.Hour},
}

// maxLockoutSeen bounds the replica's memory of locked-out addresses.
const maxLockoutSeen = 10_000

// lockout counts failed API-token attempts per client address (IPv6 by /64)
// in a Limiter, so that replicas sharing the store share the count.
type lockout struct {
	store Limiter
	log   *slog.Logger

	// seen is when each address this replica found locked out is free
	// again. Requests without a token, and with a right one, are checked
	// against it alone: the store is asked only about wrong tokens and
	// addresses seen locked out, so a busy CI pipeline costs it nothing.
	mu        sync.Mutex
	seen      map[string]time.Time
	lastSweep time.Time
}

func newLockout(store Limiter, log *slog.Logger) *lockout {
	if store == nil {
		store = NewMemoryLimiter()
	}
	return &lockout{store: store, log: log, seen: map[string]time.Time{}}
}

// lockoutBuckets are ip's bucket in each tier, each with requests slots
// (0: the tier's own). The window is in the key: a bucket must always be
// read with the same window (MemoryLimiter trims by it).
func lockoutBuckets(ip netip.Addr, requests int) []Bucket {
	key := ipBucketKey(ip)
	out := make([]Bucket, len(lockoutTiers))
	for i, t := range lockoutTiers {
		if requests > 0 {
			t.Requests = requests
		}
		out[i] = Bucket{Key: "authfail:" + t.Window.String() + ":" + key, Limit: t}
	}
	return out
}

// judge counts an API-token attempt from ip whose token is right or not,
// and returns how long ip is locked out (0: judge the token as usual).
//
// A right token from an address not seen locked out costs nothing. A wrong
// one is recorded as a failure, and a right one from an address seen
// locked out is treated exactly like a wrong one (it counts, and is
// refused while the lock-out holds), so that a 429 never tells a guesser
// which of its guesses was right.
func (l *lockout) judge(ctx context.Context, now time.Time, ip netip.Addr, right bool) (time.Duration, error) {
	if right && l.seenLocked(ip, now) == 0 {
		return 0, nil
	}
	// Takes a slot in every tier unless one is full (locked out).
	res, wait, ok, err := l.store.Reserve(ctx, now, lockoutBuckets(ip, 0))
	if err != nil {
		return 0, fmt.Errorf("count API-token attempt: %w", err)
	}
	if !ok {
		return l.refuse(ctx, now, ip, wait)
	}
	if right {
		// The lock-out has lifted: a right token is no failure.
		l.forget(ip)
		l.release(ctx, res)
		return 0, nil
	}
	// The failure is recorded and this attempt is answered 401. If it
	// completed a lock-out, the next request is refused even with a right
	// token: find out now, by a read that takes a slot only when none is
	// full and then gives it back.
	wait, locked, err := l.peek(ctx, now, ip)
	if err != nil {
		return 0, err
	}
	if locked {
		l.remember(ip, now.Add(wait), now)
	}
	return 0, nil
}

// peek reads whether ip is locked out, and for how long, without counting
// an attempt: it takes a slot only when none is full, and gives it back.
func (l *lockout) peek(ctx context.Context, now time.Time, ip netip.Addr) (time.Duration, bool, error) {
	res, wait, ok, err := l.store.Reserve(ctx, now, lockoutBuckets(ip, 0))
	if err != nil {
		return 0, false, fmt.Errorf("read API-token lock-out: %w", err)
	}
	if ok {
		l.release(ctx, res)
		return 0, false, nil
	}
	return wait, true, nil
}

// refuse answers an attempt from a locked-out ip. The attempt counts too,
// so a client that keeps trying keeps its lock-out growing; it is
// recorded only while the last tier has room, since more would lock out
// no longer, which also bounds what one address makes the store hold.
func (l *lockout) refuse(ctx context.Context, now time.Time, ip netip.Addr, wait time.Duration) (time.Duration, error) {
	top := lockoutTiers[len(lockoutTiers)-1].Requests
	_, _, recorded, err := l.store.Reserve(ctx, now, lockoutBuckets(ip, top))
	if err != nil {
		return 0, fmt.Errorf("count API-token attempt: %w", err)
	}
	if recorded {
		// Read again so Retry-After includes this attempt: a client that
		// waits as told is then judged, not refused anew.
		after, locked, err := l.peek(ctx, now, ip)
		if err != nil {
			return 0, err
		}
		// Not locked: another process withdrew an attempt meanwhile, so
		// the wait read before stands.
		if locked {
			wait = after
		}
	}
	l.remember(ip, now.Add(wait), now)
	return wait, nil
}

// release gives back slots that record no failure. A failed release
// leaves one failure too many counted: the safe side, so it is logged and
// the request goes on.
func (l *lockout) release(ctx context.Context, res Reservation) {
	if err := l.store.Release(ctx, res); err != nil {
		l.log.Warn("guard: giving back an API-token attempt failed; it counts as a failure", "err", err)
	}
}

// remember notes that ip is locked out until until.
func (l *lockout) remember(ip netip.Addr, until, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	key := ipBucketKey(ip)
	if _, ok := l.seen[key]; !ok && len(l.seen) >= maxLockoutSeen {
		return // full of live lock-outs: wrong tokens still ask the store
	}
	l.seen[key] = until
}

func (l *lockout) forget(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.seen, ipBucketKey(ip))
}

// seenLocked returns how long ip stays locked out as this replica last saw
// it; 0 when it is not.
func (l *lockout) seenLocked(ip netip.Addr, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) == 0 {
		return 0
	}
	l.sweep(now)
	until, ok := l.seen[ipBucketKey(ip)]
	if !ok || !until.After(now) {
		return 0
	}
	return until.Sub(now)
}

// sweep forgets lifted lock-outs, at most once a minute.
func (l *lockout) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, until := range l.seen {
		if !until.After(now) {
			delete(l.seen, k)
		}
	}
}

func lockedOut(wait time.Duration) *Rejection {
	return &Rejection{
		Check: CheckTokenLockout, Status: http.StatusTooManyRequests, Reason: "token_lockout", RetryAfter: wait,
		Message: "Too many failed API token attempts from this client address: wait before trying again.",
	}
}
