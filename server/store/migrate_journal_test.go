package store_test

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// journalVersion is the migration that made the journal of every chain
// out of pending_txs (the Stacks ledger) and btc_payouts (the BTC one).
const journalVersion = 6

// migrateTo builds, in raw's empty database, the schema an older faucet
// left at version v: each migration's own SQL, recorded as applied.
func migrateTo(t *testing.T, raw rawDB, kind string, v int) {
	t.Helper()
	raw.exec(t, store.CreateMigrationsTable)
	for i := 1; i <= v; i++ {
		name, sql, err := store.MigrationSQL(kind, i)
		if err != nil {
			t.Fatal(err)
		}
		raw.exec(t, sql)
		raw.exec(t, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, 0)`, i, name)
	}
}

// stxMetaJSON mirrors faucet's stxMeta (server/faucet/ledger.go): the
// JSON a Stacks entry's Meta holds.
type stxMetaJSON struct {
	Recipient    string `json:"recipient"`
	Asset        string `json:"asset"`
	Amount       int64  `json:"amount"` // the uint64, bit for bit
	Fee          int64  `json:"fee"`
	Rebroadcasts int    `json:"rebroadcasts,omitempty"`
	Replacements int    `json:"replacements,omitempty"`
}

// A database an older faucet left at schema version 5, its two ledgers
// holding transactions in flight, is opened by this one: migration 6 moves
// every row that holds bytes into the journal, as the payers now read it,
// and drops the old tables.
func TestMigrationJournalFromVersion5(t *testing.T) {
	for _, d := range []struct {
		kind   string
		tables string // counts the old ledgers' tables
		open   func(t *testing.T) (reopen func() (store.Store, error), raw rawDB)
	}{
		{store.KindSQLite, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('pending_txs', 'btc_payouts')`,
			func(t *testing.T) (func() (store.Store, error), rawDB) {
				path := filepath.Join(t.TempDir(), "v5.db")
				return func() (store.Store, error) { return store.OpenSQLite(t.Context(), path, store.Options{}) },
					openRawSQLite(t, path)
			}},
		{store.KindPostgres, `SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename IN ('pending_txs', 'btc_payouts')`,
			func(t *testing.T) (func() (store.Store, error), rawDB) {
				uri := pgtest.Shared(t).CreateDB(t)
				return func() (store.Store, error) { return store.OpenPostgres(t.Context(), uri, store.Options{}) },
					openRawPG(t, uri)
			}},
	} {
		t.Run(d.kind, func(t *testing.T) {
			t.Parallel()
			if store.SchemaVersion() < journalVersion {
				t.Fatalf("schema version %d, want at least %d", store.SchemaVersion(), journalVersion)
			}
			reopen, raw := d.open(t)
			migrateTo(t, raw, d.kind, journalVersion-1)
			if n := raw.count(t, d.tables); n != 2 {
				t.Fatalf("%d old ledger tables at version 5, want 2", n)
			}

			// The Stacks ledger: an sBTC transfer beyond int64 everywhere
			// (its nonce, amount and fee are uint64 bits in signed
			// columns), a plain STX one from before assets (the column's
			// default), and a foreign nonce (no bytes: not a journal entry).
			sender, sender2 := stxKey(1), stxKey(2)
			contract := stacks.Principal{Address: testAddr(9), ContractName: "faucet-sink_v2"}
			stxRaw := append([]byte{0x80, 0x80, 0x00, 0x00, 0x00, 0x00, 0x01}, bytes.Repeat([]byte{0x00, 0xff}, 90)...)
			var sbtcNonce, sbtcAmount, sbtcFee uint64 = 1<<63 + 5, 1<<63 + 9, math.MaxUint64
			sbtcAt := time.Unix(1_700_000_000, 123_456_789)
			raw.exec(t, `INSERT INTO pending_txs (sender, nonce, txid, raw, recipient, amount, fee, sent_at, state, is_foreign,
rebroadcasts, replacements, asset) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
				sender, int64(sbtcNonce), testTxID(1).String(), stxRaw, contract.String(), int64(sbtcAmount), int64(sbtcFee),
				sbtcAt.UnixNano(), "broadcasting", false, 3, 2, "sbtc")
			raw.exec(t, `INSERT INTO pending_txs (sender, nonce, txid, raw, recipient, amount, fee, sent_at, state, is_foreign,
rebroadcasts, replacements) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
				sender, int64(7), testTxID(2).String(), []byte{7, 7}, testAddr(7).String(), int64(500_000_000), int64(180),
				time.Unix(1_700_000_100, 0).UnixNano(), "pending", false, 0, 0)
			raw.exec(t, `INSERT INTO pending_txs (sender, nonce, txid, raw, recipient, amount, fee, sent_at, state, is_foreign,
rebroadcasts, replacements) VALUES ($1, 8, '', NULL, '', 0, 0, 0, 'pending', $2, 0, 0)`, sender, true)
			raw.exec(t, `INSERT INTO pending_txs (sender, nonce, txid, raw, recipient, amount, fee, sent_at, state, is_foreign,
rebroadcasts, replacements, asset) VALUES ($1, 3, $2, $3, $4, 1, 1, 1, 'pending', $5, 0, 1, 'stx')`,
				sender2, testTxID(3).String(), []byte{3}, testAddr(7).String(), false)

			// The BTC ledger: a fee bump (its record names the payout it
			// replaces) and a payout from before bumps (no "replaces").
			btc := btcKey(t, 1)
			bump := `{"coins":[{"txid":"` + strings.Repeat("ab", 32) + `","vout":2,"value":5000000000,"pk_script":"0014` +
				strings.Repeat("01", 20) + `"}],"outputs":[{"address":"bcrt1qexample","amount":10000},` +
				`{"address":"2N-example","amount":4611686018427387907}],"fee":1234,"change":{"txid":"` + strings.Repeat("cd", 32) +
				`","vout":0,"value":4899988766,"pk_script":"0014` + strings.Repeat("01", 20) + `"},"depth":3,"replaces":"` +
				testTxID(40).String() + `"}`
			plain := `{"coins":[{"txid":"` + strings.Repeat("ef", 32) + `","vout":0,"value":5000000000,"pk_script":"0014` +
				strings.Repeat("01", 20) + `"}],"outputs":[{"address":"bcrt1qexample","amount":10000}],"fee":141,"depth":1}`
			btcRaw := bytes.Repeat([]byte{2, 0xff, 0x00}, 70)
			bumpAt, plainAt := time.Unix(1_700_000_300, 987_654_321), time.Unix(1_700_000_200, 1)
			for _, r := range []struct {
				txid   string
				raw    []byte
				record string
				state  string
				at     time.Time
			}{{testTxID(41).String(), btcRaw, bump, "broadcasting", bumpAt}, {testTxID(42).String(), []byte{1}, plain, "pending", plainAt}} {
				raw.exec(t, `INSERT INTO btc_payouts (key_address, txid, raw, record, state, sent_at) VALUES ($1, $2, $3, $4, $5, $6)`,
					btc, r.txid, r.raw, r.record, r.state, r.at.UnixNano())
			}

			s, err := reopen()
			if err != nil {
				t.Fatalf("open a version 5 database: %v", err)
			}
			defer s.Close()
			want := store.SchemaVersion()
			if v, n := raw.count(t, "SELECT MAX(version) FROM schema_migrations"), raw.count(t, "SELECT COUNT(*) FROM schema_migrations"); v != want || n != want {
				t.Fatalf("after opening: version %d in %d rows, want %d in %d", v, n, want, want)
			}
			if n := raw.count(t, d.tables); n != 0 {
				t.Fatalf("%d old ledger tables left after migrating, want 0", n)
			}
			if n := raw.count(t, "SELECT COUNT(*) FROM journal"); n != 5 {
				t.Fatalf("%d journal rows, want 5 (3 Stacks entries with bytes, 2 BTC payouts)", n)
			}

			// The Stacks entries: the columns as they were, the rest in Meta.
			got := list(t, s, sender)
			if len(got) != 2 {
				t.Fatalf("Stacks key: %s, want nonces 7 and 2^63+5 (not the foreign 8)", entryIDs(got))
			}
			sameEntryButMeta(t, got[0], journal.Entry{Key: sender, TxID: testTxID(2).String(), Seq: 7, Raw: []byte{7, 7},
				State: journal.Pending, SentAt: time.Unix(1_700_000_100, 0)})
			sameStxMeta(t, got[0].Meta, stxMetaJSON{Recipient: testAddr(7).String(), Asset: "stx", Amount: 500_000_000, Fee: 180})
			sameEntryButMeta(t, got[1], journal.Entry{Key: sender, TxID: testTxID(1).String(), Seq: sbtcNonce, Raw: stxRaw,
				State: journal.Broadcasting, SentAt: sbtcAt})
			sameStxMeta(t, got[1].Meta, stxMetaJSON{Recipient: contract.String(), Asset: "sbtc", Amount: int64(sbtcAmount),
				Fee: int64(sbtcFee), Rebroadcasts: 3, Replacements: 2})
			var m stxMetaJSON
			if err := json.Unmarshal(got[1].Meta, &m); err != nil || uint64(m.Amount) != sbtcAmount || uint64(m.Fee) != sbtcFee {
				t.Fatalf("amount %d and fee %d as uint64 (%v), want %d and %d", uint64(m.Amount), uint64(m.Fee), err, sbtcAmount, sbtcFee)
			}
			other := list(t, s, sender2)
			if len(other) != 1 {
				t.Fatalf("the other Stacks key: %s", entryIDs(other))
			}
			sameEntryButMeta(t, other[0], journal.Entry{Key: sender2, TxID: testTxID(3).String(), Seq: 3, Raw: []byte{3},
				State: journal.Pending, SentAt: time.Unix(0, 1)})
			sameStxMeta(t, other[0].Meta, stxMetaJSON{Recipient: testAddr(7).String(), Asset: "stx", Amount: 1, Fee: 1, Replacements: 1})

			// The BTC entries: the record kept as it was, as Meta;
			// Replaces read from it; Seq the payout's depth, as the payer
			// records it (parents first).
			sameEntries(t, "BTC key", list(t, s, btc),
				journal.Entry{Key: btc, TxID: testTxID(42).String(), Seq: 1, Raw: []byte{1}, State: journal.Pending,
					SentAt: plainAt, Meta: []byte(plain)},
				journal.Entry{Key: btc, TxID: testTxID(41).String(), Seq: 3, Raw: btcRaw, State: journal.Broadcasting,
					SentAt: bumpAt, Replaces: testTxID(40).String(), Meta: []byte(bump)})

			// The migrated entries are the journal's like any: the
			// payers' writes find them.
			if err := s.DeleteBelow(t.Context(), sender, 8); err != nil {
				t.Fatal(err)
			}
			if got := list(t, s, sender); len(got) != 1 || got[0].Seq != sbtcNonce {
				t.Fatalf("after DeleteBelow(8): %s, want 2^63+5 alone", entryIDs(got))
			}
			if err := s.Delete(t.Context(), btc, testTxID(42).String()); err != nil {
				t.Fatal(err)
			}
			bumped := list(t, s, btc)
			if len(bumped) != 1 || bumped[0].TxID != testTxID(41).String() {
				t.Fatalf("after deleting a BTC payout: %s", entryIDs(bumped))
			}
			bumped[0].State = journal.Pending
			put(t, s, bumped[0])
			sameEntries(t, "BTC key after an upsert", list(t, s, btc), bumped[0])
			s.Close()

			// Opening again applies nothing more and keeps the journal.
			s, err = reopen()
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer s.Close()
			if n := raw.count(t, "SELECT COUNT(*) FROM schema_migrations"); n != want {
				t.Fatalf("%d migration rows after reopening, want %d", n, want)
			}
			sameEntries(t, "BTC key after reopening", list(t, s, btc), bumped[0])
		})
	}
}

// sameEntryButMeta compares every field but Meta.
func sameEntryButMeta(t *testing.T, got, want journal.Entry) {
	t.Helper()
	got.Meta, want.Meta = nil, nil
	sameEntry(t, got, want)
}

// sameStxMeta checks a migrated Stacks entry's Meta: exactly stxMeta's
// fields, numbers as JSON numbers (amount and fee are int64s holding the
// uint64's bits, which faucet reads back with a conversion), and the
// values wanted.
func sameStxMeta(t *testing.T, meta []byte, want stxMetaJSON) {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(meta, &fields); err != nil {
		t.Fatalf("meta %s: %v", meta, err)
	}
	var names []string
	for k, v := range fields {
		names = append(names, k)
		if k != "recipient" && k != "asset" && (len(v) == 0 || v[0] == '"') {
			t.Errorf("meta %s: %s is %s, want a JSON number", meta, k, v)
		}
	}
	slices.Sort(names)
	if wantNames := []string{"amount", "asset", "fee", "rebroadcasts", "recipient", "replacements"}; !slices.Equal(names, wantNames) {
		t.Errorf("meta %s: fields %v, want %v", meta, names, wantNames)
	}
	dec := json.NewDecoder(bytes.NewReader(meta))
	dec.DisallowUnknownFields()
	var got stxMetaJSON
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("meta %s: %v", meta, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("meta %s:\n got %+v\nwant %+v", meta, got, want)
	}
}

// The journal outlives the process: entries of a Stacks and a Bitcoin key
// put by one store are listed, exactly, by the next one to open the
// database; on SQLite the next process opens the file once the first has
// closed it, and the closed store writes nothing more.
func TestJournalSurvivesReopen(t *testing.T) {
	for _, d := range []struct {
		name string
		open func(t *testing.T) func() store.Store
	}{
		{"sqlite", func(t *testing.T) func() store.Store {
			path := filepath.Join(t.TempDir(), "j.db")
			return func() store.Store { return openSQLitePath(t, path, store.Options{}) }
		}},
		{"postgres", func(t *testing.T) func() store.Store {
			uri := pgtest.Shared(t).CreateDB(t)
			return func() store.Store { return openPostgresURI(t, uri, store.Options{}) }
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			open := d.open(t)
			stx, btc := stxKey(1), btcKey(t, 1)
			s1 := open()
			want := map[string][]journal.Entry{
				stx: {testEntry(stx, 1, 1), testEntry(stx, 1<<63, 2)},
				btc: {testEntry(btc, 1, 3), testEntry(btc, 2, 4)},
			}
			want[btc][1].Replaces, want[btc][1].State = testTxID(9).String(), journal.Broadcasting
			for _, es := range want {
				put(t, s1, es...)
			}
			if err := s1.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := open()
			for k, es := range want {
				sameEntries(t, "after reopening, "+k, list(t, s2, k), es...)
			}
			if err := s1.Put(t.Context(), testEntry(btc, 3, 5)); err == nil {
				t.Fatal("the closed store wrote")
			}
			sameEntries(t, "after the closed store's put", list(t, s2, btc), want[btc]...)
		})
	}
}
