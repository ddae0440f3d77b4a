package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// cost is one default drip: 500 STX plus the 1000 µSTX fee fallback.
const cost = uint64(500_001_000)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)

func fundingFS() *faucetv1alpha1.FaucetServer {
	return &faucetv1alpha1.FaucetServer{Spec: faucetv1alpha1.FaucetServerSpec{
		Node: faucetv1alpha1.NodeSpec{URL: "http://node:20443"},
	}}
}

func TestDripCostAndThreshold(t *testing.T) {
	fs := fundingFS()
	if got := dripCost(fs); got != cost {
		t.Errorf("default drip cost %d, want %d", got, cost)
	}
	if got := lowThreshold(fs); got != 100 {
		t.Errorf("default low threshold %d", got)
	}
	fs.Spec.Amounts = &faucetv1alpha1.Amounts{Default: ptr.To(int64(1_000_000))}
	fs.Spec.Fee = &faucetv1alpha1.Fee{Fallback: ptr.To(int64(500))}
	fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(0))}
	if got := dripCost(fs); got != 1_000_500 {
		t.Errorf("drip cost %d", got)
	}
	if got := lowThreshold(fs); got != 0 {
		t.Errorf("low threshold %d", got)
	}
}

func TestRedactURL(t *testing.T) {
	if got := redactURL("http://user:s3cret@node:20443/rpc"); got != "http://node:20443/rpc" {
		t.Errorf("redactURL = %q", got)
	}
}

func TestFormatSTX(t *testing.T) {
	for ustx, want := range map[uint64]string{
		0: "0.00", 9_999: "0.00", 10_000: "0.01", 12_345_678_901: "12345.67", 1_000_000: "1.00",
	} {
		if got := formatSTX(ustx); got != want {
			t.Errorf("formatSTX(%d) = %q, want %q", ustx, got, want)
		}
	}
	for ustx, want := range map[uint64]string{500_001_000: "500.001", 1_000_000: "1", 1: "0.000001"} {
		if got := formatSTXExact(ustx); got != want {
			t.Errorf("formatSTXExact(%d) = %q, want %q", ustx, got, want)
		}
	}
}

func TestRunway(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	tests := map[string]struct {
		samples []fundingSample
		total   uint64
		want    time.Duration
		ok      bool
	}{
		"no samples":  {},
		"one sample":  {samples: []fundingSample{{at(0), 100}}, total: 100},
		"same time":   {samples: []fundingSample{{at(0), 100}, {at(0), 50}}, total: 50},
		"not moving":  {samples: []fundingSample{{at(0), 100}, {at(1), 100}, {at(2), 100}}, total: 100},
		"only rising": {samples: []fundingSample{{at(0), 100}, {at(1), 200}}, total: 200},
		"steady spend: 60 µSTX an hour, 600 left": {
			samples: []fundingSample{{at(0), 720}, {at(30), 690}, {at(60), 660}, {at(120), 600}},
			total:   600, want: 10 * time.Hour, ok: true,
		},
		"a refill is not spending": {
			// 30 spent, +1000 refilled, 30 spent: 60 over an hour.
			samples: []fundingSample{{at(0), 100}, {at(30), 70}, {at(31), 1070}, {at(60), 1040}},
			total:   1040, want: 1040 * time.Minute, ok: true,
		},
		"short runways keep seconds": {
			samples: []fundingSample{{at(0), 1000}, {at(1), 900}},
			total:   900, want: 9 * time.Minute, ok: true,
		},
		"spent, nothing left to spend (down to the reserve)": {
			samples: []fundingSample{{at(0), 1000}, {at(1), 900}},
			total:   0, want: 0, ok: true,
		},
		"capped": {
			samples: []fundingSample{{at(0), 1 << 62}, {at(60), 1<<62 - 1}},
			total:   1<<62 - 1, want: maxRunway, ok: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := runway(tt.samples, tt.total)
			if ok != tt.ok || got != tt.want {
				t.Errorf("runway = %s, %v; want %s, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestComputeFunding(t *testing.T) {
	target := fundingTarget{nodeURLs: []string{"http://node:20443"}, addresses: []string{"ST1A", "ST1B"}}
	result := func(balances ...uint64) fundingResult {
		return fundingResult{target: target, ok: true, balances: balances, checked: t0}
	}
	low := func(n int64) func(*faucetv1alpha1.FaucetServer) {
		return func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: &n}
		}
	}
	tests := map[string]struct {
		mutate     func(*faucetv1alpha1.FaucetServer)
		res        fundingResult
		previous   *faucetv1alpha1.FundingStatus
		wantStatus metav1.ConditionStatus
		wantReason string
		check      func(t *testing.T, st *faucetv1alpha1.FundingStatus, msg string)
	}{
		"funded: per-key floors add up": {
			mutate: low(10),
			res:    result(7*cost+cost-1, 3*cost),
			// 7.99… drips count as 7: one key pays a whole drip.
			wantStatus: metav1.ConditionTrue, wantReason: faucetv1alpha1.ReasonFunded,
			check: func(t *testing.T, st *faucetv1alpha1.FundingStatus, msg string) {
				if st.DripsLeft != 10 || st.Keys[0].DripsLeft != 7 || st.Keys[1].DripsLeft != 3 {
					t.Errorf("drips %d (%+v)", st.DripsLeft, st.Keys)
				}
				if st.TotalUSTX != int64(11*cost-1) || st.BalanceSTX != "5500.01" {
					t.Errorf("total %d %q", st.TotalUSTX, st.BalanceSTX)
				}
				if st.Keys[0].Address != "ST1A" || st.Keys[0].BalanceUSTX != int64(8*cost-1) {
					t.Errorf("key %+v", st.Keys[0])
				}
				if !st.LastChecked.Time.Equal(t0.Truncate(time.Second)) {
					t.Errorf("lastChecked %s, want whole seconds (what the API server stores)", st.LastChecked)
				}
				if st.Runway != nil || st.Treasury != nil {
					t.Errorf("runway %v treasury %v", st.Runway, st.Treasury)
				}
				if !strings.Contains(msg, "10 drip(s)") {
					t.Errorf("message %q", msg)
				}
			},
		},
		"low: below the default threshold of 100": {
			res: result(60*cost, 39*cost), wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonLow,
			check: func(t *testing.T, st *faucetv1alpha1.FundingStatus, msg string) {
				if st.DripsLeft != 99 || !strings.Contains(msg, "low threshold of 100") {
					t.Errorf("drips %d, message %q", st.DripsLeft, msg)
				}
			},
		},
		"exactly at the threshold is funded": {
			res: result(60*cost, 40*cost), wantStatus: metav1.ConditionTrue, wantReason: faucetv1alpha1.ReasonFunded,
		},
		"empty: no key can pay one drip, though together they could": {
			res: result(cost-1, cost-1), wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonEmpty,
			check: func(t *testing.T, st *faucetv1alpha1.FundingStatus, msg string) {
				if st.DripsLeft != 0 || st.TotalUSTX != int64(2*cost-2) || !strings.Contains(msg, "ST1A, ST1B") {
					t.Errorf("status %+v, message %q", st, msg)
				}
			},
		},
		"the deprecated page.lowDrips stands in for an unset lowThreshold": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Page = &faucetv1alpha1.PageSpec{LowDrips: ptr.To(int32(150))}
			},
			res: result(60*cost, 60*cost), wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonLow,
			check: func(t *testing.T, _ *faucetv1alpha1.FundingStatus, msg string) {
				if !strings.Contains(msg, "low threshold of 150") {
					t.Errorf("message %q", msg)
				}
			},
		},
		"lowThreshold wins over the deprecated page.lowDrips": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				low(100)(fs)
				fs.Spec.Page = &faucetv1alpha1.PageSpec{LowDrips: ptr.To(int32(150))}
			},
			res: result(60*cost, 60*cost), wantStatus: metav1.ConditionTrue, wantReason: faucetv1alpha1.ReasonFunded,
		},
		"threshold 0 reports only empty": {
			mutate: low(0), res: result(cost, 0), wantStatus: metav1.ConditionTrue, wantReason: faucetv1alpha1.ReasonFunded,
		},
		"a bigger drip amount means fewer drips": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Amounts = &faucetv1alpha1.Amounts{Default: ptr.To(int64(10 * 1_000_000))}
				fs.Spec.Fee = &faucetv1alpha1.Fee{Fallback: ptr.To(int64(1_000_000))}
			},
			res: result(1100*1_000_000, 0), wantStatus: metav1.ConditionTrue, wantReason: faucetv1alpha1.ReasonFunded,
			check: func(t *testing.T, st *faucetv1alpha1.FundingStatus, _ string) {
				if st.DripsLeft != 100 {
					t.Errorf("drips %d", st.DripsLeft)
				}
			},
		},
		"runway and treasury": {
			res: func() fundingResult {
				r := result(200*cost, 0)
				r.target.treasury = "ST1T"
				r.treasury = 42
				r.samples = []fundingSample{{t0.Add(-time.Hour), 210 * cost}, {t0, 200 * cost}}
				return r
			}(),
			wantStatus: metav1.ConditionTrue, wantReason: faucetv1alpha1.ReasonFunded,
			check: func(t *testing.T, st *faucetv1alpha1.FundingStatus, msg string) {
				if st.Runway == nil || st.Runway.Duration != 20*time.Hour {
					t.Errorf("runway %v, want 20h", st.Runway)
				}
				if st.Treasury == nil || *st.Treasury != (faucetv1alpha1.AccountFunding{Address: "ST1T", BalanceUSTX: 42}) {
					t.Errorf("treasury %+v", st.Treasury)
				}
				if !strings.Contains(msg, "about 20h0m0s") {
					t.Errorf("message %q", msg)
				}
			},
		},
		"node unreachable keeps the last read": {
			res: func() fundingResult {
				r := result(200*cost, 0)
				r.err = errors.New("connection refused")
				return r
			}(),
			wantStatus: metav1.ConditionUnknown, wantReason: faucetv1alpha1.ReasonNodeUnreachable,
			check: func(t *testing.T, st *faucetv1alpha1.FundingStatus, msg string) {
				if st == nil || st.DripsLeft != 200 || !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "http://node:20443") {
					t.Errorf("status %+v message %q", st, msg)
				}
			},
		},
		"node unreachable from the start keeps the previous status": {
			res:        fundingResult{target: target, err: errors.New("timeout")},
			previous:   &faucetv1alpha1.FundingStatus{Keys: []faucetv1alpha1.KeyFunding{{Address: "ST1A"}, {Address: "ST1B"}}, DripsLeft: 5},
			wantStatus: metav1.ConditionUnknown, wantReason: faucetv1alpha1.ReasonNodeUnreachable,
			check: func(t *testing.T, st *faucetv1alpha1.FundingStatus, _ string) {
				if st == nil || st.DripsLeft != 5 {
					t.Errorf("status %+v", st)
				}
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fundingFS()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			out := computeFunding(fs, tt.res, tt.previous)
			if out.condStatus != tt.wantStatus || out.condReason != tt.wantReason {
				t.Fatalf("Funded %s %s (%s), want %s %s", out.condStatus, out.condReason, out.condMessage, tt.wantStatus, tt.wantReason)
			}
			if tt.check != nil {
				tt.check(t, out.status, out.condMessage)
			}
		})
	}
}

// TestComputeStatusFunding checks how the Funded condition and
// status.funding enter the status, and that Ready ignores them.
func TestComputeStatusFunding(t *testing.T) {
	fs := fundingFS()
	fs.Generation = 3
	keys := secretState{addresses: []string{"ST1A"}}
	res := &fundingResult{target: fundingTarget{addresses: []string{"ST1A"}}, ok: true, balances: []uint64{cost}, checked: t0}

	st := computeStatus(fs, observation{keys: keys, funding: res, deployment: deployment(available)}, t0)
	c := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionFunded)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != faucetv1alpha1.ReasonLow || c.ObservedGeneration != 3 {
		t.Fatalf("Funded %+v", c)
	}
	if r := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v: a low faucet still serves", r)
	}
	if st.Funding == nil || st.Funding.DripsLeft != 1 {
		t.Fatalf("funding %+v", st.Funding)
	}

	fs.Status = st
	t.Run("no fresh read of the same keys keeps the figures", func(t *testing.T) {
		got := computeStatus(fs, observation{keys: keys, deployment: deployment(available)}, t0.Add(time.Minute))
		if got.Funding == nil || meta.FindStatusCondition(got.Conditions, faucetv1alpha1.ConditionFunded) == nil {
			t.Errorf("funding dropped: %+v", got.Funding)
		}
	})
	t.Run("other keys drop the figures of the old ones", func(t *testing.T) {
		got := computeStatus(fs, observation{keys: secretState{addresses: []string{"ST1C"}}, deployment: deployment(available)}, t0)
		if got.Funding != nil || meta.FindStatusCondition(got.Conditions, faucetv1alpha1.ConditionFunded) != nil {
			t.Errorf("funding kept: %+v", got.Funding)
		}
	})
	t.Run("unusable keys drop funding", func(t *testing.T) {
		got := computeStatus(fs, observation{keys: secretState{reason: faucetv1alpha1.ReasonInvalidKeys}}, t0)
		if got.Funding != nil || meta.FindStatusCondition(got.Conditions, faucetv1alpha1.ConditionFunded) != nil {
			t.Errorf("funding kept: %+v", got.Funding)
		}
	})
	t.Run("an error before the keys were read keeps funding", func(t *testing.T) {
		got := computeStatus(fs, observation{err: errors.New("boom")}, t0)
		if got.Funding == nil {
			t.Error("funding dropped")
		}
	})
	t.Run("a failed first read of new keys shows no old figures", func(t *testing.T) {
		failed := &fundingResult{target: fundingTarget{addresses: []string{"ST1C"}}, err: errors.New("down")}
		got := computeStatus(fs, observation{keys: secretState{addresses: []string{"ST1C"}}, funding: failed, deployment: deployment(available)}, t0)
		c := meta.FindStatusCondition(got.Conditions, faucetv1alpha1.ConditionFunded)
		if got.Funding != nil || c == nil || c.Status != metav1.ConditionUnknown {
			t.Errorf("funding %+v, Funded %+v", got.Funding, c)
		}
	})
}

// TestFundingMonitor runs the monitor against a devnode: a tracked
// FaucetServer is read at once and then every interval ±10 %, each result
// announced on the event channel; a slow node's reads time out without
// holding up another's; Forget drops the state.
func TestFundingMonitor(t *testing.T) {
	key, _ := stacks.GeneratePrivateKey()
	addr := key.TestnetAddress()
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{addr: 3 * cost}})
	fast := httptest.NewServer(dn.Handler())
	defer fast.Close()
	slowNode := devnode.New(devnode.Config{})
	slowNode.SetLatency(time.Hour)
	slow := httptest.NewServer(slowNode.Handler())
	defer func() { slow.CloseClientConnections(); slow.Close() }()

	m := &FundingMonitor{Interval: 200 * time.Millisecond, Workers: 2, CallTimeout: 300 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("funding monitor: %v", err)
		}
	}()

	slowKeys := []types.NamespacedName{{Namespace: "a", Name: "slow1"}, {Namespace: "a", Name: "slow2"}}
	for _, k := range slowKeys {
		m.Track(k, fundingTarget{nodeURLs: []string{slow.URL}, addresses: []string{addr.String()}})
	}
	fastKey := types.NamespacedName{Namespace: "a", Name: "fast"}
	target := fundingTarget{nodeURLs: []string{fast.URL}, addresses: []string{addr.String()}}
	start := time.Now()
	m.Track(fastKey, target)

	var reads []time.Time
	deadline := time.After(10 * time.Second)
	for len(reads) < 4 {
		select {
		case ev := <-m.Events():
			if ev.Object.GetName() == "fast" {
				reads = append(reads, time.Now())
			}
		case <-deadline:
			t.Fatalf("%d reads of the fast node in 10s", len(reads))
		}
	}
	// Both workers may be waiting on the slow node first: at most one
	// call timeout before the first read.
	if d := reads[0].Sub(start); d > time.Second {
		t.Errorf("first read after %s", d)
	}
	for i := 1; i < len(reads); i++ {
		// Each gap is the interval ±10 %, plus the wait for a worker.
		if d := reads[i].Sub(reads[i-1]); d < 170*time.Millisecond || d > 900*time.Millisecond {
			t.Errorf("gap %d: %s", i, d)
		}
	}
	res, ok := m.Result(fastKey, target)
	if !ok || res.err != nil || res.balances[0] != 3*cost || len(res.samples) < 4 {
		t.Fatalf("result %+v %v", res, ok)
	}
	if _, ok := m.Result(fastKey, fundingTarget{nodeURLs: []string{fast.URL}}); ok {
		t.Error("a result for another target")
	}
	var slowErr error
	for slowErr == nil && ctx.Err() == nil {
		if r, ok := m.Result(slowKeys[0], fundingTarget{nodeURLs: []string{slow.URL}, addresses: []string{addr.String()}}); ok {
			slowErr = r.err
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(slowErr.Error(), "deadline") {
		t.Errorf("slow node: %v", slowErr)
	}
	m.Forget(fastKey)
	if m.Tracking(fastKey) || !m.Tracking(slowKeys[0]) {
		t.Error("Forget")
	}
}

// parseAsset parses an asset identifier of a test.
func parseAsset(t testing.TB, id string) stacks.AssetInfo {
	t.Helper()
	a, err := stacks.ParseAssetID(id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestTokenDripCost(t *testing.T) {
	// The amount alone: the fee is paid in STX and budgeted there.
	if got := tokenDripCost(sbtcAsset(1000, nil).Token); got != 1000 {
		t.Errorf("token drip cost %d, want 1000", got)
	}
	if got := tokenDripCost(sbtcAsset(0, nil).Token); got != 1 {
		t.Errorf("token drip cost of an unvalidated 0 amount %d, want 1 (no division by zero)", got)
	}
}

// twoTokens is a FaucetServer with sbtc (1000 sats a drip) and tusd (10
// a drip, its own low threshold of 5), and the target to read them.
func twoTokens(t testing.TB) (*faucetv1alpha1.FaucetServer, fundingTarget) {
	fs := fundingFS()
	tusd := tokenAsset("tusd", testnetTUSD, 10, nil)
	tusd.LowThreshold = ptr.To(int64(5))
	withAssets(sbtcAsset(1000, nil), tusd)(fs)
	target := fundingTarget{nodeURLs: []string{"http://node:20443"}, addresses: []string{"ST1A", "ST1B"}, tokens: []tokenTarget{
		{name: "sbtc", asset: parseAsset(t, testnetSBTC)}, {name: "tusd", asset: parseAsset(t, testnetTUSD)},
	}}
	return fs, target
}

// tokensResult is a successful read of twoTokens: STX, sbtc and tusd
// balances of the two keys.
func tokensResult(target fundingTarget, stx, sbtc, tusd []uint64) fundingResult {
	res := fundingResult{target: target, ok: true, balances: stx, checked: t0}
	for i, b := range [][]uint64{sbtc, tusd} {
		res.tokens = append(res.tokens, tokenResult{ok: true, asset: target.tokens[i].asset, balances: b, checked: t0})
	}
	return res
}

// TestComputeFundingTokens: each token of spec.assets is judged against
// its own threshold, and Funded is as bad as the worst asset, its message
// leading with it, by name.
func TestComputeFundingTokens(t *testing.T) {
	fs, target := twoTokens(t)
	const sats = uint64(1000) // one sbtc drip
	plenty := []uint64{100 * cost, 100 * cost}
	tests := map[string]struct {
		res        fundingResult
		wantStatus metav1.ConditionStatus
		wantReason string
		// wantPrefix is how the message starts: the worst asset first
		wantPrefix string
		wantIn     []string
	}{
		"all funded": {
			res:        tokensResult(target, plenty, []uint64{70*sats + 999, 30 * sats}, []uint64{50, 9}),
			wantStatus: metav1.ConditionTrue, wantReason: faucetv1alpha1.ReasonFunded,
			wantPrefix: "100000.2 STX on 2 key(s): 200 drip(s)",
			wantIn:     []string{"; sbtc: 100 drips left (100999 on 2 key(s), 1000 per drip); tusd: 5 drips left (59 on 2 key(s), 10 per drip)"},
		},
		"sbtc low against the faucet's threshold, STX funded": {
			res:        tokensResult(target, plenty, []uint64{2 * sats, sats}, []uint64{1000, 0}),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonLow,
			wantPrefix: "sbtc: 3 drips left, below 100 (3000 on 2 key(s), 1000 per drip); 100000.2 STX",
		},
		"tusd low against its own threshold": {
			res:        tokensResult(target, plenty, []uint64{100 * sats, 100 * sats}, []uint64{20, 29}),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonLow,
			wantPrefix: "tusd: 4 drips left, below 5 (49 on 2 key(s), 10 per drip); 100000.2 STX",
		},
		"tusd empty though the keys together hold a drip's worth": {
			res:        tokensResult(target, plenty, []uint64{100 * sats, 100 * sats}, []uint64{9, 9}),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonEmpty,
			wantPrefix: "tusd: 0 drips left (18 on 2 key(s), 10 per drip): no key can pay one drip; send tusd (" + testnetTUSD + ") to ST1A, ST1B; ",
		},
		"STX low, the tokens funded": {
			res:        tokensResult(target, []uint64{10 * cost, 0}, []uint64{100 * sats, 100 * sats}, []uint64{100, 100}),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonLow,
			wantPrefix: "5000.01 STX on 2 key(s): 10 drip(s) of 500.001 STX (amount plus fee fallback) left, below the low threshold of 100; sbtc: 200 drips left",
		},
		"empty beats low: sbtc empty, STX low": {
			res:        tokensResult(target, []uint64{10 * cost, 0}, []uint64{0, 0}, []uint64{100, 100}),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonEmpty,
			wantPrefix: "sbtc: 0 drips left",
			wantIn:     []string{"; 5000.01 STX on 2 key(s): 10 drip(s)", "below the low threshold of 100"},
		},
		"all empty: STX first, then spec order": {
			res:        tokensResult(target, []uint64{0, 0}, []uint64{0, 0}, []uint64{0, 0}),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonEmpty,
			wantPrefix: "0 STX on 2 key(s): 0 drip(s) of 500.001 STX (amount plus fee fallback) left: no key can pay one drip; fund ST1A, ST1B; sbtc: 0 drips left",
			wantIn:     []string{"; tusd: 0 drips left"},
		},
		"a token the node refuses to read is unknown, reason AssetUnreadable, naming it; the others are judged": {
			res: func() fundingResult {
				r := tokensResult(target, plenty, []uint64{100 * sats, 100 * sats}, nil)
				r.tokens[1] = tokenResult{err: fmt.Errorf("%s balance of ST1A: %w", testnetTUSD, &node.ReadOnlyError{Function: "get-balance", Cause: "NoSuchContract"})}
				return r
			}(),
			wantStatus: metav1.ConditionUnknown, wantReason: faucetv1alpha1.ReasonAssetUnreadable,
			wantPrefix: "tusd: cannot read its balances from the node http://node:20443: " + testnetTUSD + " balance of ST1A: node call-read get-balance: NoSuchContract; 100000.2 STX",
			wantIn:     []string{"; sbtc: 200 drips left"},
		},
		"a low token beats an unreadable one: what is known to be wrong leads": {
			res: func() fundingResult {
				r := tokensResult(target, plenty, []uint64{sats, 0}, nil)
				r.tokens[1] = tokenResult{err: node.ErrPoXTokenNotTestnet}
				return r
			}(),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonLow,
			wantPrefix: "sbtc: 1 drips left, below 100",
			wantIn:     []string{"; tusd: cannot read its balances"},
		},
		"a token the node did not answer for is NodeUnreachable, naming it": {
			res: func() fundingResult {
				r := tokensResult(target, plenty, []uint64{100 * sats, 100 * sats}, nil)
				r.tokens[1] = tokenResult{err: &node.TransportError{Err: errors.New("connection reset")}}
				return r
			}(),
			wantStatus: metav1.ConditionUnknown, wantReason: faucetv1alpha1.ReasonNodeUnreachable,
			wantPrefix: "tusd: cannot read its balances from the node http://node:20443: ",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			out := computeFunding(fs, tt.res, nil)
			if out.condStatus != tt.wantStatus || out.condReason != tt.wantReason {
				t.Fatalf("Funded %s %s (%s), want %s %s", out.condStatus, out.condReason, out.condMessage, tt.wantStatus, tt.wantReason)
			}
			if !strings.HasPrefix(out.condMessage, tt.wantPrefix) {
				t.Errorf("message\n %q\nwant it to start with\n %q", out.condMessage, tt.wantPrefix)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(out.condMessage, s) {
					t.Errorf("message %q lacks %q", out.condMessage, s)
				}
			}
		})
	}

	t.Run("status.funding.assets, in spec order, with the summary", func(t *testing.T) {
		res := tokensResult(target, []uint64{cost, cost}, []uint64{7*sats + 999, 3 * sats}, nil)
		res.tokens[1] = tokenResult{err: errors.New("down")} // never read
		res.target.treasury, res.treasury, res.tokens[0].treasury = "ST1T", 42, 5_000_000
		st := computeFunding(fs, res, nil).status
		checked := ptr.To(metav1.NewTime(t0.Truncate(time.Second)))
		want := []faucetv1alpha1.AssetFunding{{
			Name: "sbtc", AssetIdentifier: testnetSBTC,
			Keys: []faucetv1alpha1.KeyTokenFunding{
				{Address: "ST1A", Balance: 7999, DripsLeft: 7},
				{Address: "ST1B", Balance: 3000, DripsLeft: 3},
			},
			Balance: ptr.To(int64(10999)), DripsLeft: ptr.To(int64(10)), TreasuryBalance: ptr.To(int64(5_000_000)), LastChecked: checked,
		}, {
			Name: "tusd", AssetIdentifier: testnetTUSD, Message: "down",
		}}
		if !equalJSON(st.Assets, want) || st.AssetsSummary != "sbtc:10 tusd:?" {
			t.Errorf("assets %q\n %s\nwant\n %s", st.AssetsSummary, mustJSON(st.Assets), mustJSON(want))
		}
		// The STX figures are as they were without tokens.
		if st.DripsLeft != 2 || st.TotalUSTX != int64(2*cost) || st.Treasury.BalanceUSTX != 42 {
			t.Errorf("STX figures %+v", st)
		}
	})

	t.Run("without spec.assets there is no list and the message is STX's alone", func(t *testing.T) {
		res := fundingResult{target: fundingTarget{addresses: []string{"ST1A"}}, ok: true, balances: []uint64{200 * cost}, checked: t0}
		out := computeFunding(fundingFS(), res, nil)
		if out.status.Assets != nil || out.status.AssetsSummary != "" || strings.Contains(out.condMessage, ";") {
			t.Errorf("assets %+v, message %q", out.status.Assets, out.condMessage)
		}
	})
}

// TestMergeTokens: a token read takes the new figures; one that failed
// keeps its last ones, with the error.
func TestMergeTokens(t *testing.T) {
	a := parseAsset(t, testnetSBTC)
	t1 := t0.Add(time.Minute)
	prev := []tokenResult{{ok: true, asset: a, balances: []uint64{1}, checked: t0}, {err: errors.New("old")}}
	got := mergeTokens(prev, []tokenReading{{err: errors.New("down")}, {asset: a, balances: []uint64{2}}}, t1)
	if !got[0].ok || got[0].balances[0] != 1 || !got[0].checked.Equal(t0) || got[0].err == nil || got[0].err.Error() != "down" {
		t.Errorf("failed token: %+v", got[0])
	}
	if !got[1].ok || got[1].balances[0] != 2 || !got[1].checked.Equal(t1) || got[1].err != nil {
		t.Errorf("read token: %+v", got[1])
	}
	if first := mergeTokens(nil, []tokenReading{{err: errors.New("down")}}, t1); first[0].ok || first[0].err == nil {
		t.Errorf("a first read that failed: %+v", first[0])
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestFundingMatchesTokens(t *testing.T) {
	_, target := twoTokens(t)
	keys := []faucetv1alpha1.KeyFunding{{Address: "ST1A"}}
	st := func(assets ...faucetv1alpha1.AssetFunding) *faucetv1alpha1.FundingStatus {
		return &faucetv1alpha1.FundingStatus{Keys: keys, Assets: assets}
	}
	const other = "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.sbtc-token::sbtc-token"
	fromPoX := []tokenTarget{{name: "sbtc", asset: stacks.AssetInfo{Name: "sbtc-token"}, fromPoX: true}}
	for name, tc := range map[string]struct {
		st     *faucetv1alpha1.FundingStatus
		tokens []tokenTarget
		btc    string
		want   bool
	}{
		"the same tokens":                           {st(faucetv1alpha1.AssetFunding{Name: "sbtc", AssetIdentifier: testnetSBTC}), target.tokens, "", true},
		"a token read with another identifier":      {st(faucetv1alpha1.AssetFunding{Name: "sbtc", AssetIdentifier: other}), target.tokens, "", false},
		"a token no longer in the spec":             {st(faucetv1alpha1.AssetFunding{Name: "sbtc", AssetIdentifier: testnetSBTC}), nil, "", false},
		"a token not read yet":                      {st(), target.tokens, "", true},
		"a token never read, its identifier absent": {st(faucetv1alpha1.AssetFunding{Name: "tusd"}), target.tokens, "", true},
		"sbtc from /v2/pox: any contract":           {st(faucetv1alpha1.AssetFunding{Name: "sbtc", AssetIdentifier: other}), fromPoX, "", true},
		"BTC at this address":                       {st(faucetv1alpha1.AssetFunding{Name: "btc", Address: btcAddr}), nil, btcAddr, true},
		"BTC at another address":                    {st(faucetv1alpha1.AssetFunding{Name: "btc", Address: btcAddr}), nil, btcAddr2, false},
		"BTC turned off":                            {st(faucetv1alpha1.AssetFunding{Name: "btc", Address: btcAddr}), nil, "", false},
	} {
		if got := fundingMatches(tc.st, []string{"ST1A"}, "", tc.tokens, tc.btc); got != tc.want {
			t.Errorf("%s: fundingMatches = %v, want %v", name, got, tc.want)
		}
	}
}

// TestComputeStatusFundingTokens: figures of another token, or of a token
// no longer in spec.assets, are not kept while the next read is pending.
func TestComputeStatusFundingTokens(t *testing.T) {
	fs, target := twoTokens(t)
	target.addresses = []string{"ST1A"}
	keys := secretState{addresses: []string{"ST1A"}}
	res := tokensResult(target, []uint64{200 * cost}, []uint64{2000}, []uint64{100})
	st := computeStatus(fs, observation{keys: keys, funding: &res, deployment: deployment(available)}, t0)
	c := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionFunded)
	if c == nil || c.Reason != faucetv1alpha1.ReasonLow || !strings.HasPrefix(c.Message, "sbtc: 2 drips left, below 100") {
		t.Fatalf("Funded %+v", c)
	}
	if a := assetFunding(st.Funding, "sbtc"); a == nil || *a.DripsLeft != 2 || st.Funding.AssetsSummary != "sbtc:2 tusd:10" {
		t.Fatalf("funding %s", mustJSON(st.Funding))
	}
	fs.Status = st

	t.Run("the same tokens keep the figures until the next read", func(t *testing.T) {
		got := computeStatus(fs, observation{keys: keys, deployment: deployment(available)}, t0)
		if assetFunding(got.Funding, "sbtc") == nil {
			t.Errorf("funding %+v", got.Funding)
		}
	})
	t.Run("another identifier drops them", func(t *testing.T) {
		other := fs.DeepCopy()
		other.Spec.Assets[0].Token.AssetIdentifier = "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.sbtc-token::sbtc-token"
		got := computeStatus(other, observation{keys: keys, deployment: deployment(available)}, t0)
		if got.Funding != nil || meta.FindStatusCondition(got.Conditions, faucetv1alpha1.ConditionFunded) != nil {
			t.Errorf("funding kept: %+v", got.Funding)
		}
	})
	t.Run("removing a token drops them", func(t *testing.T) {
		off := fs.DeepCopy()
		off.Spec.Assets = off.Spec.Assets[1:]
		got := computeStatus(off, observation{keys: keys, deployment: deployment(available)}, t0)
		if got.Funding != nil {
			t.Errorf("funding kept: %+v", got.Funding)
		}
	})
	t.Run("a failed first read of another token shows no old figures", func(t *testing.T) {
		other := fs.DeepCopy()
		other.Spec.Assets[0].Token.AssetIdentifier = "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.sbtc-token::sbtc-token"
		tokens, err := tokenTargets(other)
		if err != nil {
			t.Fatal(err)
		}
		failed := &fundingResult{target: fundingTarget{addresses: []string{"ST1A"}, tokens: tokens}, err: errors.New("down")}
		got := computeStatus(other, observation{keys: keys, funding: failed, deployment: deployment(available)}, t0)
		c := meta.FindStatusCondition(got.Conditions, faucetv1alpha1.ConditionFunded)
		if got.Funding != nil || c == nil || c.Status != metav1.ConditionUnknown {
			t.Errorf("funding %+v, Funded %+v", got.Funding, c)
		}
	})
}

// callReadCounter counts the call-read requests reaching a devnode and
// forwards every request unchanged: it lets a test see that no token was
// read without standing in for any of the node's answers.
type callReadCounter struct {
	next  http.Handler
	calls atomic.Int64
}

func (c *callReadCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v2/contracts/call-read/") {
		c.calls.Add(1)
	}
	c.next.ServeHTTP(w, r)
}

// TestFundingMonitorReadsTokens reads one target through the monitor's
// read against a devnode that deploys testnet sBTC and tUSD: every key's
// and the treasury's balance of each, as the node's token ledgers hold
// them, no token read without tokens, and a token the node does not have
// failing on its own, naming it and the node's answer.
func TestFundingMonitorReadsTokens(t *testing.T) {
	sbtc, tusd := parseAsset(t, testnetSBTC), parseAsset(t, testnetTUSD)
	keys := make([]*stacks.PrivateKey, 3)
	genesis := map[stacks.Address]uint64{}
	for i := range keys {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
		genesis[k.TestnetAddress()] = uint64(i+1) * cost
	}
	dn := devnode.New(devnode.Config{
		Genesis: genesis,
		Tokens: []devnode.TokenSpec{
			devnode.SBTCToken(sbtc, map[stacks.Address]uint64{keys[0].TestnetAddress(): 12_345, keys[2].TestnetAddress(): 1}),
			{Asset: tusd, Name: "Test USD", Symbol: "tUSD", Decimals: 6, Genesis: map[stacks.Address]uint64{keys[1].TestnetAddress(): 77}},
		},
	})
	counter := &callReadCounter{next: dn.Handler()}
	srv := httptest.NewServer(counter)
	defer srv.Close()
	addr := func(i int) string { return keys[i].TestnetAddress().String() }
	target := fundingTarget{nodeURLs: []string{srv.URL}, addresses: []string{addr(0), addr(1)}, treasury: addr(2),
		tokens: []tokenTarget{{name: "sbtc", asset: sbtc}, {name: "tusd", asset: tusd}}}
	m := &FundingMonitor{HTTPClient: srv.Client()}
	ctx := context.Background()

	// Several nodes: the first does not answer, the second is read.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	target.nodeURLs = []string{closed.URL, srv.URL}
	rd, err := m.read(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	if len(rd.nodes) != 2 || rd.nodes[0].out != "unreachable" || rd.nodes[1].out != "" || rd.nodes[1].url != srv.URL {
		t.Errorf("node probes %+v: want the closed one failed, the live one answered", rd.nodes)
	}
	if !slices.Equal(rd.balances, []uint64{cost, 2 * cost}) || rd.treasury != 3*cost {
		t.Errorf("STX balances %v, treasury %d", rd.balances, rd.treasury)
	}
	if len(rd.tokens) != 2 || rd.tokens[0].err != nil || rd.tokens[1].err != nil {
		t.Fatalf("tokens %+v", rd.tokens)
	}
	if r := rd.tokens[0]; !slices.Equal(r.balances, []uint64{12_345, 0}) || r.treasury != 1 || r.asset != sbtc {
		t.Errorf("sbtc %+v; want [12345 0], treasury 1", r)
	}
	if r := rd.tokens[1]; !slices.Equal(r.balances, []uint64{0, 77}) || r.treasury != 0 || r.asset != tusd {
		t.Errorf("tusd %+v; want [0 77], treasury 0", r)
	}
	if n := counter.calls.Load(); n != 6 {
		t.Errorf("%d call-reads, want one per token for each key and the treasury", n)
	}

	t.Run("a mint shows in the next read", func(t *testing.T) {
		dn.FundAsset(tusd, keys[0].TestnetAddress(), 700)
		rd, err := m.read(ctx, target)
		if err != nil || !slices.Equal(rd.tokens[1].balances, []uint64{700, 77}) {
			t.Errorf("tusd balances %+v, %v; want [700 77]", rd.tokens, err)
		}
	})
	t.Run("without tokens no token is read", func(t *testing.T) {
		before := counter.calls.Load()
		plain := target
		plain.tokens = nil
		rd, err := m.read(ctx, plain)
		if err != nil || len(rd.tokens) != 0 {
			t.Errorf("read %+v, %v", rd, err)
		}
		if n := counter.calls.Load() - before; n != 0 {
			t.Errorf("%d call-reads without tokens", n)
		}
	})
	t.Run("a token the node does not have fails on its own, naming it, the key and the node's answer", func(t *testing.T) {
		const otherID = "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.sbtc-token::sbtc-token"
		other := parseAsset(t, otherID)
		missing := target
		missing.tokens = []tokenTarget{{name: "sbtc", asset: other}, {name: "tusd", asset: tusd}}
		rd, err := m.read(ctx, missing)
		if err != nil || rd.tokens[1].err != nil || !slices.Equal(rd.tokens[1].balances, []uint64{700, 77}) {
			t.Fatalf("read %+v, %v: the STX balances and tusd read all the same", rd, err)
		}
		err = rd.tokens[0].err
		if err == nil || !strings.Contains(err.Error(), otherID+" balance of "+addr(0)) || !tokenRefused(err) {
			t.Errorf("err %v", err)
		}
		var ro *node.ReadOnlyError
		if !errors.As(err, &ro) || !strings.Contains(ro.Cause, `NoSuchContract("`+other.Contract.String()+`")`) {
			t.Errorf("err %v, want the node's okay:false NoSuchContract", err)
		}
	})
}

// TestFundingMonitorReadsSBTCFromPoX: sbtc without an identifier reads the
// contract the node names in /v2/pox (pox_5_sbtc_contract), else, from a
// node that names none, the testnet default (settings.SBTCTestnet), the
// faucet's rule; a default the node does not have leaves sbtc unknown,
// and says why, without failing the read.
func TestFundingMonitorReadsSBTCFromPoX(t *testing.T) {
	sbtc := parseAsset(t, testnetSBTC)
	if sbtc.String() != settings.SBTCTestnet {
		t.Fatalf("testnetSBTC %s is not the default %s", sbtc, settings.SBTCTestnet)
	}
	other := parseAsset(t, "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.my-sbtc::sbtc-token")
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	a := key.TestnetAddress()
	fs := fundingFS()
	withAssets(faucetv1alpha1.AssetSpec{Name: "sbtc", Token: &faucetv1alpha1.TokenSpec{Amount: 100}})(fs)
	tokens, err := tokenTargets(fs)
	if err != nil || len(tokens) != 1 || !tokens[0].fromPoX || tokens[0].asset != (stacks.AssetInfo{Name: "sbtc-token"}) {
		t.Fatalf("targets %+v, %v", tokens, err)
	}
	read := func(cfg devnode.Config) (reading, error) {
		t.Helper()
		srv := httptest.NewServer(devnode.New(cfg).Handler())
		defer srv.Close()
		m := &FundingMonitor{HTTPClient: srv.Client()}
		return m.read(context.Background(), fundingTarget{nodeURLs: []string{srv.URL}, addresses: []string{a.String()}, tokens: tokens})
	}
	cfg := devnode.Config{
		Genesis: map[stacks.Address]uint64{a: 200 * cost},
		Tokens: []devnode.TokenSpec{devnode.SBTCToken(sbtc, map[stacks.Address]uint64{a: 4321}),
			devnode.SBTCToken(other, map[stacks.Address]uint64{a: 1234})},
	}
	judge := func(t *testing.T, rd reading) fundingOutcome {
		t.Helper()
		res := fundingResult{target: fundingTarget{nodeURLs: []string{"http://node:20443"}, addresses: []string{a.String()}, tokens: tokens}, ok: true,
			balances: rd.balances, tokens: mergeTokens(nil, rd.tokens, t0), checked: t0}
		return computeFunding(fs, res, nil)
	}

	t.Run("an Epoch 4.0 node names the contract: it, not the default", func(t *testing.T) {
		withPoX := cfg
		withPoX.PoXSBTCContract = other.Contract
		rd, err := read(withPoX)
		if err != nil || rd.tokens[0].err != nil || rd.tokens[0].asset != other || !slices.Equal(rd.tokens[0].balances, []uint64{1234}) {
			t.Fatalf("read %+v, %v", rd, err)
		}
		if f := assetFunding(judge(t, rd).status, "sbtc"); f == nil || f.AssetIdentifier != other.String() || *f.DripsLeft != 12 {
			t.Errorf("status %+v", f)
		}
	})
	t.Run("a node before Epoch 4.0 names none: the testnet default", func(t *testing.T) {
		rd, err := read(cfg)
		if err != nil || rd.tokens[0].err != nil || rd.tokens[0].asset != sbtc || !slices.Equal(rd.tokens[0].balances, []uint64{4321}) {
			t.Fatalf("read %+v, %v", rd, err)
		}
		if f := assetFunding(judge(t, rd).status, "sbtc"); f == nil || f.AssetIdentifier != testnetSBTC || *f.DripsLeft != 43 {
			t.Errorf("status %+v", f)
		}
	})
	t.Run("a node that names none and lacks the default: sbtc unknown, the rest read", func(t *testing.T) {
		without := cfg
		without.Tokens = cfg.Tokens[1:]
		rd, err := read(without)
		if err != nil || rd.balances[0] != 200*cost || !tokenRefused(rd.tokens[0].err) {
			t.Fatalf("read %+v, %v", rd, err)
		}
		out := judge(t, rd)
		f := assetFunding(out.status, "sbtc")
		if f == nil || f.AssetIdentifier != "" || f.DripsLeft != nil || !strings.Contains(f.Message, sbtc.Contract.String()) || out.status.AssetsSummary != "sbtc:?" {
			t.Errorf("status %s", mustJSON(out.status))
		}
		if out.condStatus != metav1.ConditionUnknown || out.condReason != faucetv1alpha1.ReasonAssetUnreadable ||
			!strings.HasPrefix(out.condMessage, "sbtc: cannot read its balances from the node http://node:20443: "+testnetSBTC+" balance of "+a.String()) {
			t.Errorf("Funded %s %s %q", out.condStatus, out.condReason, out.condMessage)
		}
	})
}

// TestTokenTargets: the operator parses each asset identifier as the
// faucet will, so a typo the CRD's pattern lets through (a bad checksum) is
// reported, naming the entry, instead of crash-looping the pod.
func TestTokenTargets(t *testing.T) {
	if tokens, err := tokenTargets(fundingFS()); err != nil || tokens != nil {
		t.Errorf("without tokens: %v, %v", tokens, err)
	}
	fs, want := twoTokens(t)
	withBTC(btcSpec(false))(fs)
	if tokens, err := tokenTargets(fs); err != nil || !slices.Equal(tokens, want.tokens) || tokens[0].asset.Name != "sbtc-token" {
		t.Errorf("sbtc and tusd: %+v, %v", tokens, err)
	}
	fs.Spec.Assets[1].Token.AssetIdentifier = strings.Replace(testnetTUSD, "K9AG.", "K9AH.", 1)
	_, err := tokenTargets(fs)
	if err == nil || !errors.Is(err, stacks.ErrBadAssetID) || !strings.HasPrefix(err.Error(), "spec.assets[name=tusd].token.assetIdentifier: ") {
		t.Errorf("a typo in the address: %v", err)
	}
}

// status.nodes: each node in order, in rotation (reachable) or why not,
// its tip and lag behind the best; the summary counts those in rotation.
func TestNodesStatusOf(t *testing.T) {
	nodes := []nodeReading{
		{url: "http://user:secret@miner:20443", tip: 120},
		{url: "http://follower:20443", tip: 117},
		{url: "http://gone:20443", out: "unreachable"},
		{url: "http://stale:20443", tip: 100, out: "20 blocks behind the best tip"},
	}
	got, summary := nodesStatusOf(nodes)
	if summary != "2/4" || len(got) != 4 {
		t.Fatalf("summary %q, %d nodes", summary, len(got))
	}
	if g := got[0]; g.URL != "http://miner:20443" || !g.Reachable || *g.TipHeight != 120 || *g.LagBlocks != 0 {
		t.Errorf("miner %+v: want no credentials, tip 120, lag 0", g)
	}
	if g := got[1]; !g.Reachable || *g.TipHeight != 117 || *g.LagBlocks != 3 {
		t.Errorf("follower %+v: want tip 117, lag 3", g)
	}
	if g := got[2]; g.Reachable || g.TipHeight != nil || g.Message != "unreachable" {
		t.Errorf("gone %+v", g)
	}
	// Out of rotation, its tip does not count as the best.
	if g := got[3]; g.Reachable || g.TipHeight != nil || g.LagBlocks != nil || g.Message != "20 blocks behind the best tip" {
		t.Errorf("stale %+v", g)
	}
	if got, summary := nodesStatusOf(nil); got != nil || summary != "" {
		t.Errorf("no probe yet: %v %q", got, summary)
	}
}
