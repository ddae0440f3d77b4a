package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

// btcSpec is the btc entry's settings on regtest against bitcoind:18443, with the
// key in Secret faucet-btc and, when creds, credentials in faucet-btc-rpc.
func btcSpec(creds bool) *faucetv1alpha1.BTCSpec {
	b := &faucetv1alpha1.BTCSpec{
		RPC:          faucetv1alpha1.BTCRPCSpec{URL: "http://bitcoind.bitcoin.svc:18443"},
		KeySecretRef: faucetv1alpha1.BTCKeySecretReference{Name: "faucet-btc"},
	}
	if creds {
		b.RPC.CredentialsSecretRef = &faucetv1alpha1.BTCCredentialsSecretReference{Name: "faucet-btc-rpc"}
	}
	return b
}

// btcAsset is the btc entry of spec.assets with b.
func btcAsset(b *faucetv1alpha1.BTCSpec) faucetv1alpha1.AssetSpec {
	return faucetv1alpha1.AssetSpec{Name: "btc", BTC: b}
}

// withBTC appends the btc entry with b to spec.assets.
func withBTC(b *faucetv1alpha1.BTCSpec) func(*faucetv1alpha1.FaucetServer) {
	return withAssets(btcAsset(b))
}

// assetFunding is the entry of status.funding.assets named name; nil if
// there is none.
func assetFunding(st *faucetv1alpha1.FundingStatus, name string) *faucetv1alpha1.AssetFunding {
	if st == nil {
		return nil
	}
	for i := range st.Assets {
		if st.Assets[i].Name == name {
			return &st.Assets[i]
		}
	}
	return nil
}

// TestBTCArgsAndMounts: the btc entry of spec.assets becomes the `faucet serve --btc-…`
// flags, with the key and the credentials as read-only files of their
// Secrets, never as values.
func TestBTCArgsAndMounts(t *testing.T) {
	every := btcSpec(true)
	every.Network = "signet"
	every.RPC.CredentialsSecretRef.Key = "cookie"
	every.KeySecretRef.Key = "wif.txt"
	every.Amounts = &faucetv1alpha1.BTCAmounts{Default: ptr.To(int64(20_000)), Large: ptr.To(int64(2_000_000)), XLarge: ptr.To(int64(60_000_000))}
	every.StartHeight = ptr.To(int64(250_000))
	every.Fees = &faucetv1alpha1.BTCFees{FallbackRate: ptr.To(int64(3)), MinRate: ptr.To(int64(2)), MaxRate: ptr.To(int64(50))}
	everyLimits := &faucetv1alpha1.AssetRateLimits{
		PerAddress: &faucetv1alpha1.RateLimit{Requests: 2, Window: duration(time.Hour)},
		PerIP:      &faucetv1alpha1.RateLimit{Requests: 10, Window: duration(10 * time.Minute)},
	}
	tests := map[string]struct {
		btc  faucetv1alpha1.AssetSpec
		want []string
	}{
		"minimal: the network defaults to regtest, serve's default (no flag), no credentials": {
			btc: btcAsset(btcSpec(false)),
			want: []string{
				"--btc-rpc-url=http://bitcoind.bitcoin.svc:18443",
				"--btc-key-file=/etc/faucet/btc-key/key",
			},
		},
		"several nodes are one --btc-rpc-url list, in order": {
			btc: btcAsset(&faucetv1alpha1.BTCSpec{
				RPC:          faucetv1alpha1.BTCRPCSpec{URLs: []string{"http://bitcoind-0.bitcoind:18443", "https://btc.example.com/rpc"}},
				KeySecretRef: faucetv1alpha1.BTCKeySecretReference{Name: "faucet-btc"},
			}),
			want: []string{
				"--btc-rpc-url=http://bitcoind-0.bitcoind:18443,https://btc.example.com/rpc",
				"--btc-key-file=/etc/faucet/btc-key/key",
			},
		},
		"every field, the entry's rate limits included": {
			btc: faucetv1alpha1.AssetSpec{Name: "btc", BTC: every, RateLimits: everyLimits},
			want: []string{
				"--btc-rpc-url=http://bitcoind.bitcoin.svc:18443",
				"--btc-rpc-credentials-file=/etc/faucet/btc-rpc/cookie",
				"--btc-key-file=/etc/faucet/btc-key/wif.txt",
				"--btc-network=signet",
				"--btc-amount=20000", "--btc-large-amount=2000000", "--btc-xlarge-amount=60000000",
				"--btc-fee-rate=3", "--btc-min-fee-rate=2", "--btc-max-fee-rate=50",
				"--btc-start-height=250000",
				"--btc-limit-address=2/1h0m0s", "--btc-limit-ip=10/10m0s",
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture(withAssets(tt.btc))
			d := deploymentFor(fs, "img", secretDigests{keys: "k", btcKey: "b", btcCredentials: "c"})
			pod := d.Spec.Template.Spec
			var got []string
			for _, a := range pod.Containers[0].Args {
				if strings.HasPrefix(a, "--btc-") {
					got = append(got, a)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("BTC flags\n %q\nwant\n %q", got, tt.want)
			}
			checkArgsParseBack(t, fs)
			// Each file flag names a file its Secret volume projects, on a
			// read-only mount, readable by the faucet's group only.
			for _, a := range got {
				name, file, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !strings.HasSuffix(name, "-file") {
					continue
				}
				ok := false
				for _, m := range pod.Containers[0].VolumeMounts {
					rel, under := strings.CutPrefix(file, m.MountPath+"/")
					if !under {
						continue
					}
					i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
					v := pod.Volumes[i].Secret
					ok = m.ReadOnly && m.SubPath == "" && v != nil && *v.DefaultMode == 0o440 &&
						len(v.Items) == 1 && v.Items[0].Path == rel
				}
				if !ok {
					t.Errorf("%s: %s is not a read-only file of a Secret volume: mounts %+v volumes %+v", name, file, pod.Containers[0].VolumeMounts, pod.Volumes)
				}
			}
			secrets := map[string]string{}
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					secrets[v.Name] = v.Secret.SecretName + "/" + v.Secret.Items[0].Key
				}
			}
			if secrets["btc-key"] != "faucet-btc/"+fs.BTCKeySecretKey().Key {
				t.Errorf("BTC key volume %q", secrets["btc-key"])
			}
			if wantCreds := tt.btc.BTC.RPC.CredentialsSecretRef != nil; wantCreds != (secrets["btc-rpc-credentials"] != "") {
				t.Errorf("credentials volume %q, want one: %v", secrets["btc-rpc-credentials"], wantCreds)
			}
			if len(pod.Containers[0].Env) != 0 {
				t.Errorf("env %+v: the BTC settings are flags and files", pod.Containers[0].Env)
			}
		})
	}
}

// TestBTCRollsThePod: the BTC key and credentials are in the config hash,
// like the STX keys, and a FaucetServer without BTC keeps its hash.
func TestBTCRollsThePod(t *testing.T) {
	fs := fixture(withBTC(btcSpec(true)))
	hash := func(fs *faucetv1alpha1.FaucetServer, d secretDigests) string {
		return deploymentFor(fs, "img", d).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	base := secretDigests{keys: "k", btcKey: "b1", btcCredentials: "c1"}
	rotatedKey, rotatedCreds := base, base
	rotatedKey.btcKey, rotatedCreds.btcCredentials = "b2", "c2"
	if hash(fs, base) == hash(fs, rotatedKey) || hash(fs, base) == hash(fs, rotatedCreds) {
		t.Error("rotating the BTC key or credentials keeps the config hash")
	}
	plain := fixture()
	if hash(plain, secretDigests{keys: "k"}) != configHash("img", serverArgs(plain), secretDigests{keys: "k"}) {
		t.Error("a FaucetServer without BTC hashes differently")
	}
	if hash(plain, secretDigests{keys: "k"}) == hash(fixture(withBTC(btcSpec(false))), secretDigests{keys: "k", btcKey: "b1"}) {
		t.Error("turning BTC on keeps the config hash")
	}
	for _, a := range deploymentFor(plain, "img", secretDigests{keys: "k"}).Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--btc") {
			t.Errorf("flag %s without a btc entry in spec.assets", a)
		}
	}
	if got := secretNames(fs); !slices.Contains(got, "faucet-btc") || !slices.Contains(got, "faucet-btc-rpc") {
		t.Errorf("secretNames %v lack the BTC Secrets, which the controller must watch", got)
	}
}

// TestBTCAddress: the key file is checked as the faucet reads it, and
// yields the key's P2WPKH address on the spec's network; no error quotes
// the key.
func TestBTCAddress(t *testing.T) {
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	signet, err := bitcoin.ParsePrivateKey(key.WIF(), bitcoin.Signet)
	if err != nil {
		t.Fatal(err)
	}
	regtestAddr, signetAddr := key.Address().String(), signet.Address().String()
	on := func(network string) *faucetv1alpha1.FaucetServer {
		b := btcSpec(false)
		b.Network = network
		return fixture(withBTC(b))
	}
	mainnetWIF := "KwDiBf89QgGbjEhKnhXJuH7LrciVrZi3qYjgd9M7rFU73sVHnoWn" // the key 1, on mainnet
	for _, tc := range []struct {
		name, network, data string
		want                string // the address, or an error substring after "!"
	}{
		{"WIF", "regtest", key.WIF(), regtestAddr},
		{"hex, network defaulted", "", key.Hex(), regtestAddr},
		{"signet", "signet", key.WIF(), signetAddr},
		{"blank lines, then key and address", "regtest", "\n  \n" + key.WIF() + " " + regtestAddr + "\n# more\n", regtestAddr},
		{"a CRLF file", "regtest", key.WIF() + "\r\n", regtestAddr},
		{"the address of another network", "signet", key.WIF() + " " + regtestAddr, "!is not the key's signet address " + signetAddr},
		{"empty", "regtest", "\n\n", "!no private key"},
		{"three fields", "regtest", key.WIF() + " " + regtestAddr + " extra", "!found 3 fields"},
		{"a mainnet key", "regtest", mainnetWIF, "!mainnet"},
		{"not a key", "regtest", "c" + strings.Repeat("x", 51), "!bad bitcoin private key"},
		{"hex out of range", "regtest", strings.Repeat("f", 64), "!not in the range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs, err := btcAddress(on(tc.network), []byte(tc.data))
			if want, isErr := strings.CutPrefix(tc.want, "!"); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err %v, want one containing %q", err, want)
				}
				for _, secret := range []string{key.WIF(), key.Hex(), mainnetWIF, strings.Repeat("f", 64)} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("the error %q quotes the key", err)
					}
				}
				return
			}
			if err != nil || !slices.Equal(addrs, []string{tc.want}) {
				t.Fatalf("addresses %v, %v; want [%s]", addrs, err, tc.want)
			}
		})
	}
}

func TestRPCCredentials(t *testing.T) {
	for data, want := range map[string][2]string{
		"faucet:s3cret\n":          {"faucet", "s3cret"},
		"__cookie__:ab:cd\r\nnext": {"__cookie__", "ab:cd"},
		"faucet:":                  {"faucet", ""},
		":nouser":                  {},
		"no colon":                 {},
		"":                         {},
	} {
		got := parseRPCCredentials([]byte(data))
		if u, p := got.get(); u != want[0] || p != want[1] {
			t.Errorf("%q: %q:%q, want %q", data, u, p, want)
		}
		if want[0] != "" && got != newRPCCredentials(want[0], want[1]) {
			t.Errorf("%q: equal credentials compare unequal", data)
		}
		_, err := checkRPCCredentials(nil, []byte(data))
		if (err == nil) != (want[0] != "") {
			t.Errorf("%q: check %v", data, err)
		}
		if err != nil && (strings.Contains(err.Error(), "nouser") || strings.Contains(err.Error(), "colon")) {
			t.Errorf("%q: the error %q quotes the data", data, err)
		}
	}
	// Printed, logged or marshalled by accident, they stay hidden.
	c := newRPCCredentials("faucet", "s3cret-pass")
	st := secretState{credentials: c}
	target := fundingTarget{btc: btcTarget{credentials: c}}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", st, st, st, c), fmt.Sprintf("%+v %#v", target, target)} {
		if strings.Contains(s, "s3cret") || strings.Contains(s, "faucet:") {
			t.Errorf("credentials in %q", s)
		}
	}
}

func TestBTCDripCost(t *testing.T) {
	b := btcSpec(false)
	if got := btcDripCost(b); got != faucetv1alpha1.DefaultBTCAmount {
		t.Errorf("default: %d", got)
	}
	b.Amounts = &faucetv1alpha1.BTCAmounts{Default: ptr.To(int64(25_000))}
	if got := btcDripCost(b); got != 25_000 {
		t.Errorf("25000: %d", got)
	}
}

const (
	btcAddr  = "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"
	btcAddr2 = "bcrt1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qzf4jry"
)

func TestComputeFundingBTC(t *testing.T) {
	btc := btcTarget{rpcURLs: []string{"http://bitcoind:18443"}, network: "regtest", address: btcAddr}
	target := fundingTarget{nodeURLs: []string{"http://node:20443"}, addresses: []string{"ST1A"}, btc: btc}
	fs := fundingFS()
	withBTC(btcSpec(true))(fs)
	result := func(stx, sats uint64, btcErr error) fundingResult {
		r := fundingResult{target: target, ok: true, balances: []uint64{stx}, checked: t0, btcErr: btcErr}
		if btcErr == nil {
			r.btcOK, r.btc, r.btcChecked = true, sats, t0.Add(time.Second)
		}
		return r
	}
	drip := uint64(faucetv1alpha1.DefaultBTCAmount)
	tests := map[string]struct {
		res        fundingResult
		wantStatus metav1.ConditionStatus
		wantReason string
		wantPrefix string
	}{
		"both funded": {
			res:        result(200*cost, 150*drip+9, nil),
			wantStatus: metav1.ConditionTrue, wantReason: faucetv1alpha1.ReasonFunded,
			wantPrefix: "100000.2 STX on 1 key(s): 200 drip(s) of 500.001 STX (amount plus fee fallback) left; btc: 150 drips left (1500009 sats at " + btcAddr + " on regtest, 10000 sats per drip)",
		},
		"BTC low": {
			res:        result(200*cost, 99*drip, nil),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonLow,
			wantPrefix: "btc: 99 drips left, below 100 (990000 sats at " + btcAddr + " on regtest, 10000 sats per drip); 100000.2 STX",
		},
		"BTC empty": {
			res:        result(200*cost, drip-1, nil),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonEmpty,
			wantPrefix: "btc: 0 drips left (9999 sats at " + btcAddr + " on regtest, 10000 sats per drip): send test BTC to " + btcAddr + "; ",
		},
		"the Bitcoin node down": {
			res:        result(200*cost, 0, fmt.Errorf("BTC balance of %s: %w", btcAddr, &btcnode.TransportError{Client: "btcnode", Call: "scantxoutset", Err: errors.New("connection refused")})),
			wantStatus: metav1.ConditionUnknown, wantReason: faucetv1alpha1.ReasonNodeUnreachable,
			wantPrefix: "btc: cannot read the BTC balance from the Bitcoin node http://bitcoind:18443: BTC balance of " + btcAddr + ": btcnode scantxoutset: connection refused; 100000.2 STX",
		},
		"btcd without an address index": {
			res:        result(200*cost, 0, fmt.Errorf("BTC balance of %s: %w", btcAddr, btcnode.ErrNoAddressIndex)),
			wantStatus: metav1.ConditionUnknown, wantReason: faucetv1alpha1.ReasonAssetUnreadable,
			wantPrefix: "btc: cannot read the BTC balance from the Bitcoin node http://bitcoind:18443: BTC balance of " + btcAddr + ": the node cannot look up an address's balance: run btcd with --addrindex",
		},
		"an empty STX beats an unreadable BTC: what is known to be wrong leads": {
			res:        result(cost-1, 0, errors.New("down")),
			wantStatus: metav1.ConditionFalse, wantReason: faucetv1alpha1.ReasonEmpty,
			wantPrefix: "500.000999 STX on 1 key(s): 0 drip(s) of 500.001 STX (amount plus fee fallback) left: no key can pay one drip; fund ST1A; btc: cannot read",
		},
		"the Stacks node down comes first": {
			res:        fundingResult{target: target, err: errors.New("connection refused"), btcErr: errors.New("also down")},
			wantStatus: metav1.ConditionUnknown, wantReason: faucetv1alpha1.ReasonNodeUnreachable,
			wantPrefix: "cannot read the balances from the node http://node:20443: connection refused",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			out := computeFunding(fs, tt.res, nil)
			if out.condStatus != tt.wantStatus || out.condReason != tt.wantReason || !strings.HasPrefix(out.condMessage, tt.wantPrefix) {
				t.Errorf("Funded %s/%s %q\nwant %s/%s %q…", out.condStatus, out.condReason, out.condMessage, tt.wantStatus, tt.wantReason, tt.wantPrefix)
			}
		})
	}

	t.Run("the status block", func(t *testing.T) {
		st := computeFunding(fs, result(200*cost, 150*drip+9, nil), nil).status
		want := []faucetv1alpha1.AssetFunding{{
			Name: "btc", Network: "regtest", Address: btcAddr, Balance: ptr.To(int64(150*drip + 9)), DripsLeft: ptr.To(int64(150)),
			LastChecked: ptr.To(metav1.NewTime(t0.Add(time.Second).Truncate(time.Second))),
		}}
		if !equality.Semantic.DeepEqual(st.Assets, want) {
			t.Errorf("status.funding.assets\n %s\nwant\n %s", mustJSON(st.Assets), mustJSON(want))
		}
		if st.AssetsSummary != "btc:150" || st.DripsLeft != 200 {
			t.Errorf("funding %+v", st)
		}
	})
	t.Run("a failed BTC read keeps the STX figures fresh and the last BTC figures", func(t *testing.T) {
		res := result(100*cost, 0, errors.New("down"))
		res.btcOK, res.btc, res.btcChecked = true, 7*drip, t0 // an earlier read
		st := computeFunding(fs, res, nil).status
		b := assetFunding(st, "btc")
		if st.DripsLeft != 100 || b == nil || *b.DripsLeft != 7 || b.Message != "down" || st.AssetsSummary != "btc:7" {
			t.Errorf("funding %s", mustJSON(st))
		}
	})
	t.Run("before the first BTC read the address is there to fund, its figures unknown", func(t *testing.T) {
		st := computeFunding(fs, result(100*cost, 0, errors.New("down")), nil).status
		b := assetFunding(st, "btc")
		if b == nil || b.Address != btcAddr || b.Network != "regtest" || b.Balance != nil || b.DripsLeft != nil || st.AssetsSummary != "btc:?" {
			t.Errorf("funding %s", mustJSON(st))
		}
	})
	t.Run("without a btc entry there is no BTC block", func(t *testing.T) {
		out := computeFunding(fundingFS(), result(200*cost, drip, nil), nil)
		if out.status.Assets != nil || out.status.AssetsSummary != "" || strings.Contains(out.condMessage, "btc") {
			t.Errorf("assets %+v, message %q", out.status.Assets, out.condMessage)
		}
	})
}

// TestComputeStatusFundingBTC: the BTC figures of another address (another
// key or network) are not kept; a missing BTC block (no BTC read yet) does
// not drop the STX figures.
func TestComputeStatusFundingBTC(t *testing.T) {
	fs := fundingFS()
	withBTC(btcSpec(false))(fs)
	keys, btcKey := secretState{addresses: []string{"ST1A"}}, secretState{addresses: []string{btcAddr}}
	res := &fundingResult{
		target: fundingTarget{addresses: []string{"ST1A"}, btc: btcTarget{network: "regtest", address: btcAddr}}, ok: true,
		balances: []uint64{200 * cost}, checked: t0, btcOK: true, btc: 1_000_000, btcChecked: t0,
	}
	st := computeStatus(fs, observation{keys: keys, btcKey: btcKey, funding: res, deployment: deployment(available)}, t0)
	if b := assetFunding(st.Funding, "btc"); b == nil || *b.DripsLeft != 100 {
		t.Fatalf("funding %+v", st.Funding)
	}
	fs.Status = st

	if got := computeStatus(fs, observation{keys: keys, btcKey: btcKey, deployment: deployment(available)}, t0); assetFunding(got.Funding, "btc") == nil {
		t.Errorf("the same address: figures dropped: %+v", got.Funding)
	}
	other := secretState{addresses: []string{btcAddr2}}
	if got := computeStatus(fs, observation{keys: keys, btcKey: other, deployment: deployment(available)}, t0); got.Funding != nil {
		t.Errorf("another BTC address: figures kept: %+v", got.Funding)
	}
	off := fs.DeepCopy()
	off.Spec.Assets = nil
	if got := computeStatus(off, observation{keys: keys, deployment: deployment(available)}, t0); got.Funding != nil {
		t.Errorf("BTC turned off: figures kept: %+v", got.Funding)
	}
	t.Run("no BTC read yet", func(t *testing.T) {
		first := *res
		first.btcOK, first.btcErr = false, errors.New("connection refused")
		got := computeStatus(fs, observation{keys: keys, btcKey: btcKey, funding: &first, deployment: deployment(available)}, t0)
		c := meta.FindStatusCondition(got.Conditions, faucetv1alpha1.ConditionFunded)
		if got.Funding == nil || got.Funding.DripsLeft != 200 || c == nil || c.Reason != faucetv1alpha1.ReasonNodeUnreachable {
			t.Errorf("funding %+v, Funded %+v", got.Funding, c)
		}
	})
}

func TestComputeStatusBTCSecrets(t *testing.T) {
	fs := fundingFS()
	withBTC(btcSpec(true))(fs)
	for _, obs := range []observation{
		{btcKey: secretState{reason: faucetv1alpha1.ReasonBTCKeySecretNotFound, message: "BTC key Secret \"faucet-btc\" not found"}},
		{btcCreds: secretState{reason: faucetv1alpha1.ReasonInvalidBTCCredentials, message: "BTC RPC credentials Secret: want user:password"}},
	} {
		obs.keys = secretState{addresses: []string{"ST1A"}}
		want := obs.btcKey
		if want.usable() {
			want = obs.btcCreds
		}
		st := computeStatus(fs, obs, t0)
		r := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReady)
		s := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionStalled)
		if r == nil || r.Reason != want.reason || s == nil || s.Reason != want.reason || s.Message != want.message {
			t.Errorf("Ready %+v Stalled %+v, want %s", r, s, want.reason)
		}
	}
}

// TestFundingMonitorReadsBTC reads a BTC balance from a real btcd with an
// address index, with the credentials the Secret holds, and from one
// without.
func TestFundingMonitorReadsBTC(t *testing.T) {
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	addr := key.Address().String()
	n := btcdtest.Start(t, addr, btcdtest.WithArgs("--addrindex"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := n.Client().Generate(ctx, 3); err != nil {
		t.Fatal(err)
	}
	m := &FundingMonitor{}
	good := btcTarget{rpcURLs: []string{"http://" + n.RPCAddr()}, credentials: newRPCCredentials(n.User(), n.Password()), network: "regtest", address: addr}
	sats, _, err := m.readBTC(ctx, good)
	if err != nil || sats != 3*50*100_000_000 {
		t.Fatalf("readBTC = %d, %v; want 3 coinbases", sats, err)
	}

	// read with a Stacks node that is down: the BTC balance is read all
	// the same, and kept apart from the Stacks error.
	rd, err := m.read(ctx, fundingTarget{nodeURLs: []string{"http://127.0.0.1:1"}, addresses: []string{"ST1A"}, btc: good})
	if err == nil || rd.btcErr != nil || rd.btc != sats {
		t.Errorf("read: %+v, %v; want the Stacks error and the BTC balance", rd, err)
	}

	const wrongPassword = "not-the-password-77"
	// Several nodes: the pool reads from the one in rotation.
	failover := good
	failover.rpcURLs = []string{"http://127.0.0.1:1", good.rpcURLs[0]}
	sats2, nodes, err := m.readBTC(ctx, failover)
	if err != nil || sats2 != sats {
		t.Errorf("a closed port, then the node: %d sats, %v; want the node's balance", sats2, err)
	}
	if len(nodes) != 2 || nodes[0].out != "unreachable" || nodes[1].out != "" || nodes[1].tip != 3 {
		t.Errorf("the probes of a closed port and the node: %+v", nodes)
	}
	health, _ := nodesStatusOf(nodes)
	if health[0].Reachable || !health[1].Reachable || *health[1].TipHeight != 3 || *health[1].LagBlocks != 0 {
		t.Errorf("status.btcNodes: %+v", health)
	}

	// A node of another network than the btc entry's is out of rotation,
	// as the faucet's pool has it, and status.btcNodes says why.
	signet := failover
	signet.network = "signet"
	if _, nodes, _ = m.readBTC(ctx, signet); len(nodes) != 2 || nodes[1].out != "reports chain regtest, not the faucet's network" {
		t.Errorf("a regtest node for signet: %+v", nodes)
	}

	wrong := good
	wrong.credentials = newRPCCredentials(n.User(), wrongPassword)
	_, _, err = m.readBTC(ctx, wrong)
	if !btcnode.IsAuthError(err) || strings.Contains(err.Error(), wrongPassword) || strings.Contains(err.Error(), n.Password()) {
		t.Errorf("wrong password: %v; want an AuthError without the password", err)
	}

	plain := btcdtest.Start(t, addr) // no --addrindex
	bare := good
	bare.rpcURLs = []string{"http://" + plain.RPCAddr()}
	bare.credentials = newRPCCredentials(plain.User(), plain.Password())
	_, _, err = m.readBTC(ctx, bare)
	if !errors.Is(err, btcnode.ErrNoAddressIndex) {
		t.Errorf("btcd without --addrindex: %v; want ErrNoAddressIndex", err)
	}
	withBare := fundingFS()
	withBTC(btcSpec(false))(withBare)
	out := computeFunding(withBare, fundingResult{target: fundingTarget{addresses: []string{"ST1A"}, btc: bare}, ok: true,
		balances: []uint64{200 * cost}, btcErr: err}, nil)
	if out.condReason != faucetv1alpha1.ReasonAssetUnreadable || !strings.Contains(out.condMessage, "--addrindex") {
		t.Errorf("Funded %s %q", out.condReason, out.condMessage)
	}
}
