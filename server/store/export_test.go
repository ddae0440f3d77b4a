package store

import "fmt"

// CreateMigrationsTable is the version table every schema has.
const CreateMigrationsTable = createMigrationsTable

// MigrationSQL returns migration version as the kind driver runs it, so
// that a test can build an older binary's schema by hand.
func MigrationSQL(kind string, version int) (name, sql string, err error) {
	d := sqliteDialect
	if kind == KindPostgres {
		d = pgDialect
	}
	ms, err := migrations(d)
	if err != nil {
		return "", "", err
	}
	for _, m := range ms {
		if m.version == version {
			return m.name, m.sql, nil
		}
	}
	return "", "", fmt.Errorf("no migration %d", version)
}
