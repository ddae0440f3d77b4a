package peer

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/internal/ttlcache"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// Locator finds the replica that holds a key; *store.Postgres has it.
type Locator interface {
	// KeyHolder reports the peer URL of the replica holding key now; held
	// is false while no replica does (a handover under way).
	KeyHolder(ctx context.Context, key string) (url string, held bool, err error)
}

// Config configures a BTC.
type Config struct {
	Local  LocalBTC // this replica's engine
	Auth   *Auth
	Locate Locator
	// Key is the Bitcoin key's name in the ownership protocol (its
	// address); Self this replica's own peer URL.
	Key, Self string
	// Client sends the forwarded requests (nil: one with a 2 s dial
	// timeout and no proxy).
	Client *http.Client
	// HandoverWait is how long a drip waits for a replica to hold the key
	// (a handover after a pod went away) before it fails (0: 20 s).
	HandoverWait time.Duration
	// StatusTTL is how long the payer's status is reused (0: 2 s).
	StatusTTL time.Duration
	Clock     clock.Clock // nil: the real clock
	Logger    *slog.Logger
}

// BTC is the BTC engine every replica's HTTP layer uses: this replica's
// own engine while it holds the key, otherwise a forwarder to the replica
// that does. It has the methods of server.BTCFaucet.
type BTC struct {
	cfg    Config
	status ttlcache.Value[btcfaucet.Status]
	// holder is the last holder's peer URL found in the store, reused
	// until a request to it fails or it says it no longer holds the key:
	// a forwarded drip then costs no store round trip.
	holder atomic.Pointer[string]
}

// New returns cfg's BTC.
func New(cfg Config) (*BTC, error) {
	if cfg.Local == nil || cfg.Auth == nil || cfg.Locate == nil || cfg.Key == "" {
		return nil, errors.New("peer: a local engine, an Auth, a Locator and the key's name are required")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     time.Minute,
		}}
	}
	if cfg.HandoverWait <= 0 {
		cfg.HandoverWait = 20 * time.Second
	}
	if cfg.StatusTTL <= 0 {
		cfg.StatusTTL = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &BTC{cfg: cfg}
	b.status = ttlcache.Value[btcfaucet.Status]{TTL: cfg.StatusTTL, FetchTimeout: time.Second, Clock: cfg.Clock}
	return b, nil
}

// local reports whether this replica pays (it holds the key).
func (b *BTC) local() bool { return !b.cfg.Local.Status().Standby }

// retryTimeout bounds the second ask after a lost answer: the payer
// gives a payout PayTimeout (30 s) at most.
const retryTimeout = 35 * time.Second

// retryPause is the wait between two tries of a drip during a handover.
const retryPause = 100 * time.Millisecond

// ErrPayerLost: the replica paying a forwarded drip went away before it
// answered; the drip may have been paid (its record is resent by the
// next holder of the key), so it is not tried elsewhere.
var ErrPayerLost = errors.New("the replica paying the drip went away before it answered")

// DripAmount pays amount satoshis to addr: here, or on the replica that
// holds the key. During a handover (no replica holds it, or the holder is
// giving it up) it waits up to HandoverWait for the next holder; a drip
// is sent to another replica only once the previous one is known not to
// have paid it.
func (b *BTC) DripAmount(ctx context.Context, addr bitcoin.Address, amount int64) (*btcfaucet.Drip, error) {
	deadline := b.cfg.Clock.Now().Add(b.cfg.HandoverWait)
	id := newID()
	body, err := json.Marshal(dripRequest{Address: addr.String(), Amount: amount})
	if err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}
	var last error
	for {
		d, err, again := b.try(ctx, id, body, addr, amount)
		if !again {
			return d, err
		}
		last = err
		if !b.cfg.Clock.Now().Before(deadline) {
			return nil, last
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("btc drip: %w (last: %w)", ctx.Err(), last)
		case <-b.cfg.Clock.After(retryPause):
		}
	}
}

// try makes one attempt; again reports a handover, worth another one.
func (b *BTC) try(ctx context.Context, id string, body []byte, addr bitcoin.Address, amount int64) (*btcfaucet.Drip, error, bool) {
	if b.local() {
		d, err := b.cfg.Local.DripAmount(ctx, addr, amount)
		switch {
		case err == nil:
			return d, nil, false
		case errors.Is(err, btcfaucet.ErrStandby), errors.Is(err, journal.ErrNotOwner):
			return nil, err, true // the key went while we asked: nothing was sent
		case errors.Is(err, btcfaucet.ErrStarting):
			return nil, err, true // just acquired, resuming its journal
		}
		return nil, err, false
	}
	url, held, err := b.holderURL(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("btc faucet: %w: find the replica that pays: %w", btcfaucet.ErrStandby, err), false
	case !held:
		return nil, fmt.Errorf("btc faucet: %w (handover under way)", btcfaucet.ErrStandby), true
	}
	d, err, again := b.forward(ctx, url, id, body)
	if again {
		b.holder.Store(nil) // that replica does not pay (any more): ask the store
	}
	return d, err, again
}

// holderURL is the peer URL of the replica holding the key, other than
// this one: the one remembered, else the store's; held is false while no
// other replica holds it.
func (b *BTC) holderURL(ctx context.Context) (url string, held bool, err error) {
	if u := b.holder.Load(); u != nil {
		return *u, true, nil
	}
	url, held, err = b.cfg.Locate.KeyHolder(ctx, b.cfg.Key)
	if err != nil || !held || url == "" || url == b.cfg.Self {
		return "", false, err
	}
	b.holder.Store(&url)
	return url, true, nil
}

// forward sends one drip to the replica at url.
func (b *BTC) forward(ctx context.Context, url, id string, body []byte) (*btcfaucet.Drip, error, bool) {
	var ans dripAnswer
	status, err := b.call(ctx, url, pathDrip, id, body, &ans)
	switch {
	case err != nil && !sent(err):
		// Not delivered (the holder's pod is gone or not listening):
		// nothing was paid there; find the next holder.
		return nil, fmt.Errorf("btc faucet: %w: forward to %s: %w", btcfaucet.ErrStandby, url, err), true
	case err != nil:
		// Delivered, answer lost: ask the same replica again with the same
		// id, which answers what it did instead of paying again.
		b.cfg.Logger.Warn("forwarded btc drip: the answer was lost; asking again", "peer", url, "err", err)
		var again dripAnswer
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), retryTimeout)
		defer cancel()
		if status, err = b.call(rctx, url, pathDrip, id, body, &again); err != nil {
			return nil, fmt.Errorf("btc faucet: %w (%s): %w", ErrPayerLost, url, err), false
		}
		ans = again
	}
	if status == http.StatusOK {
		raw, err := hex.DecodeString(ans.Raw)
		if err != nil || ans.TxID == "" {
			return nil, fmt.Errorf("btc faucet: the paying replica %s answered a drip without a transaction", url), false
		}
		return &btcfaucet.Drip{TxID: ans.TxID, Raw: raw, Amount: ans.Amount, Batch: ans.Batch, Fee: ans.Fee}, nil, false
	}
	cause := errOf(ans.Reason)
	if cause == nil {
		return nil, fmt.Errorf("btc faucet: the paying replica %s: %d %s", url, status, ans.Error), false
	}
	// A holder giving the key up, or one still resuming, paid nothing.
	again := errors.Is(cause, btcfaucet.ErrStandby) || errors.Is(cause, btcfaucet.ErrStarting)
	return nil, fmt.Errorf("btc faucet (paid by %s): %w: %s", url, cause, ans.Error), again
}

// deliveryError wraps a failure after the request may have reached the
// peer.
type deliveryError struct{ err error }

func (e *deliveryError) Error() string { return e.err.Error() }
func (e *deliveryError) Unwrap() error { return e.err }

// sent reports whether err may have come after the peer got the request.
func sent(err error) bool {
	var d *deliveryError
	return errors.As(err, &d)
}

// call sends one signed request to the peer at base and decodes its JSON
// answer into out. An error before the connection was made is not a
// deliveryError.
func (b *BTC) call(ctx context.Context, base, path, id string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("peer %s: %w", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	b.cfg.Auth.sign(req, id, b.cfg.Clock.Now(), body)
	resp, err := b.cfg.Client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return 0, fmt.Errorf("peer %s: %w", base, err)
		}
		return 0, &deliveryError{fmt.Errorf("peer %s: %w", base, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, &deliveryError{fmt.Errorf("peer %s: read answer: %w", base, err)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, &deliveryError{fmt.Errorf("peer %s: answer %d: %w", base, resp.StatusCode, err)}
	}
	return resp.StatusCode, nil
}

// remote calls path on the key's holder, or fails.
func (b *BTC) remote(ctx context.Context, path string, in, out any) error {
	url, held, err := b.holderURL(ctx)
	if err != nil {
		return err
	}
	if !held {
		return errors.New("peer: no other replica holds the BTC key")
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	status, err := b.call(ctx, url, path, newID(), body, out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("peer %s: %s answered %d", url, path, status)
	}
	if err != nil {
		b.holder.Store(nil)
	}
	return err
}

// Status is the holder's status: this replica's own while it holds the
// key, else the paying replica's (read at most every StatusTTL), else
// this one's standing by.
func (b *BTC) Status() btcfaucet.Status {
	if b.local() {
		return b.cfg.Local.Status()
	}
	st, err := b.status.Get(context.Background(), func(ctx context.Context) (btcfaucet.Status, error) {
		var st btcfaucet.Status
		err := b.remote(ctx, pathStatus, struct{}{}, &st)
		return st, err
	})
	if err != nil || st.Address != b.cfg.Local.Status().Address {
		return b.cfg.Local.Status()
	}
	return st
}

// Payout looks txid up where it was paid: here, or on the holder (which
// has the payouts in flight).
func (b *BTC) Payout(ctx context.Context, txid string) (btcfaucet.PayoutStatus, bool, error) {
	if b.local() {
		return b.cfg.Local.Payout(ctx, txid)
	}
	var ans payoutAnswer
	if err := b.remote(ctx, pathPayout, payoutRequest{TxID: txid}, &ans); err != nil {
		return b.cfg.Local.Payout(ctx, txid)
	}
	return ans.Payout, ans.Found, nil
}

// Balance reads addr's balance from this replica's node.
func (b *BTC) Balance(ctx context.Context, addr bitcoin.Address) (int64, error) {
	return b.cfg.Local.Balance(ctx, addr)
}

// Amounts are the drip sizes (every replica has the same).
func (b *BTC) Amounts() btcfaucet.Amounts { return b.cfg.Local.Amounts() }

// Network is the faucet's network.
func (b *BTC) Network() bitcoin.Network { return b.cfg.Local.Network() }

var _ btcfaucet.Service = (*BTC)(nil)
