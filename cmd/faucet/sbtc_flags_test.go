package main

import (
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The sBTC flags turn the token on only with both an asset and an amount,
// refuse a mainnet token and refill settings without a treasury, and the
// devnet turns it on by default.
func TestSBTCFlags(t *testing.T) {
	for _, tc := range []struct {
		name        string
		o           sbtcOptions
		devnet      bool
		treasury    bool
		wantOn      bool
		wantErrText string
	}{
		{name: "off by default"},
		{name: "on", o: sbtcOptions{asset: stacks.SBTCTestnet, amount: 1000}, wantOn: true},
		{name: "devnet default", o: sbtcOptions{devnet: true}, devnet: true, wantOn: true},
		{name: "devnet without sBTC", devnet: true},
		{name: "amount without asset", o: sbtcOptions{amount: 1}, wantErrText: "--sbtc-amount needs --sbtc-asset"},
		{name: "asset without amount", o: sbtcOptions{asset: stacks.SBTCTestnet}, wantErrText: "--sbtc-asset needs --sbtc-amount"},
		{name: "bad asset", o: sbtcOptions{asset: "ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token", amount: 1}, wantErrText: "--sbtc-asset: bad asset identifier"},
		{name: "mainnet asset", o: sbtcOptions{asset: "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token", amount: 1}, wantErrText: "mainnet contract"},
		{name: "refill without treasury", o: sbtcOptions{asset: stacks.SBTCTestnet, amount: 1, refillBelow: 5}, wantErrText: "need a treasury"},
		{name: "refill without sBTC", o: sbtcOptions{refillAmount: 5}, treasury: true, wantErrText: "need the sBTC faucet on"},
		{name: "refill amount below threshold", o: sbtcOptions{asset: stacks.SBTCTestnet, amount: 1, refillBelow: 10, refillAmount: 5}, treasury: true, wantErrText: "below the token refill threshold"},
		{name: "refill", o: sbtcOptions{asset: stacks.SBTCTestnet, amount: 1, refillBelow: 10, refillAmount: 50}, treasury: true, wantOn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := tc.o.token(tc.devnet, tc.treasury)
			if tc.wantErrText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tok.Enabled() != tc.wantOn {
				t.Fatalf("token on = %v, want %v (%+v)", tok.Enabled(), tc.wantOn, tok)
			}
			if tc.devnet && tc.wantOn && (tok.Asset.String() != stacks.SBTCTestnet || tok.Amount != devnetSBTCAmount) {
				t.Fatalf("devnet token %s × %d", tok.Asset, tok.Amount)
			}
		})
	}
}
