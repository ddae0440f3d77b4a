package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// TestStoreUsage: the store command's mistakes are usage errors naming
// what is wrong.
func TestStoreUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"store"}, "faucet store: missing subcommand: faucet store backup or faucet store restore\nRun 'faucet store -h' for usage.\n"},
		{[]string{"store", "copy"}, "faucet store: unknown subcommand \"copy\": want backup or restore\nRun 'faucet store -h' for usage.\n"},
		{[]string{"store", "backup"}, "faucet store backup: --out is required: a file, or - for stdout\nRun 'faucet store backup -h' for the flags.\n"},
		{[]string{"store", "restore", "--store", "x.db"}, "faucet store restore: --in is required: a backup file, or - for stdin\nRun 'faucet store restore -h' for the flags.\n"},
		{[]string{"store", "backup", "--out", "-", "--store", "postgres://u:secret@db/faucet"},
			"faucet store backup: --store names a Postgres database: back it up with pg_dump and restore it with pg_restore (docs/backups.md)\nRun 'faucet store backup -h' for the flags.\n"},
		{[]string{"store", "restore", "--in", "-", "--store", "memory"},
			"faucet store restore: --store memory keeps nothing on disk: there is nothing to back up or restore\nRun 'faucet store restore -h' for the flags.\n"},
	} {
		stdout, stderr, code := runCLI(t, c.args...)
		if code != exitUsage || stderr != c.want || stdout != "" {
			t.Errorf("faucet %s: exit %d, stderr %q, stdout %q; want exit 2 and %q", strings.Join(c.args, " "), code, stderr, stdout, c.want)
		}
	}
	stdout, _, code := runCLI(t, "store", "-h")
	for _, want := range []string{"usage: faucet store backup", "backup flags:", "--temp-dir", "restore flags:", "--forget-in-doubt"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("faucet store -h (exit %d) lacks %q:\n%s", code, want, stdout)
		}
	}
}

// storeCmd runs `faucet store …` as its own process, as kubectl exec does,
// and returns its stderr.
func storeCmd(t *testing.T, stdin io.Reader, stdout io.Writer, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"store"}, args...)...)
	cmd.Env = append(os.Environ(), asFaucetEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("faucet store %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stderr.String()
}

// summaryRows reads the "  table rows" lines a backup or restore prints.
func summaryRows(out string) map[string]int64 {
	rows := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			rows[f[0]] = n
		}
	}
	return rows
}

// summaryField is the word after label in out ("sha256", "took").
func summaryField(out, label string) string {
	_, rest, ok := strings.Cut(out, label+" ")
	if !ok {
		return ""
	}
	f := strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == ')' })
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// timedDrip is a drip and when it was asked and answered.
type timedDrip struct {
	dripAnswer
	start, finish time.Time
}

// newBatchEnv is newFaultEnv with the send-many contract deployed, so a
// burst is batched as on testnet.
func newBatchEnv(t *testing.T, nKeys int) *faultEnv {
	t.Helper()
	e := newFaultEnv(t, nKeys)
	genesis := map[stacks.Address]uint64{}
	for _, k := range e.keys {
		genesis[k.TestnetAddress()] = faultKeyFunding
	}
	e.dn = devnode.New(devnode.Config{Genesis: genesis, Seed: 7, SendManyContract: stacks.SendManyMemoTestnet})
	srv := httptest.NewServer(e.dn.Handler())
	t.Cleanup(srv.Close)
	e.nodeURL = srv.URL
	return e
}

// TestBackupUnderBurstRestoredInNewProcess is issue 39's "done when": a
// faucet on SQLite with a per-address limit answers a burst of drips; a
// `faucet store backup --out -` is taken in the middle of it; the faucet
// stops; the backup is restored with `faucet store restore --in -` into a
// new file and a new faucet process starts on it against the same chain.
// Every drip answered 200, by either process, is mined once to its
// recipient with no (key, nonce) used twice; addresses that dripped
// before the backup are still refused; drips go on.
func TestBackupUnderBurstRestoredInNewProcess(t *testing.T) {
	e := newBatchEnv(t, 4)
	oldStore := filepath.Join(e.dir, "old-pod", "faucet.db")
	newStore := filepath.Join(e.dir, "new-pod", "faucet.db")
	for _, p := range []string{oldStore, newStore} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	limits := []string{"--limit-address", "1/24h", "--busy-wait", "30s"}
	old := e.serve("faucet-old", append([]string{"--store", oldStore}, limits...)...)
	old.waitReady()
	stopMining := e.mineEvery(500 * time.Millisecond)

	const drips, parallel, backupAfter = 400, 64, 150
	to := newRecipients(t, drips)
	answers := make([]timedDrip, drips)
	backupFile := filepath.Join(e.dir, "faucet-backup.db")
	var backupStart, backupEnd time.Time
	var backupOut string
	var answered atomic.Int64
	startBackup, backupDone := make(chan struct{}), make(chan struct{})
	var wg, bg sync.WaitGroup
	bg.Go(func() {
		defer close(backupDone)
		<-startBackup
		f, err := os.Create(backupFile)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		backupStart = time.Now()
		// What `kubectl exec POD -- /faucet store backup … --out - > FILE` runs.
		backupOut = storeCmd(t, nil, f, "backup", "--store", oldStore, "--out", "-")
		backupEnd = time.Now()
	})
	sem := make(chan struct{}, parallel)
	for i := range to {
		if i == drips-100 {
			// The backup runs under the load of the drips in flight; the
			// last 100 are asked once it is done, so some surely miss it.
			<-backupDone
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a := timedDrip{start: time.Now()}
			a.dripAnswer = old.drip(to[i])
			a.finish = time.Now()
			answers[i] = a
			if answered.Add(1) == backupAfter {
				close(startBackup)
			}
		})
	}
	wg.Wait()
	bg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ok := 0
	for i, a := range answers {
		if a.code == http.StatusOK {
			ok++
		} else {
			t.Errorf("burst drip %d answered %d %s", i, a.code, a.reason)
		}
	}
	old.stop(syscall.SIGTERM)
	stopMining()
	// The documented step: the old faucet's transactions confirm before
	// the restored one starts (docs/backups.md).
	blocks := e.mineUntilEmpty(10)

	in, err := os.Open(backupFile)
	if err != nil {
		t.Fatal(err)
	}
	var restoreOut bytes.Buffer
	restoreStart := time.Now()
	storeCmd(t, in, &restoreOut, "restore", "--in", "-", "--store", newStore)
	restoreTook := time.Since(restoreStart)
	in.Close()
	if got, want := summaryField(restoreOut.String(), "sha256"), summaryField(backupOut, "sha256"); got == "" || got != want {
		t.Errorf("restore read sha256 %q, the backup wrote %q", got, want)
	}
	rows := summaryRows(restoreOut.String())

	fresh := e.serve("faucet-new", append([]string{"--store", newStore}, limits...)...)
	fresh.waitReady()
	after := e.checkRestored(fresh, to, answers, backupStart, backupEnd)
	blocks += e.mineUntilEmpty(10)

	all := make([]dripAnswer, 0, len(answers)+len(after))
	for _, a := range answers {
		all = append(all, a.dripAnswer)
	}
	keyNonces := e.checkPaidOnce(append(all, after...))
	st, _ := os.Stat(backupFile)
	t.Logf("burst: %d drips on the old process, %d answered 200; backup taken after %d answers: %d bytes, %s by its own count (%s for the whole process), "+
		"rows: journal %d, limit_slots %d, drips %d, budget_steps %d; %s",
		drips, ok, backupAfter, st.Size(), summaryField(backupOut, "took"), backupEnd.Sub(backupStart).Round(time.Millisecond),
		rows["journal"], rows["limit_slots"], rows["drips"], rows["budget_steps"], leftOutLine(backupOut))
	t.Logf("restore: %s (whole process) into a new file; %d blocks mined after the old process stopped; each key's final nonce %v",
		restoreTook.Round(time.Millisecond), blocks, keyNonces)
}

// leftOutLine is the backup's "left out" line, or that there was none.
func leftOutLine(out string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, "left out") {
			return strings.TrimSpace(line)
		}
	}
	return "no transaction left out"
}

// checkRestored drips on the restored faucet: every address answered 200
// before the backup started is refused (its limit came back); addresses
// that dripped only after the backup ended are not in it and drip again
// (what a restore loses); fresh addresses are paid. It returns the 200
// answers.
func (e *faultEnv) checkRestored(p *faucetProc, to []stacks.Principal, answers []timedDrip, backupStart, backupEnd time.Time) []dripAnswer {
	e.t.Helper()
	var before, later []stacks.Principal
	for i, a := range answers {
		switch {
		case a.code != http.StatusOK:
		case a.finish.Before(backupStart):
			before = append(before, to[i])
		case a.start.After(backupEnd) && len(later) < 20:
			later = append(later, to[i])
		}
	}
	if len(before) == 0 || len(later) == 0 {
		e.t.Fatalf("%d drips answered before the backup and %d asked after it: the backup was not in the middle of the burst", len(before), len(later))
	}
	refused := 0
	for _, a := range burst([]*faucetProc{p}, before, 16) {
		if a.code == http.StatusTooManyRequests && a.retryAfter != "" {
			refused++
		} else {
			e.t.Errorf("%s dripped before the backup; after the restore it was answered %d %s, want 429 with Retry-After", a.to, a.code, a.reason)
		}
	}
	var paid []dripAnswer
	again := burst([]*faucetProc{p}, later, 16)
	more := burst([]*faucetProc{p}, newRecipients(e.t, 100), 16)
	for _, a := range append(again, more...) {
		if a.code != http.StatusOK {
			e.t.Errorf("drip to %s after the restore: %d %s", a.to, a.code, a.reason)
			continue
		}
		paid = append(paid, a)
	}
	e.t.Logf("after the restore: %d of %d addresses that dripped before the backup refused (429); %d of %d that dripped only after it paid again; %d of %d fresh drips answered 200",
		refused, len(before), countOK(again), len(again), countOK(more), len(more))
	return paid
}

func countOK(as []dripAnswer) int {
	n := 0
	for _, a := range as {
		if a.code == http.StatusOK {
			n++
		}
	}
	return n
}

// checkPaidOnce checks every 200 answer against the chain: its
// transaction is mined; a transaction shared by several answers is one
// send-many call paying each of them; no two transactions hold one (key,
// nonce); each recipient holds exactly one drip per 200 answer; the
// mempool is empty and every answered nonce is below its key's confirmed
// one, so no key is left with a gap. It returns each key's final nonce.
func (e *faultEnv) checkPaidOnce(answers []dripAnswer) map[string]uint64 {
	e.t.Helper()
	type slot struct {
		sender stacks.Address
		nonce  uint64
	}
	bySlot := map[slot]string{}
	perTx := map[string]int{}
	calls := map[string]bool{}
	perRecipient := map[stacks.Principal]uint64{}
	for _, a := range answers {
		if a.code != http.StatusOK {
			continue
		}
		tx, err := stacks.DecodeTransaction(a.raw)
		if err != nil {
			e.t.Fatalf("txRaw of %s: %v", a.txid, err)
		}
		s := slot{tx.SenderAddress(), tx.Auth.Nonce}
		if other, dup := bySlot[s]; dup && other != a.txid {
			e.t.Errorf("key %s nonce %d holds two answered transactions: %s and %s", s.sender, s.nonce, other, a.txid)
		}
		bySlot[s] = a.txid
		if perTx[a.txid] == 0 {
			if st := e.dn.TxStatus(tx.TxID()); st.State != devnode.TxConfirmed {
				e.t.Errorf("answered transaction %s (key %s nonce %d) not mined: %+v", a.txid, s.sender, s.nonce, st)
			}
		}
		perTx[a.txid]++
		calls[a.txid] = tx.ContractCall != nil
		perRecipient[a.to]++
	}
	batched := 0
	for txid, n := range perTx {
		switch {
		case n > 1 && !calls[txid]:
			e.t.Errorf("transfer %s answered to %d drips", txid, n)
		case n > 1:
			batched += n
		}
	}
	for to, n := range perRecipient {
		if bal, _ := e.dn.Account(to.Address); bal != n*faucet.DefaultAmount {
			e.t.Errorf("recipient %s holds %d µSTX after %d drips answered 200: want %d", to, bal, n, n*faucet.DefaultAmount)
		}
	}
	if n := e.dn.MempoolSize(); n != 0 {
		e.t.Errorf("mempool still holds %d transactions", n)
	}
	for s, txid := range bySlot {
		if _, next := e.dn.Account(s.sender); s.nonce >= next {
			e.t.Errorf("%s at key %s nonce %d is at or above the key's confirmed nonce %d", txid, s.sender, s.nonce, next)
		}
	}
	e.t.Logf("%d drips answered 200 in %d transactions (%d drips in send-many calls) over %d recipients", countOK(answers), len(perTx), batched, len(perRecipient))
	nonces := map[string]uint64{}
	for _, k := range e.keys {
		_, nonce := e.dn.Account(k.TestnetAddress())
		nonces[k.TestnetAddress().String()[:6]] = nonce
	}
	return nonces
}
