package guard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// maxBalanceEntries bounds the balance cache: a flood of distinct
// recipients costs node reads, not memory.
const maxBalanceEntries = 10_000

// balanceCache holds recipients' balances for a TTL.
type balanceCache struct {
	ttl time.Duration
	max int

	mu        sync.Mutex
	m         map[string]balanceEntry
	lastSweep time.Time
}

type balanceEntry struct {
	held    uint64
	expires time.Time
}

func newBalanceCache(ttl time.Duration, maxEntries int) *balanceCache {
	return &balanceCache{ttl: ttl, max: maxEntries, m: map[string]balanceEntry{}}
}

func (b *balanceCache) get(key string, now time.Time) (uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[key]
	if !ok || !now.Before(e.expires) {
		return 0, false
	}
	return e.held, true
}

func (b *balanceCache) put(key string, held uint64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.lastSweep) >= b.ttl || len(b.m) >= b.max {
		b.lastSweep = now
		for k, e := range b.m {
			if !now.Before(e.expires) {
				delete(b.m, k)
			}
		}
	}
	if _, ok := b.m[key]; !ok && len(b.m) >= b.max {
		// Still full of live entries: drop an arbitrary one (map order).
		for k := range b.m {
			delete(b.m, k)
			break
		}
	}
	b.m[key] = balanceEntry{held: held, expires: now.Add(b.ttl)}
}

func (b *balanceCache) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}

// checkBalance refuses a recipient already holding the cap. A failed read
// lets the drip through: the engine fails it anyway if the node is down.
func (c *Chain) checkBalance(ctx context.Context, p stacks.Principal) *Rejection {
	if c.balances == nil {
		return nil
	}
	key := p.String()
	now := c.clock.Now()
	held, ok := c.balances.get(key, now)
	if !ok {
		var err error
		held, err = c.readHeld(ctx, key)
		if err != nil {
			c.log.Warn("guard: balance cap not checked: account read failed; letting the drip proceed", "recipient", key, "err", err)
			return nil
		}
		c.balances.put(key, held, now)
	}
	if held < c.balanceCap {
		return nil
	}
	return &Rejection{
		Check:   CheckBalanceCap,
		Status:  http.StatusForbidden,
		Reason:  "balance_cap",
		Message: fmt.Sprintf("This address already holds %s STX or more, the most this faucet tops up to.", formatSTX(c.balanceCap)),
	}
}

// readHeld returns balance plus locked: stacked STX are still held.
func (c *Chain) readHeld(ctx context.Context, principal string) (uint64, error) {
	acct, err := c.accounts.Account(ctx, principal)
	if err != nil {
		return 0, fmt.Errorf("read account %s: %w", principal, err)
	}
	if acct == nil {
		return 0, errors.New("read account " + principal + ": no account returned")
	}
	held := acct.Balance + acct.Locked
	if held < acct.Balance { // saturate rather than wrap
		held = ^uint64(0)
	}
	return held, nil
}

// formatSTX renders µSTX as STX without trailing zeros: 500000000 → "500",
// 1500000 → "1.5".
func formatSTX(micro uint64) string {
	whole, frac := micro/1_000_000, micro%1_000_000
	s := strconv.FormatUint(whole, 10)
	if frac == 0 {
		return s
	}
	f := strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	return s + "." + f
}
