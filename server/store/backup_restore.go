package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/utils/clock"
)

// RestoreOptions tune RestoreSQLite.
type RestoreOptions struct {
	// Force replaces a store already at the target; it is moved aside to
	// <target>.before-restore (its write-ahead log with it), not deleted.
	Force bool
	// ForgetInDoubt deletes the journal entries in state broadcasting
	// from what is restored: for a copy of a running faucet made by other
	// means than `faucet store backup` (a volume snapshot), see
	// leaveOutInDoubt.
	ForgetInDoubt bool
	// Clock paces the lock probe; nil is the real clock.
	Clock clock.Clock
}

// RestoreResult is what RestoreSQLite put in place.
type RestoreResult struct {
	// Summary is the store now at the target.
	Summary
	// Received and ReceivedSHA256 are the backup as read, to compare with
	// what the backup printed.
	Received       int64
	ReceivedSHA256 string
	// MovedAside is where the store that was at the target went ("" when
	// there was none).
	MovedAside string
	// Forgotten counts the entries in doubt ForgetInDoubt deleted.
	Forgotten int64
}

// beforeRestore is the suffix of a store a forced restore replaced.
const beforeRestore = ".before-restore"

// RestoreSQLite reads a backup from in and puts it at dst as the store a
// faucet started there will open. It refuses while a faucet process holds
// dst (its lock), and when dst already holds a store unless opts.Force.
// The backup is written beside dst, checked (integrity; a faucet store
// whose schema this faucet knows) and only then renamed over dst, so a
// failure at any point leaves dst as it was. It holds dst's lock
// throughout: a faucet starting meanwhile waits for the restore.
func RestoreSQLite(ctx context.Context, in io.Reader, dst string, opts RestoreOptions) (res RestoreResult, err error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	fail := func(err error) error { return fmt.Errorf("restore into %s: %w", dst, err) }
	if err := checkSQLitePath(dst); err != nil {
		return res, fail(err)
	}
	release, err := probeLock(dst, opts.Clock)
	if errors.Is(err, ErrStoreInUse) {
		return res, fail(fmt.Errorf("%w: stop it before restoring (on Kubernetes, docs/backups.md says how)", err))
	}
	if err != nil {
		return res, fail(err)
	}
	defer release()
	existing, err := existingStore(dst)
	if err != nil {
		return res, fail(err)
	}
	if existing && !opts.Force {
		return res, fail(fmt.Errorf("%w: restore refuses to replace it; stop every faucet on it and pass --force "+
			"(it is kept as %s%s)", ErrStoreExists, dst, beforeRestore))
	}
	tmp, err := createTemp(dst, ".restore-*")
	if err != nil {
		return res, fail(err)
	}
	defer func() {
		if err != nil {
			removeSQLiteFiles(tmp)
		}
	}()
	if res.Received, res.ReceivedSHA256, err = receive(in, tmp); err != nil {
		return res, fail(err)
	}
	if res.Summary, res.Forgotten, err = settle(ctx, tmp, opts.ForgetInDoubt); err != nil {
		return res, fail(fmt.Errorf("the backup: %w", err))
	}
	if existing {
		if res.MovedAside, err = moveAside(dst); err != nil {
			return res, fail(err)
		}
	}
	// A shared-memory index left by the faucet that ran there describes
	// the old file; SQLite rebuilds it.
	if err := os.Remove(dst + "-shm"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, fail(err)
	}
	if err := commitFile(tmp, dst); err != nil {
		return res, fail(err)
	}
	res.Path = dst
	if res.Bytes, res.SHA256, err = hashFile(dst); err != nil {
		return res, fail(err)
	}
	return res, nil
}

// existingStore reports whether dst holds a store: a non-empty database,
// or a write-ahead or rollback journal that SQLite would apply to
// whatever file is at dst next.
func existingStore(dst string) (bool, error) {
	for _, suffix := range []string{"", "-wal", "-journal"} {
		st, err := os.Stat(dst + suffix)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return false, err
		case !st.Mode().IsRegular():
			return false, fmt.Errorf("%s is not a regular file", dst+suffix)
		case st.Size() > 0:
			return true, nil
		}
	}
	return false, nil
}

// receive copies the backup into tmp, durably, and returns its size and
// SHA-256.
func receive(in io.Reader, tmp string) (int64, string, error) {
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), in)
	if err != nil {
		f.Close()
		return n, "", fmt.Errorf("read the backup: %w", err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return n, "", fmt.Errorf("write %s: %w", tmp, err)
	}
	if n == 0 {
		return 0, "", fmt.Errorf("%w: the backup is empty (0 bytes read)", ErrNotFaucetStore)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// moveAside renames the store at dst, its write-ahead log and rollback
// journal with it, to dst.before-restore (replacing an earlier one), and
// returns that name. The logs go first: a crash between two renames then
// leaves the old database without its log at dst, never a log of one
// file applied to another.
func moveAside(dst string) (string, error) {
	aside := dst + beforeRestore
	for _, suffix := range []string{"-wal", "-journal", ""} {
		err := os.Rename(dst+suffix, aside+suffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("move the old store aside: %w", err)
		}
		if err == nil || suffix == "" {
			continue
		}
		// No log of the current file: an older one of aside must not
		// pair with it.
		if err := os.Remove(aside + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("move the old store aside: %w", err)
		}
	}
	_ = os.Remove(aside + "-shm")
	return aside, nil
}
