package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stxfaucet/faucet-operator/hack/oidcprovider"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
)

// BenchmarkDrain is the attack a public faucet dies of, against the
// in-process devnet (devnode, engine with serve's defaults, one trusted
// proxy hop): a farm of 10,000 client IPs asking for STX at full speed,
// 32 at a time, each drip to a fresh address, while 5 signed-in people
// (tokens from a real OpenID provider) each ask once a second from their
// own IP. Each run lasts a fixed time, whatever b.N:
//
//   - before: today's defaults as they were, per-address and per-IP limits
//     and nothing else;
//   - after/per=24h: the new defaults, a budget of 2,000 drips a day of
//     which anonymous drips may take half, and sign-in;
//   - after/per=10s: a budget of 480 drips per 10 s, to watch several
//     periods go by.
//
// It reports what the farm took per budget period against the budget and
// its anonymous share, the projection per hour, and the signed-in people's
// answers (all must be 200, each paying the tier's amount).
func BenchmarkDrain(b *testing.B) {
	day := guard.Budget{Amount: guard.DefaultBudgetDrips * faucet.DefaultAmount, Per: 24 * time.Hour}
	// The people ask for 5 × 1,000 STX a second, 50,000 per 10 s: the
	// short budget leaves them that beside the anonymous half and above
	// the quarter below which everyone's drips scale down.
	short := guard.Budget{Amount: 480 * faucet.DefaultAmount, Per: 10 * time.Second}
	for _, c := range []struct {
		name   string
		budget guard.Budget
		run    time.Duration
	}{
		{"before", guard.Budget{}, 10 * time.Second},
		{"after/per=24h", day, 10 * time.Second},
		{"after/per=10s", short, 30 * time.Second},
	} {
		b.Run(c.name, func(b *testing.B) { runDrain(b, c.budget, c.run) })
	}
}

const (
	drainFarmIPs  = 10_000
	drainFarmConc = 32
	drainPeople   = 5
)

func runDrain(b *testing.B, budget guard.Budget, run time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signIn := budget.On() // the new defaults come with sign-in
	srvURL, people := drainFaucet(ctx, b, budget, signIn)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: drainFarmConc + drainPeople}, Timeout: 30 * time.Second}

	var farmPaid, farmOK, farmRefused atomic.Uint64
	var mu sync.Mutex
	perPeriod := map[int64]uint64{} // the farm's µSTX by budget period since the start
	var people200, peopleOther atomic.Uint64
	var peopleWrong atomic.Uint64 // 200 with another amount than the tier's
	start := time.Now()
	deadline := start.Add(run)
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range drainFarmConc {
		wg.Go(func() {
			for i := w; time.Now().Before(deadline); i += drainFarmConc {
				ip := fmt.Sprintf("10.%d.%d.%d", 100+i%drainFarmIPs/65536, i%drainFarmIPs/256%256, i%256)
				code, amt := drainDrip(hc, srvURL, randomAddress(), ip, "")
				switch code {
				case http.StatusOK:
					farmOK.Add(1)
					farmPaid.Add(amt)
					if budget.On() {
						mu.Lock()
						perPeriod[int64(time.Since(start)/budget.Per)] += amt
						mu.Unlock()
					}
				default:
					farmRefused.Add(1)
				}
			}
		})
	}
	for p, tok := range people {
		wg.Go(func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for time.Now().Before(deadline) {
				code, amt := drainDrip(hc, srvURL, randomAddress(), fmt.Sprintf("192.0.2.%d", 10+p), tok)
				switch {
				case code == http.StatusOK && amt == 2*faucet.DefaultAmount:
					people200.Add(1)
				case code == http.StatusOK:
					peopleWrong.Add(1)
				default:
					peopleOther.Add(1)
				}
				<-tick.C
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()

	stx := func(ustx uint64) float64 { return float64(ustx) / 1e6 }
	b.ReportMetric(float64(farmOK.Load())/elapsed.Seconds(), "farm-drips/s")
	b.ReportMetric(float64(farmRefused.Load())/elapsed.Seconds(), "farm-refused/s")
	b.ReportMetric(stx(farmPaid.Load()), "farm-STX")
	if budget.On() {
		// A window holds at most the anonymous share, and whatever the
		// run's length, an hour holds at most one window's share (per ≥
		// 1h) or hour/per of them.
		share := budget.Amount / 2
		windows := max(1, float64(time.Hour)/float64(budget.Per))
		b.ReportMetric(stx(budget.Amount), "budget-STX/period")
		b.ReportMetric(stx(share), "anon-share-STX/period")
		var worst uint64
		for _, v := range perPeriod {
			worst = max(worst, v)
		}
		b.ReportMetric(stx(worst), "farm-max-STX/period")
		b.ReportMetric(stx(share)*windows, "farm-bound-STX/h")
		if worst > share+faucet.DefaultAmount {
			b.Errorf("the farm took %d µSTX in one period, past the anonymous share %d plus one drip", worst, share)
		}
		b.Logf("farm per %s period: %v µSTX (budget %d, anonymous share %d)", budget.Per, perPeriod, budget.Amount, share)
	} else {
		b.ReportMetric(stx(farmPaid.Load())/elapsed.Hours(), "farm-STX/h")
	}
	if signIn {
		b.ReportMetric(float64(people200.Load()), "signed-in-200")
		b.ReportMetric(float64(peopleOther.Load()+peopleWrong.Load()), "signed-in-errors")
		if peopleOther.Load()+peopleWrong.Load() > 0 {
			b.Errorf("signed-in people: %d answered 200 with the tier's amount, %d refused, %d paid another amount",
				people200.Load(), peopleOther.Load(), peopleWrong.Load())
		}
	}
	b.ReportMetric(0, "ns/op")
}

// drainFaucet serves the devnet faucet under attack and returns its URL
// and, with sign-in, the people's ID tokens.
func drainFaucet(ctx context.Context, b *testing.B, budget guard.Budget, signIn bool) (string, []string) {
	keys := make([]*stacks.PrivateKey, benchKeys)
	genesis := map[stacks.Address]uint64{}
	for i := range keys {
		keys[i] = newKey(b)
		genesis[keys[i].TestnetAddress()] = 1 << 62
	}
	dn := devnode.New(devnode.Config{Genesis: genesis, Seed: 1, SendManyContract: stacks.SendManyMemoTestnet})
	nodeSrv := httptest.NewServer(dn.Handler())
	b.Cleanup(nodeSrv.Close)
	client, err := node.New(nodeSrv.URL)
	if err != nil {
		b.Fatal(err)
	}
	f, err := faucet.New(faucet.Config{Keys: keys, Node: client, Timing: faucet.Timing{BusyWait: faucet.DefaultBusyWait},
		Batching: faucet.Batching{Max: faucet.DefaultBatchMax}})
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	go func() { _ = f.Run(ctx) }()
	go mineEvery(ctx, dn, benchBlockTime)
	limits := guard.DefaultLimits()
	limits.Budgets = map[string]guard.Budget{"stx": budget}
	tiers := &identity.Tiers{Anonymous: identity.Tier{Name: identity.AnonymousName}}
	cfg := Config{Faucet: f, Node: client, TrustedProxyHops: 1, Tiers: tiers,
		Limits: guard.NewRateLimits(limits, nil, nil), Metrics: NewMetrics(prometheus.NewRegistry())}
	var tokens []string
	if signIn {
		tiers.Anonymous.BudgetSharePercent = 50
		signedIn := identity.DefaultSignedIn()
		signedIn.Limit = guard.Limit{Requests: 3600, Window: time.Hour} // one a second is within it
		tiers.SignedIn = []identity.Tier{signedIn}
		var p *oidcprovider.Provider
		p, tokens = drainPeopleTokens(b)
		svc, err := identity.New(identity.Config{Issuer: p.Issuer(), ClientID: testClientID, ClientSecret: testClientSecret,
			SessionKey: []byte("the drain benchmark's session key")})
		if err != nil {
			b.Fatal(err)
		}
		cfg.SignIn = svc
	}
	srv := httptest.NewServer(New(cfg))
	b.Cleanup(srv.Close)
	return srv.URL, tokens
}

// drainPeopleTokens starts a real provider with drainPeople verified
// people and signs each in.
func drainPeopleTokens(b *testing.B) (*oidcprovider.Provider, []string) {
	var users []oidcprovider.User
	for i := range drainPeople {
		users = append(users, oidcprovider.User{ID: "dev" + strconv.Itoa(i), Username: "dev" + strconv.Itoa(i), Password: "pass",
			Email: "dev" + strconv.Itoa(i) + "@example.com", EmailVerified: true})
	}
	p, err := oidcprovider.Start(oidcprovider.Config{Users: users, Clients: []oidcprovider.Client{
		{ID: testClientID, Secret: testClientSecret, RedirectURIs: []string{testRedirect}, IDTokenLifetime: 2 * time.Hour}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	var out []string
	for _, u := range users {
		tok, err := p.Login(context.Background(), testClientID, testClientSecret, testRedirect, u.Username, u.Password, nil)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, tok.IDToken)
	}
	return p, out
}

// drainDrip asks for a v3 STX drip from ip, with a bearer token when tok
// is set, and returns the status and the µSTX paid.
func drainDrip(hc *http.Client, base, address, ip, tok string) (int, uint64) {
	req, _ := http.NewRequest(http.MethodPost, base+"/extended/v3/faucets/stx", strings.NewReader(`{"address":"`+address+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", ip)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, 0
	}
	var v struct {
		Amount map[string]string `json:"amount"`
	}
	_ = json.Unmarshal(body, &v)
	amt, err := strconv.ParseUint(v.Amount["stx"], 10, 64)
	if err != nil {
		return resp.StatusCode, math.MaxUint64
	}
	return resp.StatusCode, amt
}

// randomAddress is a fresh ST… address: a farm needs no keys.
func randomAddress() string {
	a := stacks.Address{Version: stacks.AddressVersionTestnetSingleSig}
	_, _ = rand.Read(a.Hash160[:])
	return a.String()
}
