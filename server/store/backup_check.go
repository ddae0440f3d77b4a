package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// settle checks the SQLite file at path as a faucet store and makes it a
// file that stands alone: rollback-journal mode, so no -wal beside it
// holds part of it (serve turns WAL back on when it opens it). With
// leaveOut it deletes the journal entries in doubt (leaveOutInDoubt). It
// returns the file's summary (without size and hash) and how many
// entries it deleted.
func settle(ctx context.Context, path string, leaveOut bool) (sum Summary, left int64, err error) {
	db, err := openFile(path)
	if err != nil {
		return sum, 0, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode = DELETE`).Scan(&mode); err != nil {
		return sum, 0, describeSQLiteErr(err)
	}
	if sum.SchemaVersion, err = checkSchema(ctx, db); err != nil {
		return sum, 0, err
	}
	if err := checkIntegrity(ctx, db); err != nil {
		return sum, 0, err
	}
	if leaveOut {
		if left, err = leaveOutInDoubt(ctx, db); err != nil {
			return sum, 0, err
		}
	}
	if sum.Tables, err = countRows(ctx, db); err != nil {
		return sum, 0, err
	}
	if sum.InDoubt, err = countInDoubt(ctx, db); err != nil {
		return sum, 0, err
	}
	sum.Path = path
	return sum, left, nil
}

// checkSchema reads the migrations the file records: each must be one this
// faucet knows, under the same name, and none newer than it knows. It
// returns the newest.
func checkSchema(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
		return 0, describeSQLiteErr(err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: it has no schema_migrations table", ErrNotFaucetStore)
	}
	ms, err := migrations(sqliteDialect)
	if err != nil {
		return 0, fmt.Errorf("read migrations: %w", err)
	}
	known := make(map[int]string, len(ms))
	latest := 0
	for _, m := range ms {
		known[m.version], latest = m.name, max(latest, m.version)
	}
	rows, err := db.QueryContext(ctx, `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	version := 0
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			return 0, fmt.Errorf("read schema_migrations: %w", err)
		}
		if v > latest {
			return 0, fmt.Errorf("%w: the store's schema is version %d and this faucet knows up to %d: use the faucet release that wrote it, or a newer one", ErrSchemaTooNew, v, latest)
		}
		if known[v] != name {
			return 0, fmt.Errorf("%w: its migration %d is %q, this faucet's is %q", ErrNotFaucetStore, v, name, known[v])
		}
		version = v
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	if version == 0 {
		return 0, fmt.Errorf("%w: it records no migration", ErrNotFaucetStore)
	}
	return version, nil
}

// checkIntegrity runs SQLite's full integrity check: a truncated or
// damaged copy (a transfer cut short) fails here, not at the first drip.
func checkIntegrity(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check(5)`)
	if err != nil {
		return fmt.Errorf("integrity check: %w", describeSQLiteErr(err))
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("integrity check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity check: %w", describeSQLiteErr(err))
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity check failed (a damaged or truncated copy?): %s", strings.Join(problems, "; "))
	}
	return nil
}

// inDoubtTable is the table of in-flight transactions: journal since
// migration 6, pending_txs before; "" when neither exists.
func inDoubtTable(ctx context.Context, db *sql.DB) (string, error) {
	for _, name := range []string{"journal", "pending_txs"} {
		var n int
		if err := db.QueryRowContext(ctx,
			`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1`, name).Scan(&n); err != nil {
			return "", err
		}
		if n > 0 {
			return name, nil
		}
	}
	return "", nil
}

// countInDoubt counts the in-flight entries in state broadcasting.
func countInDoubt(ctx context.Context, db *sql.DB) (int64, error) {
	table, err := inDoubtTable(ctx, db)
	if err != nil || table == "" {
		return 0, err
	}
	var n int64
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM `+table+` WHERE state = 'broadcasting'`).Scan(&n)
	return n, err
}

// leaveOutInDoubt deletes the entries in state broadcasting: transactions
// recorded and not yet answered by the node when the snapshot was taken.
// After an online snapshot the faucet that wrote them settled each within
// its broadcast: the node took it (then the node has it, or mined it, and
// the faucet no longer needs the bytes), or refused it (then the faucet
// forgot it and may have paid the same drip with another transaction). A
// faucet restored with such an entry would send it again at start, and if
// its nonce (or its coins) were still free the node would take it and
// pay that drip a second time. Without the entry, the nonce is the node's
// to report like any other the restored faucet does not know.
func leaveOutInDoubt(ctx context.Context, db *sql.DB) (int64, error) {
	table, err := inDoubtTable(ctx, db)
	if err != nil || table == "" {
		return 0, err
	}
	r, err := db.ExecContext(ctx, `DELETE FROM `+table+` WHERE state = 'broadcasting'`)
	if err != nil {
		return 0, fmt.Errorf("leave out the entries in doubt: %w", err)
	}
	return r.RowsAffected()
}

// countRows counts the rows of every table, by name.
func countRows(ctx context.Context, db *sql.DB) ([]TableRows, error) {
	rows, err := db.QueryContext(ctx,
		`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list tables: %w", err)
		}
		names = append(names, name)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	out := make([]TableRows, 0, len(names))
	for _, name := range names {
		var n int64
		q := `SELECT count(*) FROM "` + strings.ReplaceAll(name, `"`, `""`) + `"`
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("count %s: %w", name, err)
		}
		out = append(out, TableRows{Name: name, Rows: n})
	}
	return out, nil
}
