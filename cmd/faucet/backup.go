package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/store"
)

const storeUsage = "usage: faucet store backup --out FILE|- [--store PATH] [--temp-dir DIR]\n" +
	"       faucet store restore --in FILE|- [--store PATH] [--force] [--forget-in-doubt]\n\n" +
	"backup copies the embedded SQLite store while the faucet runs; restore puts a backup in place\n" +
	"where no faucet runs. With - the backup goes to stdout or comes from stdin (kubectl exec).\n" +
	"A Postgres store is backed up with pg_dump. See docs/backups.md.\n"

// runStore implements `faucet store backup` and `faucet store restore`.
func runStore(ctx context.Context, clk procClock, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return &usageError{cmd: "store", what: "usage", err: errors.New("missing subcommand: faucet store backup or faucet store restore")}
	}
	switch args[0] {
	case "backup":
		return runStoreBackup(ctx, clk, args[1:], stdout, os.Stderr)
	case "restore":
		return runStoreRestore(ctx, clk, args[1:], stdout, os.Stdin)
	case "-h", "-help", "--help", "help":
		var b strings.Builder
		b.WriteString(storeUsage)
		bf, _ := storeBackupFlags()
		printFlags(&b, bf, backupGroups)
		rf, _ := storeRestoreFlags()
		printFlags(&b, rf, restoreGroups)
		return &helpRequest{text: b.String()}
	}
	return &usageError{cmd: "store", what: "usage", err: fmt.Errorf("unknown subcommand %q: want backup or restore", args[0])}
}

var (
	backupGroups  = []flagGroup{{"backup flags", []string{"out", "store", "temp-dir"}}}
	restoreGroups = []flagGroup{{"restore flags", []string{"in", "store", "force", "forget-in-doubt"}}}
)

type backupFlags struct {
	store, out, tempDir string
}

func storeBackupFlags() (*flag.FlagSet, *backupFlags) {
	fs := flag.NewFlagSet("store backup", flag.ContinueOnError)
	f := &backupFlags{}
	fs.StringVar(&f.store, "store", options.DefaultStorePath, "the SQLite store to back up (serve's --store)")
	fs.StringVar(&f.out, "out", "", "where to write the backup: a file (replaced atomically), or - for stdout")
	fs.StringVar(&f.tempDir, "temp-dir", "", "with --out -: where the copy is made before it is streamed (default: the store's directory)")
	fs.Usage = usageFunc(fs, "usage: faucet store backup --out FILE|- [--store PATH] [--temp-dir DIR]\n\n"+
		"Copies the embedded SQLite store consistently, while a faucet writes it or not.\n", backupGroups...)
	return fs, f
}

func runStoreBackup(ctx context.Context, clk procClock, args []string, stdout, stderr io.Writer) error {
	fs, f := storeBackupFlags()
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if err := checkStoreFlag(fs, f.store); err != nil {
		return err
	}
	if f.out == "" {
		return flagError(fs, errors.New("--out is required: a file, or - for stdout"))
	}
	if f.out != "-" {
		res, err := store.BackupSQLite(ctx, f.store, f.out, clk)
		if err != nil {
			return err
		}
		return printBackup(stdout, f.store, res)
	}
	dir := f.tempDir
	if dir == "" {
		dir = filepath.Dir(f.store)
	}
	tmp, err := os.CreateTemp(dir, ".faucet-backup-*.db")
	if err != nil {
		return fmt.Errorf("back up %s: a temporary copy (--temp-dir): %w", f.store, err)
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name)
	res, err := store.BackupSQLite(ctx, f.store, name, clk)
	if err != nil {
		return err
	}
	copied, err := os.Open(name)
	if err != nil {
		return err
	}
	defer copied.Close()
	if _, err := io.Copy(stdout, copied); err != nil {
		return fmt.Errorf("back up %s: write to stdout: %w", f.store, err)
	}
	res.Path = "stdout"
	return printBackup(stderr, f.store, res)
}

type restoreFlags struct {
	store, in            string
	force, forgetInDoubt bool
}

func storeRestoreFlags() (*flag.FlagSet, *restoreFlags) {
	fs := flag.NewFlagSet("store restore", flag.ContinueOnError)
	f := &restoreFlags{}
	fs.StringVar(&f.in, "in", "", "the backup to restore: a file, or - for stdin")
	fs.StringVar(&f.store, "store", options.DefaultStorePath, "where to put it: the path serve's --store will name")
	fs.BoolVar(&f.force, "force", false, "replace a store already there (it is kept as PATH.before-restore)")
	fs.BoolVar(&f.forgetInDoubt, "forget-in-doubt", false, "drop the transactions the copy holds as being sent: for a copy of a running faucet not made by faucet store backup (a volume snapshot)")
	fs.Usage = usageFunc(fs, "usage: faucet store restore --in FILE|- [--store PATH] [--force] [--forget-in-doubt]\n\n"+
		"Checks a backup and puts it in place where no faucet runs.\n", restoreGroups...)
	return fs, f
}

func runStoreRestore(ctx context.Context, clk procClock, args []string, stdout io.Writer, stdin io.Reader) error {
	fs, f := storeRestoreFlags()
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if err := checkStoreFlag(fs, f.store); err != nil {
		return err
	}
	in := stdin
	switch f.in {
	case "":
		return flagError(fs, errors.New("--in is required: a backup file, or - for stdin"))
	case "-":
	default:
		file, err := os.Open(f.in)
		if err != nil {
			return fmt.Errorf("--in: %w", err)
		}
		defer file.Close()
		in = file
	}
	res, err := store.RestoreSQLite(ctx, in, f.store, store.RestoreOptions{Force: f.force, ForgetInDoubt: f.forgetInDoubt, Clock: clk})
	if err != nil {
		return err
	}
	return printRestore(stdout, res)
}

// checkStoreFlag refuses stores that are not an SQLite file.
func checkStoreFlag(fs *flag.FlagSet, dsn string) error {
	switch {
	case dsn == "":
		return flagError(fs, errors.New("--store is empty: name the SQLite file serve's --store names"))
	case store.IsPostgres(dsn):
		return flagError(fs, errors.New("--store names a Postgres database: back it up with pg_dump and restore it with pg_restore (docs/backups.md)"))
	case dsn == options.StoreMemory:
		return flagError(fs, errors.New("--store memory keeps nothing on disk: there is nothing to back up or restore"))
	}
	return nil
}

func printBackup(w io.Writer, src string, r store.BackupResult) error {
	how := "offline: no faucet was running on it"
	if r.Online {
		how = "online: a faucet was running on it"
	}
	fmt.Fprintf(w, "backed up %s (%s) to %s\n", src, how, r.Path)
	fmt.Fprintf(w, "  %d bytes, sha256 %s, schema version %d, took %s\n", r.Bytes, r.SHA256, r.SchemaVersion, r.Took.Round(time.Millisecond))
	if r.LeftOut > 0 {
		fmt.Fprintf(w, "  left out %s the faucet was sending at that instant: it settles them itself (docs/backups.md)\n", plural(r.LeftOut, "transaction"))
	}
	return printTables(w, r.Tables)
}

func printRestore(w io.Writer, r store.RestoreResult) error {
	fmt.Fprintf(w, "restored %d bytes (sha256 %s) into %s, schema version %d\n", r.Received, r.ReceivedSHA256, r.Path, r.SchemaVersion)
	if latest := store.SchemaVersion(); r.SchemaVersion < latest {
		fmt.Fprintf(w, "  the faucet migrates it to version %d when it starts\n", latest)
	}
	if r.MovedAside != "" {
		fmt.Fprintf(w, "  the store that was there is now %s\n", r.MovedAside)
	}
	if r.Forgotten > 0 {
		fmt.Fprintf(w, "  dropped %s being sent when the copy was made\n", plural(r.Forgotten, "transaction"))
	}
	if r.InDoubt > 0 {
		fmt.Fprintf(w, "  it holds %s being sent when the copy was made: the faucet sends them again at start;\n"+
			"  if the faucet that made the copy ran on after it, restore with --forget-in-doubt instead (docs/backups.md)\n", plural(r.InDoubt, "transaction"))
	}
	return printTables(w, r.Tables)
}

// plural is "1 transaction", "2 transactions".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printTables writes one "  name  rows" line per table.
func printTables(w io.Writer, tables []store.TableRows) error {
	width := len("table")
	for _, t := range tables {
		width = max(width, len(t.Name))
	}
	if _, err := fmt.Fprintf(w, "  %-*s %10s\n", width, "table", "rows"); err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := fmt.Fprintf(w, "  %-*s %10d\n", width, t.Name, t.Rows); err != nil {
			return err
		}
	}
	return nil
}
