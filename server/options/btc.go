package options

import (
	"errors"
	"fmt"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// BTCAmounts are the sats of each BTC drip size: v1 and v3's default, v1's
// large=true and xlarge=true.
type BTCAmounts struct {
	Default, Large, XLarge int64
}

// BTCFees bound the fee rate of BTC payouts, sat/vB; Fallback is the rate
// when the node has no estimate.
type BTCFees struct {
	Min, Max, Fallback int64
}

// BTC turns on the BTC faucet: regtest, signet or testnet BTC paid from
// one key through a Bitcoin node's JSON-RPC (Bitcoin Core or btcd).
type BTC struct {
	// RPCURLs are the Bitcoin nodes of one chain; reads go to the best,
	// broadcasts to all.
	RPCURLs         URLList
	CredentialsFile string
	KeyFile         string
	Network         bitcoin.Network
	Amounts         BTCAmounts
	StartHeight     int64
	Fees            BTCFees
	BatchMax        int
	RPCTimeout      time.Duration
	Limits          guard.AssetLimits
}

func defaultBTC() BTC {
	return BTC{
		Network:  bitcoin.Regtest,
		Amounts:  BTCAmounts{Default: settings.BTCAmount, Large: settings.BTCLargeAmount, XLarge: settings.BTCXLargeAmount},
		Fees:     BTCFees{Fallback: settings.BTCFallbackFeeRate, Min: bitcoin.MinFeeRate, Max: settings.BTCMaxFeeRate},
		BatchMax: settings.BTCBatchMax, RPCTimeout: btcnode.DefaultTimeout, Limits: guard.DefaultAssetLimits(),
	}
}

// BindFlags binds the --btc-* flags.
func (o *BTC) BindFlags(fs *Flags) {
	fs.Var(&o.RPCURLs, "btc-rpc-url", "turn on the BTC faucet: the Bitcoin node's JSON-RPC URL (Bitcoin Core or btcd), e.g. http://127.0.0.1:18443; credentials may be in it (user:pass@) or in --btc-rpc-credentials-file; needs --btc-key-file. Comma-separated or repeated for several nodes of one chain: reads go to a healthy node at the highest tip, payouts to all")
	fs.String(&o.CredentialsFile, "btc-rpc-credentials-file", "file holding the nodes' RPC credentials as user:password (Bitcoin Core's .cookie format), sent to every --btc-rpc-url (which then carries none); re-read when a node answers 401")
	fs.String(&o.KeyFile, "btc-key-file", "file with the BTC faucet's private key (WIF or 64 hex digits) on its first line, optionally followed by its address, as `faucet keys generate --btc` prints it")
	fs.Text(&o.Network, "btc-network", "the Bitcoin network: regtest, signet or testnet (mainnet is refused)")
	fs.Int64(&o.Amounts.Default, "btc-amount", "satoshis per default BTC drip (v1 and v3)")
	fs.Int64(&o.Amounts.Large, "btc-large-amount", "satoshis per v1 drip with large=true")
	fs.Int64(&o.Amounts.XLarge, "btc-xlarge-amount", "satoshis per v1 drip with xlarge=true")
	fs.Int64(&o.Fees.Fallback, "btc-fee-rate", "fee rate in sat/vB when the node has no estimate (btcd and a fresh regtest Core have none)")
	fs.Int64(&o.Fees.Min, "btc-min-fee-rate", "lowest fee rate paid, sat/vB")
	fs.Int64(&o.Fees.Max, "btc-max-fee-rate", "highest fee rate paid, sat/vB, whatever the node estimates")
	fs.Int64(&o.StartHeight, "btc-start-height", "first block scanned for the key's coins (set it near the key's first funding on signet or testnet: the faucet reads every block from here at start)")
	fs.Int(&o.BatchMax, "btc-batch-max", "most BTC drips one payout transaction pays, one output each (1 = every drip alone)")
	fs.Duration(&o.RPCTimeout, "btc-rpc-timeout", "timeout of each Bitcoin node RPC call")
	fs.Var(limitValue{&o.Limits.PerAddress}, "btc-limit-address", "BTC drips per address, N/window, a bucket apart from the Stacks assets' (0 disables)")
	fs.Var(limitValue{&o.Limits.PerIP}, "btc-limit-ip", "BTC drips per client IP (IPv6 by /64), N/window (0 disables)")
}

// On reports whether BTC flags turn the faucet on outside the devnet.
func (o *BTC) On() bool { return len(o.RPCURLs) > 0 || o.KeyFile != "" || o.CredentialsFile != "" }

func (o *BTC) validate(devnet bool) error {
	if devnet && o.On() {
		return errors.New("--devnet runs its own btcd: drop --btc-rpc-url, --btc-key-file and --btc-rpc-credentials-file (or --devnet-btc=false and use them against your own node)")
	}
	if !devnet && o.On() {
		switch {
		case len(o.RPCURLs) == 0:
			return errors.New("--btc-key-file needs --btc-rpc-url, the Bitcoin node's JSON-RPC URL")
		case o.KeyFile == "":
			return errors.New("--btc-rpc-url needs --btc-key-file, the BTC faucet's private key")
		}
	}
	if o.Fees.Min < 1 || o.Fees.Max < o.Fees.Min || o.Fees.Fallback < 1 {
		return fmt.Errorf("--btc-min-fee-rate %d, --btc-max-fee-rate %d and --btc-fee-rate %d: want 1 ≤ min ≤ max and a positive fallback", o.Fees.Min, o.Fees.Max, o.Fees.Fallback)
	}
	if o.Fees.Max > bitcoin.MaxFeeRate {
		return fmt.Errorf("--btc-max-fee-rate %d sat/vB is above the sanity cap of %d", o.Fees.Max, bitcoin.MaxFeeRate)
	}
	if o.BatchMax < 1 || o.BatchMax > settings.BTCMaxBatch {
		return fmt.Errorf("--btc-batch-max must be 1..%d, got %d", settings.BTCMaxBatch, o.BatchMax)
	}
	if o.RPCTimeout <= 0 {
		return fmt.Errorf("--btc-rpc-timeout must be positive, got %s", o.RPCTimeout)
	}
	for _, u := range o.RPCURLs {
		if err := needScheme("--btc-rpc-url", u); err != nil {
			return err
		}
	}
	return nil
}
