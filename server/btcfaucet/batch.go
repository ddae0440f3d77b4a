package btcfaucet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// Batching: under load, drips that arrive together are paid by one
// transaction with one output each, as send-many does for STX. One
// transaction per drip would chain every payout on the previous one's
// change, and the node's limit of 25 unconfirmed ancestors would cap the
// faucet at a few dozen drips per block.

// MaxBatch is the most drips one payout transaction pays: far below the
// standard weight limit (a P2TR output is 43 vbytes).
const MaxBatch = settings.BTCMaxBatch

// ErrInvalidDrip: a drip that no transaction could pay (another network's
// address, dust); refused before it can spoil a batch.
var ErrInvalidDrip = errors.New("invalid drip")

// Batcher gathers drips into payouts. Safe for concurrent use.
type Batcher struct {
	payer  *Payer
	max    int
	window time.Duration
	clock  clock.WithDelayedExecution

	mu      sync.Mutex
	queue   []*queued
	flushAt clock.Timer
}

type queued struct {
	payout bitcoin.Payout
	done   chan struct{}
	rec    *PayoutRecord
	err    error
}

// NewBatcher pays through p, at most maxDrips drips per transaction (1..
// MaxBatch), the first drip of a batch waiting up to window of clk (nil:
// the real clock) for others.
func NewBatcher(p *Payer, maxDrips int, window time.Duration, clk clock.WithDelayedExecution) (*Batcher, error) {
	if maxDrips < 1 || maxDrips > MaxBatch {
		return nil, fmt.Errorf("btc batcher: at most %d drips per payout, got %d", MaxBatch, maxDrips)
	}
	if window < 0 {
		return nil, fmt.Errorf("btc batcher: window %s is negative", window)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Batcher{payer: p, max: maxDrips, window: window, clock: clk}, nil
}

// Pay pays one drip, in a transaction it may share with others that arrive
// within the window; every drip of a batch gets the same record (or the
// same error: a batch is one transaction).
func (b *Batcher) Pay(ctx context.Context, po bitcoin.Payout) (*PayoutRecord, error) {
	net := b.payer.key.Network()
	switch {
	case po.Address.IsZero() || po.Address.Network() != net:
		return nil, fmt.Errorf("btc batcher: %w: the address is not a %s address", ErrInvalidDrip, net)
	case po.Amount < bitcoin.DustThreshold(po.Address.PkScript()):
		return nil, fmt.Errorf("btc batcher: %w: %d sats to %s is dust", ErrInvalidDrip, po.Amount, po.Address)
	}
	q := &queued{payout: po, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, q)
	switch {
	case len(b.queue) >= b.max:
		batch := b.take()
		b.mu.Unlock()
		// The payout outlives a caller that gives up: the drips of the
		// others in the batch depend on it.
		go b.flush(context.WithoutCancel(ctx), batch)
	case len(b.queue) == 1:
		b.flushAt = b.clock.AfterFunc(b.window, func() {
			// A goroutine of its own: a fake clock calls this while it
			// holds its lock, which take (Stop) and the payout (Now) need.
			go func() {
				b.mu.Lock()
				batch := b.take()
				b.mu.Unlock()
				b.flush(context.WithoutCancel(ctx), batch)
			}()
		})
		b.mu.Unlock()
	default:
		b.mu.Unlock()
	}
	select {
	case <-q.done:
		return q.rec, q.err
	case <-ctx.Done():
	}
	// Given up on: a drip still queued is withdrawn, surely unpaid; one
	// whose batch is being paid waits for the outcome, since it may be
	// paid (an answer of "failed" would invite a second drip).
	b.mu.Lock()
	for i, other := range b.queue {
		if other == q {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			if len(b.queue) == 0 && b.flushAt != nil {
				b.flushAt.Stop()
				b.flushAt = nil
			}
			b.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	b.mu.Unlock()
	<-q.done
	return q.rec, q.err
}

// take empties the queue and stops its timer. Caller holds mu.
func (b *Batcher) take() []*queued {
	if b.flushAt != nil {
		b.flushAt.Stop()
		b.flushAt = nil
	}
	batch := b.queue
	b.queue = nil
	return batch
}

// flush pays a batch in one transaction and answers every drip in it.
func (b *Batcher) flush(ctx context.Context, batch []*queued) {
	if len(batch) == 0 {
		return
	}
	payouts := make([]bitcoin.Payout, len(batch))
	for i, q := range batch {
		payouts[i] = q.payout
	}
	rec, err := b.payer.Pay(ctx, payouts)
	for _, q := range batch {
		q.rec, q.err = rec, err
		close(q.done)
	}
}
