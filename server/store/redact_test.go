package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/faucet"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct {
		in, want string
		secret   string // must not survive
	}{
		{"postgres://faucet:s3cret@db.example:5432/faucet?sslmode=require", "postgres://faucet:xxxxx@db.example:5432/faucet?sslmode=require", "s3cret"},
		{"postgresql://faucet:p%40ss%2Fw0rd@db/faucet", "postgresql://faucet:xxxxx@db/faucet", "p%40ss"},
		{"postgres://faucet@db/faucet", "postgres://faucet@db/faucet", ""},
		{"postgres://db/faucet?password=hunter22&sslmode=disable", "postgres://db/faucet?password=xxxxx&sslmode=disable", "hunter22"},
		{"host=db user=faucet password=hunter22 dbname=x", "host=db user=faucet password=xxxxx dbname=x", "hunter22"},
		{"host=db password='a b\\'c' dbname=x", "host=db password=xxxxx dbname=x", "a b"},
		// url.Parse rejects this one; the fallback still blanks it.
		{"postgres://faucet:se%zzcret@db/faucet", "postgres://faucet:xxxxx@db/faucet", "se%zzcret"},
		{"/var/lib/faucet/faucet.db", "/var/lib/faucet/faucet.db", ""},
	} {
		got := Redact(c.in)
		if got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		if c.secret != "" && strings.Contains(got, c.secret) {
			t.Errorf("Redact(%q) keeps the secret: %q", c.in, got)
		}
	}
}

func TestScrub(t *testing.T) {
	dsn := "postgres://faucet:p%40ss@db/faucet"
	secrets := passwordOf(dsn)
	base := fmt.Errorf("dial: %w", faucet.ErrStoreUnavailable)
	err := scrub(fmt.Errorf("connect with %s and p@ss: %w", dsn, base), secrets)
	if strings.Contains(err.Error(), "p@ss") || strings.Contains(err.Error(), "p%40ss") {
		t.Fatalf("scrubbed error keeps the password: %q", err)
	}
	if !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatal("scrubbing lost the error chain")
	}
	if clean := errors.New("nothing secret"); scrub(clean, secrets) != clean { //nolint:errorlint // identity: nothing to scrub, nothing rewrapped
		t.Fatal("a clean error was rewrapped")
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	latest := SchemaVersion()
	if ms, err := pendingMigrations(pgDialect, 0); err != nil || len(ms) != latest {
		t.Fatalf("fresh: %d migrations, %v", len(ms), err)
	}
	if ms, err := pendingMigrations(sqliteDialect, latest); err != nil || len(ms) != 0 {
		t.Fatalf("current: %d migrations, %v", len(ms), err)
	}
	if _, err := pendingMigrations(sqliteDialect, latest+1); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("newer: %v", err)
	}
	// Every placeholder is replaced for both dialects.
	for _, d := range []dialect{sqliteDialect, pgDialect} {
		ms, _ := migrations(d)
		for _, m := range ms {
			if strings.Contains(m.sql, "{{") {
				t.Errorf("%s migration %s keeps a placeholder", d.name, m.name)
			}
		}
	}
}

func TestPruneBatchInSQL(t *testing.T) {
	for _, q := range []string{sqlPruneDrips, sqlPruneSlots, sqlPruneChallenges} {
		if !strings.Contains(q, "LIMIT "+strconv.Itoa(pruneBatch)+")") {
			t.Errorf("prune statement does not use pruneBatch %d: %s", pruneBatch, q)
		}
	}
}
