package nodepool

import (
	"context"
	"errors"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
)

// Broadcast posts rawTx to every node in rotation at once and returns the
// txid as soon as one accepts it; the other posts finish in the
// background. Only when no node accepts is the answer an error: a mempool
// rejection when a node gave one (so the caller classifies a real
// refusal), else the last node's failure. A transaction one node accepted
// is then watched until every node holds it (see Run).
func (p *Pool) Broadcast(ctx context.Context, rawTx []byte) (string, error) {
	targets := p.broadcastTargets()
	if len(p.members) == 1 {
		txid, err := targets[0].c.Broadcast(ctx, rawTx)
		p.noteBroadcast(targets[0], err)
		return txid, err
	}
	type result struct {
		txid string
		err  error
	}
	results := make(chan result, len(targets))
	// A post in flight is not cut short when the caller has its answer: the
	// other nodes should get the transaction too. Each client call has its
	// own timeout.
	sendCtx := context.WithoutCancel(ctx)
	for _, m := range targets {
		go func() {
			txid, err := m.c.Broadcast(sendCtx, rawTx)
			p.noteBroadcast(m, err)
			results <- result{txid, err}
		}()
	}
	var rejection, last error
	for range targets {
		select {
		case <-ctx.Done():
			return "", &node.TransportError{Call: node.CallBroadcast, Err: ctx.Err()}
		case r := <-results:
			if r.err == nil {
				p.track(r.txid, rawTx)
				return r.txid, nil
			}
			var rej *node.RejectionError
			if rejection == nil && errors.As(r.err, &rej) && !rej.IsServerFailure() {
				rejection = r.err
			}
			last = r.err
		}
	}
	if rejection != nil {
		return "", rejection
	}
	return "", last
}

// broadcastTargets are the nodes in rotation and those not judged yet, or
// every node when none is.
func (p *Pool) broadcastTargets() []*member {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*member
	for _, m := range p.members {
		if m.state != stateOut {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = append(out, p.members...)
	}
	return out
}

// noteBroadcast counts a post's outcome and takes a node that did not
// answer out of rotation.
func (p *Pool) noteBroadcast(m *member, err error) {
	var rej *node.RejectionError
	switch {
	case err == nil:
		p.mu.Lock()
		m.accepted++
		p.mu.Unlock()
	case errors.As(err, &rej):
		p.mu.Lock()
		m.refused++
		p.mu.Unlock()
	default:
		p.mu.Lock()
		m.unanswered++
		p.mu.Unlock()
		if nodeFailed(err) && !errors.Is(err, context.Canceled) {
			p.failed(m, err)
		}
	}
}

// sentTx is a transaction a node accepted, watched until every node in
// rotation holds it.
type sentTx struct {
	txid    string
	raw     []byte
	at      time.Time
	checked time.Time
	has     map[*member]bool
}

// sentTracker keeps the watched transactions in the order they were sent.
// It is guarded by Pool.mu.
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
	tx := &sentTx{txid: txid, raw: raw, at: p.cfg.Now(), has: map[*member]bool{}}
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
		m  *member
	}
	p.mu.Lock()
	now := p.cfg.Now()
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
	p.forgetLocked(p.cfg.Now(), done)
	p.mu.Unlock()
}

// resend posts tx again to a node that lacks it; it reports whether the
// node took it and whether tx is settled (mined or replaced).
func (p *Pool) resend(ctx context.Context, m *member, tx *sentTx) (took, settled bool) {
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
