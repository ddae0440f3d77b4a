package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one versioned schema change, as one dialect runs it.
type migration struct {
	version int
	name    string
	sql     string
}

// dialect holds the few things the two databases spell differently.
type dialect struct {
	name string
	// autoID is an auto-increment primary key whose ids are never reused.
	autoID string
	// rowID is an auto-increment primary key whose ids may be reused once
	// deleted (cheaper on SQLite: no sqlite_sequence write).
	rowID string
	blob  string
	// withoutRowID ends a CREATE TABLE whose primary key is the only index
	// needed (SQLite then keeps one b-tree instead of two).
	withoutRowID string
	// jsonObject builds a JSON object from key, value arguments;
	// jsonText(column, field) reads a text field of a JSON text column.
	jsonObject string
	jsonText   func(column, field string) string
}

var (
	sqliteDialect = dialect{name: KindSQLite, autoID: "INTEGER PRIMARY KEY AUTOINCREMENT", rowID: "INTEGER PRIMARY KEY",
		blob: "BLOB", withoutRowID: "WITHOUT ROWID", jsonObject: "json_object",
		jsonText: func(c, f string) string { return "json_extract(" + c + ", '$." + f + "')" }}
	pgDialect = dialect{name: KindPostgres, autoID: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
		rowID: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", blob: "BYTEA", jsonObject: "json_build_object",
		jsonText: func(c, f string) string { return "(" + c + "::json ->> '" + f + "')" }}
)

// jsonTextPlaceholder is {{json_text COLUMN FIELD}}.
var jsonTextPlaceholder = regexp.MustCompile(`\{\{json_text (\w+) (\w+)\}\}`)

// createMigrationsTable records applied versions; it exists before any
// migration so that a newer schema can be recognised and refused.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at BIGINT  NOT NULL
)`

// migrations returns every migration in version order, rendered for d.
func migrations(d dialect) ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version and '_'", base)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, base, v)
		}
		seen[v] = base
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		sql := strings.NewReplacer("{{autoid}}", d.autoID, "{{rowid}}", d.rowID, "{{blob}}", d.blob,
			"{{without_rowid}}", d.withoutRowID, "{{json_object}}", d.jsonObject).Replace(string(b))
		sql = jsonTextPlaceholder.ReplaceAllStringFunc(sql, func(m string) string {
			sub := jsonTextPlaceholder.FindStringSubmatch(m)
			return d.jsonText(sub[1], sub[2])
		})
		out = append(out, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: sql})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// SchemaVersion is the newest schema version this binary knows.
func SchemaVersion() int {
	ms, err := migrations(sqliteDialect)
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrationTx is the part of a driver's transaction that applyMigrations
// needs; each driver adapts its own.
type migrationTx interface {
	exec(ctx context.Context, sql string, args ...any) error
	queryInt(ctx context.Context, sql string) (int, error)
}

// applyMigrations creates the version table if needed and applies what the
// database at its recorded version still lacks, inside the caller's
// transaction, each recorded as applied at now. wrap classifies the
// driver's errors. It returns the version reached and whether anything was
// applied.
func applyMigrations(ctx context.Context, tx migrationTx, d dialect, wrap func(op string, err error) error, now time.Time) (version int, applied bool, err error) {
	if err := tx.exec(ctx, createMigrationsTable); err != nil {
		return 0, false, wrap("migrate", err)
	}
	current, err := tx.queryInt(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`)
	if err != nil {
		return 0, false, wrap("migrate: read schema version", err)
	}
	pending, err := pendingMigrations(d, current)
	if err != nil {
		return 0, false, err
	}
	for _, m := range pending {
		if err := tx.exec(ctx, m.sql); err != nil {
			return 0, false, wrap("migration "+m.name, err)
		}
		if err := tx.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.version, m.name, now.UnixNano()); err != nil {
			return 0, false, wrap("migration "+m.name, err)
		}
		current = m.version
	}
	return current, len(pending) > 0, nil
}

// pendingMigrations returns the migrations a database at version current
// still needs, or an error when current is newer than this binary knows.
func pendingMigrations(d dialect, current int) ([]migration, error) {
	ms, err := migrations(d)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].version
	}
	if current > latest {
		return nil, fmt.Errorf("database schema version %d is newer than this faucet knows (%d): run a newer faucet or restore a matching backup", current, latest)
	}
	var out []migration
	for _, m := range ms {
		if m.version > current {
			out = append(out, m)
		}
	}
	return out, nil
}
