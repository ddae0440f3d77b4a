package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/internal/logtest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"github.com/stxfaucet/faucet-operator/server/settings"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// testFunding is what each faucet key holds unless a test says otherwise:
// enough for stacking drips (min_amount_ustx × 1.2 = 150,000 STX).
const testFunding uint64 = 1_000_000_000_000

// options shape a harness.
type options struct {
	keys     int  // faucet keys; default 1
	unfunded bool // keys start with no balance
	limits   guard.Limits
	disabled bool // suspended faucet
	// suspendedAssets are suspended alone, offAssets turned off
	// (Config.Switches).
	suspendedAssets, offAssets []faucet.Asset
	hops                       int // TrustedProxyHops
	statusTTL                  time.Duration
	clock                      clock.PassiveClock // the server's clock; nil is the real one
	faucetCfg                  func(*faucet.Config)
	// guard, when set, builds the abuse checks (Accounts defaults to the
	// node client, the PoW secret to the faucet's derived one).
	guard    *guard.Config
	lowDrips int
	// stallAfter is Config.StallAfter (0: no stall reports).
	stallAfter time.Duration
	devnode    devnode.Config // Genesis and Seed are filled in
	// sbtc, when set, deploys the token at settings.SBTCTestnet, mints each
	// key sbtc.funding satoshis and turns the sBTC faucet on at
	// sbtc.amount per drip.
	sbtc *sbtcOptions
	// btc, when set, is the BTC faucet the handler serves.
	btc BTCFaucet
	// devnet is Config.Devnet.
	devnet bool
	// tiers and signIn are Config.Tiers and Config.SignIn.
	tiers  *identity.Tiers
	signIn SignIn
}

type sbtcOptions struct{ funding, amount uint64 }

// names are assets' names.
func names(assets []faucet.Asset) []string {
	out := make([]string, 0, len(assets))
	for _, a := range assets {
		out = append(out, string(a.OrSTX()))
	}
	return out
}

// harness is a devnode served over HTTP, the real node client and engine on
// top, and the handler under test.
type harness struct {
	t       *testing.T
	dn      *devnode.Node
	nodeSrv *httptest.Server
	client  *node.Client
	f       *faucet.Faucet
	keys    []*stacks.PrivateKey
	reg     *prometheus.Registry
	metrics *Metrics
	status  *countingNode
	logs    *syncBuffer
	log     *slog.Logger
	h       http.Handler
	guard   *guard.Chain
	// switches are the server's; a test may flip them while it runs.
	switches *switches.Set
}

func newHarness(t *testing.T, o options) *harness {
	t.Helper()
	if o.keys == 0 {
		o.keys = 1
	}
	genesis := map[stacks.Address]uint64{}
	var keys []*stacks.PrivateKey
	for range o.keys {
		k := newKey(t)
		keys = append(keys, k)
		if !o.unfunded {
			genesis[k.TestnetAddress()] = testFunding
		}
	}
	dcfg := o.devnode
	dcfg.Genesis, dcfg.Seed = genesis, 1
	if o.sbtc != nil {
		dcfg.TokenAsset, dcfg.TokenGenesis = settings.SBTCTestnet, map[stacks.Address]uint64{}
		for _, k := range keys {
			if o.sbtc.funding > 0 {
				dcfg.TokenGenesis[k.TestnetAddress()] = o.sbtc.funding
			}
		}
	}
	dn := devnode.New(dcfg)
	nodeSrv := httptest.NewServer(dn.Handler())
	t.Cleanup(nodeSrv.Close)

	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	client, err := node.New(nodeSrv.URL, rpcclient.WithObserver(m.ObserveNodeCall), rpcclient.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	fcfg := faucet.Config{
		Keys:   keys,
		Node:   client,
		Logger: logger,
	}
	if o.sbtc != nil {
		asset, err := stacks.ParseAssetID(settings.SBTCTestnet)
		if err != nil {
			t.Fatal(err)
		}
		fcfg.Tokens = []faucet.Token{{Name: "sbtc", Asset: asset, Amount: o.sbtc.amount}}
	}
	if o.faucetCfg != nil {
		o.faucetCfg(&fcfg)
	}
	f, err := faucet.New(fcfg)
	if err != nil {
		t.Fatal(err)
	}

	var checks *guard.Chain
	if o.guard != nil {
		gcfg := *o.guard
		if gcfg.Accounts == nil {
			gcfg.Accounts = client
		}
		if gcfg.PoW.Secret == nil {
			gcfg.PoW.Secret = f.DeriveSecret("proof-of-work challenges")
		}
		if gcfg.Logger == nil {
			gcfg.Logger = logger
		}
		checks, err = guard.New(gcfg)
		if err != nil {
			t.Fatal(err)
		}
	}
	counting := &countingNode{next: client}
	sw := switches.New(switches.State{Suspend: o.disabled, SuspendedAssets: names(o.suspendedAssets), DisabledAssets: names(o.offAssets)})
	h := New(Config{
		Txs:              client,
		Guard:            checks,
		Limits:           guard.NewRateLimits(o.limits, nil, o.clock),
		Switches:         sw,
		MCP:              true,
		LowDrips:         o.lowDrips,
		StallAfter:       o.stallAfter,
		Faucet:           f,
		BTC:              o.btc,
		Devnet:           o.devnet,
		Node:             counting,
		Version:          "v0.1.0",
		Commit:           "abc1234",
		TrustedProxyHops: o.hops,
		StatusCacheTTL:   o.statusTTL,
		Metrics:          m,
		Logger:           logger,
		Clock:            o.clock,
		Tiers:            o.tiers,
		SignIn:           o.signIn,
	})
	return &harness{t: t, dn: dn, nodeSrv: nodeSrv, client: client, f: f, keys: keys, reg: reg, metrics: m, status: counting, logs: logs, log: logger, h: h, guard: checks, switches: sw}
}

// mineEvery mines a block every d until ctx ends; the channel closes once
// the miner has stopped.
func (h *harness) mineEvery(ctx context.Context, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				h.dn.Mine()
			}
		}
	}()
	return done
}

// do serves one request in process. RemoteAddr is a fixed documentation
// address unless hdr sets "RemoteAddr".
func (h *harness) do(method, target string, body io.Reader, hdr map[string]string) *httptest.ResponseRecorder {
	h.t.Helper()
	r := httptest.NewRequest(method, target, body)
	r.RemoteAddr = "192.0.2.10:40000"
	for k, v := range hdr {
		if k == "RemoteAddr" {
			r.RemoteAddr = v
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, r)
	return w
}

// dripV3 posts a JSON body to the v3 endpoint.
func (h *harness) dripV3(body string, hdr map[string]string) *httptest.ResponseRecorder {
	h.t.Helper()
	all := map[string]string{"Content-Type": "application/json"}
	maps.Copy(all, hdr)
	return h.do(http.MethodPost, "/extended/v3/faucets/stx", strings.NewReader(body), all)
}

func (h *harness) drip(query string) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.do(http.MethodPost, "/extended/v1/faucets/stx?"+query, nil, nil)
}

// newKey returns a fresh compressed testnet key.
func newKey(t testing.TB) *stacks.PrivateKey {
	t.Helper()
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newRecipient returns a fresh ST… address string.
func newRecipient(t testing.TB) string {
	t.Helper()
	return newKey(t).TestnetAddress().String()
}

// decodeMap decodes a JSON object body.
func decodeMap(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, b)
	}
	return m
}

func keySet(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

func assertKeys(t testing.TB, m map[string]any, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := keySet(m); !slices.Equal(got, want) {
		t.Errorf("keys = %v, want exactly %v", got, want)
	}
}

// assertError checks a JSON error answer and returns its decoded body.
func assertError(t testing.TB, w *httptest.ResponseRecorder, status int, errContains string) map[string]any {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want JSON", ct)
	}
	m := decodeMap(t, w.Body.Bytes())
	if m["success"] != false {
		t.Errorf("success = %v, want false", m["success"])
	}
	msg, _ := m["error"].(string)
	if !strings.Contains(msg, errContains) {
		t.Errorf("error = %q, want it to contain %q", msg, errContains)
	}
	return m
}

// countingNode counts status reads and can delay, fail or alter them.
type countingNode struct {
	next      StatusNode
	infoCalls atomic.Int64
	poxCalls  atomic.Int64

	mu         sync.Mutex
	delay      time.Duration
	poxErr     error
	mutateInfo func(*node.Info)
}

func (c *countingNode) settings() (time.Duration, func(*node.Info), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delay, c.mutateInfo, c.poxErr
}

func (c *countingNode) Info(ctx context.Context) (*node.Info, error) {
	c.infoCalls.Add(1)
	delay, mutate, _ := c.settings()
	time.Sleep(delay)
	info, err := c.next.Info(ctx)
	if err == nil && mutate != nil {
		mutate(info)
	}
	return info, err
}

func (c *countingNode) PoX(ctx context.Context) (*node.PoXInfo, error) {
	c.poxCalls.Add(1)
	delay, _, poxErr := c.settings()
	time.Sleep(delay)
	if poxErr != nil {
		return nil, poxErr
	}
	return c.next.PoX(ctx)
}

var errInjected = errors.New("injected pox failure")

// readerOrNil turns a nil *strings.Reader into a nil io.Reader (an
// interface holding a nil pointer is not nil).
func readerOrNil(r *strings.Reader) io.Reader {
	if r == nil {
		return nil
	}
	return r
}

// counterValue reads one sample of a counter (or gauge) from reg; labels
// must match exactly. A missing series fails the test.
func counterValue(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if !maps.Equal(got, labels) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no sample %s%v", name, labels)
	return 0
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = logtest.Buffer
