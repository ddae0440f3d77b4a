package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// BTC key ownership on Postgres (btcfaucet.Owner): the STX keys' mechanism
// (owner.go) for one key that is not spread by quota. A hold is a session
// advisory lock (nsBTCKey, hash of the address) on a connection of its
// own, which Postgres drops when the connection or the pod dies (the lock
// connection's keepalives notice a vanished peer within about half a
// minute); taking it bumps the key's epoch in key_owners, under the BTC
// address (STX addresses, which start with S, cannot collide). The
// ledger's writes check that epoch in the same statement, holding the row
// FOR SHARE, so a replica that lost the key cannot write once another has
// taken it, even before it notices.

// nsBTCKey is the advisory lock namespace of BTC keys: apart from nsKey,
// whose lock ids only STX keys are checked against.
const nsBTCKey int32 = 0x4643424b // "FCBK"

const (
	sqlBTCEpoch     = `SELECT epoch FROM key_owners WHERE key = $1`
	sqlBTCPutFenced = `WITH owner AS (SELECT 1 FROM key_owners WHERE key = $1 AND epoch = $7 FOR SHARE)
INSERT INTO btc_payouts (key_address, txid, raw, record, state, sent_at)
SELECT $1::text, $2::text, $3::bytea, $4::text, $5::text, $6::bigint FROM owner
ON CONFLICT (key_address, txid) DO UPDATE SET raw = excluded.raw, record = excluded.record, state = excluded.state, sent_at = excluded.sent_at`
	sqlBTCDeleteFenced = `WITH owner AS (SELECT 1 FROM key_owners WHERE key = $1 AND epoch = $3 FOR SHARE),
gone AS (DELETE FROM btc_payouts WHERE key_address = $1 AND txid = $2 AND EXISTS (SELECT 1 FROM owner))
SELECT EXISTS (SELECT 1 FROM owner)`
)

// btcOwners are a store's BTC key holds, by address.
type btcOwners struct {
	mu     sync.Mutex
	m      map[string]*pgBTCOwner
	closed bool
}

// BTCOwner is this replica's hold on the BTC key whose address is key.
// From the first call on, BTCLedger(key)'s writes are fenced: they succeed
// only while the hold is held, and otherwise fail wrapping
// faucet.ErrNotOwner. Every call for one key returns the same hold.
func (p *Postgres) BTCOwner(key string) btcfaucet.Owner { return p.btcOwner(key, true) }

// btcOwner returns key's hold, creating it if create; nil when there is
// none (BTCLedger(key) is not fenced).
func (p *Postgres) btcOwner(key string, create bool) *pgBTCOwner {
	p.btc.mu.Lock()
	defer p.btc.mu.Unlock()
	o := p.btc.m[key]
	if o == nil && create {
		f := fnv.New32a()
		f.Write([]byte(key))
		o = &pgBTCOwner{p: p, key: key, lock: int32(f.Sum32())}
		if p.btc.m == nil {
			p.btc.m = map[string]*pgBTCOwner{}
		}
		p.btc.m[key] = o
	}
	return o
}

// closeBTCOwners releases every hold, for Close.
func (p *Postgres) closeBTCOwners() {
	p.btc.mu.Lock()
	p.btc.closed = true
	owners := make([]*pgBTCOwner, 0, len(p.btc.m))
	for _, o := range p.btc.m {
		owners = append(owners, o)
	}
	p.btc.mu.Unlock()
	for _, o := range owners {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = o.Release(ctx)
		cancel()
	}
}

type pgBTCOwner struct {
	p    *Postgres
	key  string
	lock int32
	// epoch is the epoch this hold took, 0 while it holds nothing; ledger
	// writes read it without waiting for mu.
	epoch atomic.Int64

	mu   sync.Mutex // serialises Acquire, Renew and Release
	conn *pgx.Conn  // the lock's connection while held
}

// Ledger is bound to the hold in force when it is called: taken after
// Acquire, its writes stop for good when that hold ends, even if this
// process takes the key again (the new hold gets a new Ledger). Taken
// while nothing is held, it follows whichever hold is current.
func (o *pgBTCOwner) Ledger() btcfaucet.Ledger {
	return pgBTC{p: o.p, key: o.key, held: o.epoch.Load()}
}

// timeout bounds each statement on the lock connection, so that a silent
// network failure is noticed.
func (o *pgBTCOwner) timeout() time.Duration { return max(5*time.Second, 3*o.p.opts.OwnershipInterval) }

func (o *pgBTCOwner) Acquire(ctx context.Context) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn != nil {
		if err := o.renewLocked(ctx); err != nil {
			return false, err
		}
		return true, nil
	}
	o.p.btc.mu.Lock()
	closed := o.p.btc.closed
	o.p.btc.mu.Unlock()
	if closed {
		return false, fmt.Errorf("btc key ownership %s: the store is closed", o.key)
	}
	op := "btc key ownership " + o.key
	cctx, cancel := context.WithTimeout(ctx, o.p.opts.ConnectTimeout)
	conn, err := pgx.ConnectConfig(cctx, o.p.lockCfg)
	cancel()
	if err != nil {
		return false, o.p.err(op+": connect", err)
	}
	qctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	var ok bool
	var epoch int64
	if err = conn.QueryRow(qctx, sqlTryLock, nsBTCKey, o.lock).Scan(&ok); err == nil && ok {
		// The bump waits for a write of the previous owner still under
		// way (it holds the row FOR SHARE) and fences out the rest.
		err = conn.QueryRow(qctx, sqlBumpEpoch, o.key, replicaName(o.p.opts)).Scan(&epoch)
	}
	if err != nil || !ok {
		// Closing the connection drops the lock, if it was taken.
		closeConn(ctx, conn)
		if err != nil {
			return false, o.p.err(op, err)
		}
		return false, nil
	}
	o.conn = conn
	o.epoch.Store(epoch)
	o.p.log.Info("btc key acquired", "key", o.key, "epoch", epoch)
	return true, nil
}

func (o *pgBTCOwner) Renew(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.renewLocked(ctx)
}

// renewLocked checks the hold through its own connection: an answer means
// the session, and so its lock, is alive; the epoch must still be ours.
// On failure the hold is dropped.
func (o *pgBTCOwner) renewLocked(ctx context.Context) error {
	op := "btc key ownership " + o.key
	if o.conn == nil {
		return fmt.Errorf("%s: %w", op, faucet.ErrNotOwner)
	}
	qctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	var epoch int64
	err := o.conn.QueryRow(qctx, sqlBTCEpoch, o.key).Scan(&epoch)
	switch {
	case err != nil:
		// pgx closes a connection whose statement was interrupted, so the
		// lock is gone even when the caller merely gave up.
		o.dropLocked(ctx)
		o.p.log.Warn("btc key lost: its lock connection failed", "key", o.key, "err", o.p.err(op, err))
		return fmt.Errorf("%s: %w (%w)", op, faucet.ErrNotOwner, o.p.err("renew", err))
	case epoch != o.epoch.Load():
		held := o.epoch.Load()
		o.dropLocked(ctx)
		o.p.log.Warn("btc key lost: another owner took its epoch", "key", o.key, "epoch", held, "now", epoch)
		return fmt.Errorf("%s: %w (epoch %d, now %d)", op, faucet.ErrNotOwner, held, epoch)
	}
	return nil
}

func (o *pgBTCOwner) Release(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn == nil {
		return nil
	}
	o.epoch.Store(0) // fence this process's writes before another can take the key
	qctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	var ok bool
	err := o.conn.QueryRow(qctx, sqlUnlock, nsBTCKey, o.lock).Scan(&ok)
	o.dropLocked(ctx) // closing the connection releases the lock in any case
	o.p.log.Info("btc key released", "key", o.key)
	if err != nil {
		return o.p.err("btc key ownership "+o.key+": unlock", err)
	}
	return nil
}

// dropLocked forgets the hold and closes its connection.
func (o *pgBTCOwner) dropLocked(ctx context.Context) {
	o.epoch.Store(0)
	closeConn(ctx, o.conn)
	o.conn = nil
}

// closeConn closes c within a second, whatever ctx says.
func closeConn(ctx context.Context, c *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = c.Close(cctx)
}

// replicaName names this process in key_owners.owner.
func replicaName(opts Options) string {
	if opts.ReplicaName != "" {
		return opts.ReplicaName
	}
	host, _ := os.Hostname()
	return host + "/" + fmt.Sprint(os.Getpid())
}

// btcEpoch says whether key's ledger writes are fenced and, if so, the
// epoch they must match: 0 when this process does not hold the key.
func (p *Postgres) btcEpoch(key string) (epoch int64, fenced bool) {
	o := p.btcOwner(key, false)
	if o == nil {
		return 0, false
	}
	return o.epoch.Load(), true
}
