package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
)

// Peers: every replica of a shared store records where the others reach
// it (AdvertisePeer), and KeyHolder answers which replica holds a key now
// and where it answers, so that a replica without the Bitcoin key forwards
// BTC drips to the one with it.

const (
	sqlAdvertisePeer = `INSERT INTO replica_peers (owner, peer_url, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (owner) DO UPDATE SET peer_url = excluded.peer_url, updated_at = excluded.updated_at`
	sqlForgetPeer = `DELETE FROM replica_peers WHERE owner = $1`
	// The owner of record is the holder while the key's advisory lock is
	// held: a replica takes the lock before it records itself.
	sqlKeyHolder = `SELECT COALESCE(p.peer_url, ''),
  EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
    AND classid = $2::int4::oid AND objid = $3::int4::oid
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
FROM key_owners o LEFT JOIN replica_peers p ON p.owner = o.owner WHERE o.key = $1`
)

// AdvertisePeer records url as where this replica answers the others.
func (p *Postgres) AdvertisePeer(ctx context.Context, url string) error {
	if url == "" {
		return errors.New("advertise peer: empty URL")
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.ConnectTimeout)
	defer cancel()
	if _, err := p.pool.Exec(ctx, sqlAdvertisePeer, p.opts.ReplicaName, url, p.opts.Clock.Now().UnixNano()); err != nil {
		return p.err("advertise peer", err)
	}
	return nil
}

// ForgetPeer removes this replica's record (at a clean exit).
func (p *Postgres) ForgetPeer(ctx context.Context) error {
	if _, err := p.pool.Exec(ctx, sqlForgetPeer, p.opts.ReplicaName); err != nil {
		return p.err("forget peer", err)
	}
	return nil
}

// KeyHolder reports the peer URL of the replica holding key; held is false
// while no replica holds it. url is "" for a holder that advertised none.
func (p *Postgres) KeyHolder(ctx context.Context, key string) (url string, held bool, err error) {
	err = p.pool.QueryRow(ctx, sqlKeyHolder, key, nsKey, keyLock(key)).Scan(&url, &held)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, p.err(fmt.Sprintf("key holder of %s", key), err)
	}
	return url, held, nil
}

// keyLock is key's advisory lock id in namespace nsKey.
func keyLock(key string) int32 {
	f := fnv.New32a()
	f.Write([]byte(key))
	return int32(f.Sum32())
}
