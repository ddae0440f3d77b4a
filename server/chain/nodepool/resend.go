package nodepool

import (
	"context"
	"errors"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
)

// sentTx is a transaction a node accepted, watched until every node in
// rotation holds it.
type sentTx struct {
	txid    string
	raw     []byte
	at      time.Time
	checked time.Time
	has     map[*member[*node.Client]]bool
}

// sentTracker keeps the watched transactions in the order they were sent.
// It is guarded by group.mu.
type sentTracker struct {
	byID  map[string]*sentTx
	order []*sentTx
}

func newSentTracker() *sentTracker { return &sentTracker{byID: map[string]*sentTx{}} }

func (p *Pool) track(txid string, raw []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sent
	if s.byID[txid] != nil {
		return
	}
	if len(s.order) >= maxTracked {
		delete(s.byID, s.order[0].txid)
		s.order = s.order[1:]
	}
	tx := &sentTx{txid: txid, raw: raw, at: p.cfg.Clock.Now(), has: map[*member[*node.Client]]bool{}}
	s.byID[txid] = tx
	s.order = append(s.order, tx)
}

// forgetLocked drops transactions that every node in rotation holds, that
// are older than TrackFor, or that done marks settled.
func (p *Pool) forgetLocked(now time.Time, done map[string]bool) {
	s := p.sent
	kept := s.order[:0]
	for _, tx := range s.order {
		if done[tx.txid] || now.Sub(tx.at) >= p.cfg.TrackFor || p.heldByAllLocked(tx) {
			delete(s.byID, tx.txid)
			continue
		}
		kept = append(kept, tx)
	}
	clear(s.order[len(kept):])
	s.order = kept
}

func (p *Pool) heldByAllLocked(tx *sentTx) bool {
	in := 0
	for _, m := range p.members {
		if m.state == stateIn {
			in++
			if !tx.has[m] {
				return false
			}
		}
	}
	return in > 0
}

// maxChecksPerRound bounds one round's mempool lookups, so that a burst of
// sends cannot hold up the probes.
const maxChecksPerRound = 256

// checkSent asks each node in rotation whether it holds the transactions
// sent at least ResendAfter ago, and posts a transaction again to a node
// that lacks it. A node that then refuses it with BadNonce has it mined (or
// a replacement): it is settled.
func (p *Pool) checkSent(ctx context.Context) {
	if len(p.members) < 2 {
		return
	}
	type check struct {
		tx *sentTx
		m  *member[*node.Client]
	}
	p.mu.Lock()
	now := p.cfg.Clock.Now()
	var checks []check
	for _, tx := range p.sent.order {
		if len(checks) >= maxChecksPerRound {
			break
		}
		if now.Sub(tx.at) < p.cfg.ResendAfter || now.Sub(tx.checked) < p.cfg.ResendAfter {
			continue
		}
		tx.checked = now
		for _, m := range p.members {
			if m.state == stateIn && !tx.has[m] {
				checks = append(checks, check{tx, m})
			}
		}
	}
	p.mu.Unlock()

	done := map[string]bool{}
	for _, c := range checks {
		if ctx.Err() != nil {
			return
		}
		found, err := c.m.c.MempoolTx(ctx, c.tx.txid)
		if err != nil {
			continue // the probes judge the node
		}
		if !found {
			found, done[c.tx.txid] = p.resend(ctx, c.m, c.tx)
		}
		if found {
			p.mu.Lock()
			c.tx.has[c.m] = true
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	p.forgetLocked(p.cfg.Clock.Now(), done)
	p.mu.Unlock()
}

// resend posts tx again to a node that lacks it; it reports whether the
// node took it and whether tx is settled (mined or replaced).
func (p *Pool) resend(ctx context.Context, m *member[*node.Client], tx *sentTx) (took, settled bool) {
	_, err := m.c.Broadcast(ctx, tx.raw)
	var rej *node.RejectionError
	switch {
	case err == nil:
		p.mu.Lock()
		m.resent++
		p.mu.Unlock()
		p.log.Info("sent a transaction again to a node that lacked it", "node", m.c.URL(), "txid", "0x"+tx.txid)
		return false, false // took it, or dropped it again: look again next round
	case errors.As(err, &rej) && rej.Reason == node.ReasonBadNonce:
		return false, true
	case errors.As(err, &rej) && rej.Reason == node.ReasonConflictingNonceInMempool:
		return true, false // it holds a transaction of that nonce already
	default:
		return false, false
	}
}
