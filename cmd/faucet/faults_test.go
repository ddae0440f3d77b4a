package main

// The fault suite runs `faucet serve` as real processes (this test binary,
// re-executed as the command) against an in-process devnode whose blocks the
// test mines, and kills them with SIGTERM or SIGKILL mid-work. Every wait is
// bounded; nothing asserts speed.

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// asFaucetEnv makes the test binary behave as the faucet command.
const asFaucetEnv = "FAUCET_TEST_RUN_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asFaucetEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(pgtest.RunMain(m))
}

// faultKeyFunding is each faucet key's genesis balance in the fault suite.
const faultKeyFunding uint64 = 1_000_000_000_000_000

// faultEnv is a devnode served over HTTP, funded faucet keys in a key file,
// and a directory for stores and logs.
type faultEnv struct {
	t       *testing.T
	dn      *devnode.Node
	nodeURL string
	keys    []*stacks.PrivateKey
	keyFile string
	dir     string
}

func newFaultEnv(t *testing.T, nKeys int) *faultEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("fault suite runs processes; skipped in -short")
	}
	genesis := map[stacks.Address]uint64{}
	var hexKeys []string
	var keys []*stacks.PrivateKey
	for range nKeys {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		genesis[k.TestnetAddress()] = faultKeyFunding
		hexKeys = append(hexKeys, k.Hex())
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keyFile, []byte(strings.Join(hexKeys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: genesis, Seed: 7})
	srv := httptest.NewServer(dn.Handler())
	t.Cleanup(srv.Close)
	return &faultEnv{t: t, dn: dn, nodeURL: srv.URL, keys: keys, keyFile: keyFile, dir: dir}
}

// faucetProc is one `faucet serve` process.
type faucetProc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	err  error
	logs *lockedBuffer
}

// serve starts `faucet serve` with the env's node and keys plus args, and
// waits until it listens.
func (e *faultEnv) serve(name string, args ...string) *faucetProc {
	e.t.Helper()
	full := append([]string{"serve", "--node-url", e.nodeURL, "--key-file", e.keyFile,
		"--listen", "127.0.0.1:0", "--log-format", "json", "--log-level", "info", "--busy-wait", "10s",
		"--limit-ip", "0"}, args...) // every client here is 127.0.0.1
	cmd := exec.Command(os.Args[0], full...)
	cmd.Env = append(os.Environ(), asFaucetEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &faucetProc{t: e.t, name: name, cmd: cmd, done: make(chan struct{}), logs: &lockedBuffer{}}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http server listening" {
				select {
				case listening <- rec.Addr:
				default:
				}
			}
		}
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if e.t.Failed() {
			e.t.Logf("%s logs (last lines):\n%s", name, p.logs.tail(40))
		}
	})
	select {
	case addr := <-listening:
		p.url = "http://" + addr
	case <-p.done:
		e.t.Fatalf("%s exited at start: %v\n%s", name, p.err, p.logs.tail(20))
	case <-time.After(30 * time.Second):
		e.t.Fatalf("%s did not listen within 30s\n%s", name, p.logs.tail(20))
	}
	return p
}

// waitReady polls /readyz until it answers 200.
func (p *faucetProc) waitReady() {
	p.t.Helper()
	if err := eventually.Wait(p.t, 30*time.Second, func() bool { return ready(p.url) }); err != nil {
		p.t.Fatalf("%s not ready: %v\n%s", p.name, err, p.logs.tail(20))
	}
}

// stop sends sig and waits for the exit; SIGTERM must exit cleanly.
func (p *faucetProc) stop(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		p.t.Fatalf("%s did not exit after %v", p.name, sig)
	}
	if sig == syscall.SIGTERM && p.err != nil {
		p.t.Fatalf("%s exited with %v after SIGTERM\n%s", p.name, p.err, p.logs.tail(20))
	}
}

// dripAnswer is one HTTP answer to a drip.
type dripAnswer struct {
	to         stacks.Principal
	code       int // 0 when the request failed without an answer
	txid       string
	raw        []byte
	reason     string
	retryAfter string
}

var dripClient = &http.Client{Timeout: 60 * time.Second}

func (p *faucetProc) drip(to stacks.Principal) dripAnswer {
	a := dripAnswer{to: to}
	resp, err := dripClient.Post(p.url+"/extended/v1/faucets/stx?address="+to.String(), "", nil)
	if err != nil {
		return a
	}
	defer resp.Body.Close()
	var body struct {
		TxID   string `json:"txId"`
		TxRaw  string `json:"txRaw"`
		Reason string `json:"reason"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil {
		return a
	}
	a.code, a.txid, a.reason, a.retryAfter = resp.StatusCode, body.TxID, body.Reason, resp.Header.Get("Retry-After")
	a.raw, _ = hex.DecodeString(body.TxRaw)
	return a
}

// burst sends one drip per recipient, n at a time, over the given replicas
// in turn, and returns the answers in recipient order.
func burst(procs []*faucetProc, to []stacks.Principal, parallel int) []dripAnswer {
	out := make([]dripAnswer, len(to))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range to {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = procs[i%len(procs)].drip(to[i])
		})
	}
	wg.Wait()
	return out
}

func newRecipients(t *testing.T, n int) []stacks.Principal {
	t.Helper()
	out := make([]stacks.Principal, n)
	for i := range out {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = stacks.Principal{Address: k.TestnetAddress()}
	}
	return out
}

// mineUntilEmpty mines blocks, pausing so the faucet's poll loop sees each
// one (it repairs stuck nonces per block), until the mempool is empty. It
// fails after maxBlocks blocks.
func (e *faultEnv) mineUntilEmpty(maxBlocks int) int {
	e.t.Helper()
	for b := 1; b <= maxBlocks; b++ {
		e.dn.Mine()
		if e.dn.MempoolSize() == 0 {
			return b
		}
		time.Sleep(1200 * time.Millisecond) // the faucet polls the tip every second
	}
	e.t.Fatalf("mempool still holds %d txs after %d blocks", e.dn.MempoolSize(), maxBlocks)
	return 0
}

// checkPaid asserts every 200 answer's tx is mined, no (key, nonce) was used
// twice, and each recipient holds exactly one drip per 200 answer, plus at
// most one per request that got no answer at all (the process died); an
// error answer never paid. The keys spent at least what recipients hold.
func (e *faultEnv) checkPaid(answers []dripAnswer, amount uint64) {
	e.t.Helper()
	type slot struct {
		sender stacks.Address
		nonce  uint64
	}
	seen := map[slot]string{}
	paid, unknown := map[stacks.Principal]uint64{}, map[stacks.Principal]uint64{}
	var fees uint64
	for _, a := range answers {
		switch a.code {
		case 0:
			unknown[a.to]++
			continue
		case http.StatusOK:
		default:
			paid[a.to] += 0
			continue
		}
		tx, err := stacks.DecodeTransaction(a.raw)
		if err != nil {
			e.t.Fatalf("txRaw of %s: %v", a.txid, err)
		}
		s := slot{tx.SenderAddress(), tx.Auth.Nonce}
		if other, dup := seen[s]; dup {
			e.t.Errorf("(key %s, nonce %d) answered twice: %s and %s", s.sender, s.nonce, other, a.txid)
		}
		seen[s] = a.txid
		if st := e.dn.TxStatus(tx.TxID()); st.State != devnode.TxConfirmed {
			e.t.Errorf("answered tx %s (nonce %d) not mined: %+v", a.txid, s.nonce, st)
		}
		paid[a.to]++
		fees += tx.Auth.Fee
	}
	var received uint64
	for to := range unknown {
		paid[to] += 0
	}
	for to, n := range paid {
		bal, _ := e.dn.Account(to.Address)
		if bal < n*amount || bal > (n+unknown[to])*amount || bal%amount != 0 {
			e.t.Errorf("recipient %s holds %d: want %d drips answered 200 plus at most %d unanswered", to, bal, n, unknown[to])
		}
		received += bal
	}
	var spent uint64
	for _, k := range e.keys {
		bal, _ := e.dn.Account(k.TestnetAddress())
		spent += faultKeyFunding - bal
	}
	if spent < received+fees {
		e.t.Errorf("keys spent %d, less than recipients received %d plus answered fees %d", spent, received, fees)
	}
}

// lockedBuffer keeps a process's log lines.
type lockedBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *lockedBuffer) add(s string) {
	b.mu.Lock()
	b.lines = append(b.lines, s)
	b.mu.Unlock()
}

// Write adds p's lines: the buffer can be an in-process command's stderr.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		b.add(line)
	}
	return len(p), nil
}

// String is every line so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := max(0, len(b.lines)-n)
	return strings.Join(b.lines[from:], "\n")
}

// TestFaultsRestartSQLite: 20 unconfirmed drips, SIGTERM, restart, 20 more
// → 40 of 40 answered 200 and mined with exact balances; an address at its
// limit before the restart is still refused after it, with a Retry-After
// within the window.
func TestFaultsRestartSQLite(t *testing.T) {
	e := newFaultEnv(t, 2)
	store := filepath.Join(e.dir, "state.db")
	p := e.serve("faucet-1", "--store", store)
	p.waitReady()

	limited := newRecipients(t, 1)[0]
	first := newRecipients(t, 15)
	for range 5 {
		first = append(first, limited)
	}
	before := burst([]*faucetProc{p}, first, 4)
	for i, a := range before {
		if a.code != http.StatusOK {
			t.Fatalf("drip %d before the restart: %d %s", i, a.code, a.reason)
		}
	}
	if n := e.dn.MempoolSize(); n != 20 {
		t.Fatalf("mempool %d, want the 20 unconfirmed drips", n)
	}
	p.stop(syscall.SIGTERM)

	start := time.Now()
	p2 := e.serve("faucet-2", "--store", store)
	p2.waitReady()
	after := burst([]*faucetProc{p2}, newRecipients(t, 20), 4)
	for i, a := range after {
		if a.code != http.StatusOK {
			t.Fatalf("drip %d after the restart: %d %s", i, a.code, a.reason)
		}
	}
	a := p2.drip(limited)
	if a.code != http.StatusTooManyRequests {
		t.Fatalf("6th drip to a limited address after the restart: %d %s, want 429", a.code, a.reason)
	}
	secs, err := strconv.Atoi(a.retryAfter)
	if err != nil || secs <= 0 || time.Duration(secs)*time.Second > 5*time.Minute-time.Since(start)+2*time.Second {
		t.Errorf("Retry-After %q: want the rest of the 5-minute window", a.retryAfter)
	}
	e.mineUntilEmpty(3)
	all := slices.Concat(before, after)
	e.checkPaid(all[:15], 500_000_000)
	e.checkPaid(all[20:], 500_000_000)
	if bal, _ := e.dn.Account(limited.Address); bal != 5*500_000_000 {
		t.Errorf("limited address holds %d, want 5 drips", bal)
	}
}

// TestFaultsKillDuringBurstSQLite: SIGKILL at a random point of a burst, a
// restart and more drips: no double payment, every answered drip mined, and
// no nonce stuck for more than three blocks.
func TestFaultsKillDuringBurstSQLite(t *testing.T) {
	// 4 keys × 25 in flight hold the burst and the drips after the restart
	// without a block in between.
	e := newFaultEnv(t, 4)
	store := filepath.Join(e.dir, "state.db")
	p := e.serve("faucet-1", "--store", store)
	p.waitReady()

	to := newRecipients(t, 40)
	answers := make([]dripAnswer, len(to))
	killAfter := 1 + rand.IntN(20)
	var mu sync.Mutex
	answeredN := 0
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i := range to {
		wg.Go(func() {
			a := p.drip(to[i])
			answers[i] = a
			mu.Lock()
			answeredN++
			n := answeredN
			mu.Unlock()
			if n == killAfter {
				once.Do(func() {
					_ = p.cmd.Process.Signal(syscall.SIGKILL)
					close(killed)
				})
			}
		})
	}
	wg.Wait()
	<-killed
	<-p.done
	ok := 0
	for _, a := range answers {
		if a.code == http.StatusOK {
			ok++
		}
	}
	t.Logf("SIGKILL after %d answers: %d of %d answered 200, mempool %d", killAfter, ok, len(to), e.dn.MempoolSize())

	p2 := e.serve("faucet-2", "--store", store)
	p2.waitReady()
	more := burst([]*faucetProc{p2}, newRecipients(t, 20), 4)
	for i, a := range more {
		if a.code != http.StatusOK {
			t.Fatalf("drip %d after the restart: %d %s", i, a.code, a.reason)
		}
	}
	blocks := e.mineUntilEmpty(4)
	t.Logf("mempool empty after %d blocks", blocks)
	e.checkPaid(append(answers, more...), 500_000_000)
}

// ownedKeys reads how many keys a replica owns from its metrics.
func (p *faucetProc) ownedKeys() int {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "faucet_key_owned{") && strings.HasSuffix(line, " 1") {
			n++
		}
	}
	return n
}

// waitOwned waits until the replica owns want keys.
func (p *faucetProc) waitOwned(want int, within time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if p.ownedKeys() == want {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("%s owns %d keys after %s, want %d\n%s", p.name, p.ownedKeys(), within, want, p.logs.tail(20))
	return 0
}

// mineEvery mines a block every d until the test ends.
func (e *faultEnv) mineEvery(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				e.dn.Mine()
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	e.t.Cleanup(stop)
	return stop
}

// TestFaultsTwoReplicasPostgres: two replicas on one Postgres split the
// keys; 50 concurrent requests for one address over both yield exactly 5
// drips; 1,000 concurrent drips over both with one replica killed mid-run
// leave no duplicate (key, nonce), every answered drip mined and balances
// exact, and the survivor takes the dead replica's keys over.
func TestFaultsTwoReplicasPostgres(t *testing.T) {
	e := newFaultEnv(t, 4)
	uri := pgtest.Shared(t).CreateDB(t)
	a := e.serve("replica-a", "--store", uri, "--busy-wait", "20s")
	b := e.serve("replica-b", "--store", uri, "--busy-wait", "20s")
	a.waitOwned(2, 20*time.Second)
	b.waitOwned(2, 20*time.Second)
	a.waitReady()
	b.waitReady()

	one := newRecipients(t, 1)[0]
	same := make([]stacks.Principal, 50)
	for i := range same {
		same[i] = one
	}
	got := burst([]*faucetProc{a, b}, same, 50)
	accepted := 0
	for _, r := range got {
		switch r.code {
		case http.StatusOK:
			accepted++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("same-address drip answered %d %s", r.code, r.reason)
		}
	}
	if accepted != 5 {
		t.Fatalf("50 requests for one address over two replicas: %d accepted, want exactly 5", accepted)
	}

	stopMining := e.mineEvery(200 * time.Millisecond)
	to := newRecipients(t, 1000)
	answers := make([]dripAnswer, len(to))
	var answered sync.WaitGroup
	answered.Add(300)
	var killedAt time.Time
	var once sync.Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := 0
	for i := range to {
		wg.Go(func() {
			answers[i] = []*faucetProc{a, b}[i%2].drip(to[i])
			mu.Lock()
			count++
			n := count
			mu.Unlock()
			if n == 300 {
				once.Do(func() {
					_ = b.cmd.Process.Signal(syscall.SIGKILL)
					killedAt = time.Now()
				})
			}
		})
	}
	wg.Wait()
	<-b.done
	took := a.waitOwned(4, 30*time.Second)
	ok := 0
	for _, r := range answers {
		if r.code == http.StatusOK {
			ok++
		}
	}
	t.Logf("1000 drips: %d answered 200; replica B killed after 300 answers; A owned all 4 keys %s after the kill (checked %s later)",
		ok, time.Since(killedAt).Round(time.Millisecond), took.Round(time.Millisecond))
	if ok < 500 {
		t.Errorf("only %d of 1000 drips accepted", ok)
	}
	stopMining()
	e.mineUntilEmpty(6)
	e.checkPaid(append(got, answers...), 500_000_000)
}

// TestFaultsPostgresOutage: Postgres stopped while drips run → drips answer
// store_unavailable (status keeps working), then recover once it is back,
// without a restart of the faucet.
func TestFaultsPostgresOutage(t *testing.T) {
	e := newFaultEnv(t, 2)
	pg := pgtest.Start(t)
	uri := pg.CreateDB(t)
	p := e.serve("faucet", "--store", uri)
	p.waitReady()
	var answers []dripAnswer
	for range 3 {
		r := p.drip(newRecipients(t, 1)[0])
		if r.code != http.StatusOK {
			t.Fatalf("drip before the outage: %d %s", r.code, r.reason)
		}
		answers = append(answers, r)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	r := p.drip(newRecipients(t, 1)[0])
	if r.code != http.StatusServiceUnavailable || r.reason != "store_unavailable" || r.retryAfter == "" {
		t.Fatalf("drip during the outage: %d %q (Retry-After %q), want 503 store_unavailable with Retry-After", r.code, r.reason, r.retryAfter)
	}
	resp, err := http.Get(p.url + "/extended/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status during the outage: %d", resp.StatusCode)
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	// Drip until one is paid; meanwhile only the store's or a busy
	// refusal is acceptable.
	recovered := func() bool {
		r := p.drip(newRecipients(t, 1)[0])
		answers = append(answers, r)
		if r.code != http.StatusOK && r.reason != "store_unavailable" && r.reason != "busy" {
			t.Fatalf("drip while recovering: %d %q", r.code, r.reason)
		}
		return r.code == http.StatusOK
	}
	if err := eventually.WaitEvery(t, 60*time.Second, 200*time.Millisecond, recovered); err != nil {
		last := answers[len(answers)-1]
		t.Fatalf("no recovery (%v): last %d %q\n%s", err, last.code, last.reason, p.logs.tail(20))
	}
	select {
	case <-p.done:
		t.Fatal("the faucet exited during the outage")
	default:
	}
	e.mineUntilEmpty(3)
	e.checkPaid(answers, 500_000_000)
}
