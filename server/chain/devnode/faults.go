package devnode

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// faults holds the test-facing switches: the injected failures (latency,
// error and drop rates, a dead node) and the settings a test flips while
// the node serves (network, sync state, stacking minimum, fee rate, the fee
// estimator). They have a lock of their own, never held while taking the
// chain state's, so flipping one never waits for a block or an admission.
type faults struct {
	mu  sync.Mutex
	rng *rand.Rand // the fault draws, seeded by Config.Seed
	k   knobs
}

// knobs is a snapshot of the switches.
type knobs struct {
	latency       time.Duration
	errorRate     float64
	dropRate      float64
	down          bool
	mainnet       bool
	synced        bool
	minAmount     uint64
	feeRate       uint64
	noFeeEstimate bool
	// configChainID is Config.ChainID, which mainnet mode overrides.
	configChainID uint32
}

// chainID is the chain id txs must carry.
func (k knobs) chainID() uint32 {
	if k.mainnet {
		return stacks.ChainIDMainnet
	}
	return k.configChainID
}

// newFaults starts with no fault injected and cfg's settings (defaults
// applied).
func newFaults(cfg Config, rng *rand.Rand) *faults {
	return &faults{rng: rng, k: knobs{
		mainnet:       cfg.Mainnet,
		synced:        true,
		minAmount:     cfg.MinAmountUstx,
		feeRate:       cfg.FeeRate,
		configChainID: cfg.ChainID,
	}}
}

// snapshot returns the switches as they are now.
func (f *faults) snapshot() knobs {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.k
}

// request returns the switches for an RPC about to be served and whether
// the error-rate fault fails it.
func (f *faults) request() (knobs, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.k, f.draw(f.k.errorRate)
}

// dropAdmitted reports whether the drop-rate fault swallows an admitted tx.
func (f *faults) dropAdmitted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draw(f.k.dropRate)
}

// draw is true with probability p; it draws only when p > 0, so a node
// without faults consumes no randomness. Callers hold f.mu.
func (f *faults) draw(p float64) bool { return p > 0 && f.rng.Float64() < p }

func (f *faults) set(change func(k *knobs)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.k)
}

// ChainID returns the chain id the node currently enforces (1 in mainnet mode).
func (f *faults) ChainID() uint32 { return f.snapshot().chainID() }

// SetLatency delays every RPC response by d.
func (f *faults) SetLatency(d time.Duration) { f.set(func(k *knobs) { k.latency = max(d, 0) }) }

// SetErrorRate makes fraction p of RPCs answer 500 text/plain instead.
func (f *faults) SetErrorRate(p float64) { f.set(func(k *knobs) { k.errorRate = clamp01(p) }) }

// SetDropRate makes fraction p of admitted txs answer 200 with their txid
// but never be stored, like a follower that accepts and never relays.
func (f *faults) SetDropRate(p float64) { f.set(func(k *knobs) { k.dropRate = clamp01(p) }) }

// SetDown makes the node close every connection without a response.
func (f *faults) SetDown(down bool) { f.set(func(k *knobs) { k.down = down }) }

// SetMainnet switches mainnet mode: network_id 1, bitcoin-mainnet parent,
// SP boot contracts, and only mainnet txs (version 0x00, chain id 1,
// recipients SP/SM) are admitted. Existing state is kept.
func (f *faults) SetMainnet(mainnet bool) { f.set(func(k *knobs) { k.mainnet = mainnet }) }

// SetSynced sets /v2/info is_fully_synced.
func (f *faults) SetSynced(synced bool) { f.set(func(k *knobs) { k.synced = synced }) }

// SetMinAmountUstx sets the /v2/pox stacking minimum.
func (f *faults) SetMinAmountUstx(v uint64) { f.set(func(k *knobs) { k.minAmount = v }) }

// SetFeeRate sets the /v2/fees/transfer answer (µSTX per byte), which is
// also the low fee rate of /v2/fees/transaction.
func (f *faults) SetFeeRate(v uint64) { f.set(func(k *knobs) { k.feeRate = v }) }

// SetNoFeeEstimate makes POST /v2/fees/transaction answer the node's 400
// NoEstimateAvailable error (its estimator has no data yet) while on.
func (f *faults) SetNoFeeEstimate(on bool) { f.set(func(k *knobs) { k.noFeeEstimate = on }) }

func clamp01(p float64) float64 {
	switch {
	case p > 1:
		return 1
	case p > 0:
		return p
	default: // also NaN
		return 0
	}
}
