package faucet

import (
	"context"
	"errors"
	"log/slog"
	"math/bits"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/internal/ttlcache"
)

// pricer prices transactions: the node's fee rate × a transaction's
// length, clamped to [Fees.Min, Fees.Max] and never below the length (the
// node's minimum relay fee), or Fees.Fallback when the node has no rate.
// A send-many call is priced from the node's estimate for its payload.
type pricer struct {
	node feeNode
	fees Fees
	log  *slog.Logger
	rate ttlcache.Value[uint64]
	// fetchRate reads the node's rate; made once, so a drip's price
	// passes it without allocating.
	fetchRate func(context.Context) (uint64, error)
	// batchSample is the node's last estimate for a send-many call.
	batchSample ttlcache.Value[feeSample]
}

// feeNode is what the pricer asks the node.
type feeNode interface {
	TransferFeeRate(ctx context.Context) (uint64, error)
	TransactionFeeEstimate(ctx context.Context, payload []byte, estimatedLen uint64) (*node.FeeEstimate, error)
}

func newPricer(n feeNode, fees Fees, cacheTTL time.Duration, clk clock.PassiveClock, log *slog.Logger) *pricer {
	p := &pricer{node: n, fees: fees, log: log}
	p.fetchRate = func(ctx context.Context) (uint64, error) { return p.node.TransferFeeRate(ctx) }
	p.rate.TTL, p.rate.Clock = cacheTTL, clk
	p.batchSample.TTL, p.batchSample.Clock = cacheTTL, clk
	return p
}

// transfer is the fee of an STX transfer to to.
func (p *pricer) transfer(ctx context.Context, to stacks.Principal) uint64 {
	return p.ofLength(ctx, transferLen(to))
}

// token is the fee of a SIP-010 transfer of asset to to, priced like an
// STX transfer of its length.
func (p *pricer) token(ctx context.Context, asset stacks.AssetInfo, to stacks.Principal, memo []byte) uint64 {
	return p.ofLength(ctx, tokenTransferLen(asset, to, memo))
}

// ofLength is the rate × length, clamped, or the fallback; at least the
// length.
func (p *pricer) ofLength(ctx context.Context, length uint64) uint64 {
	fee, ok := p.rated(ctx, length)
	if !ok {
		fee = p.fees.Fallback
	}
	return max(fee, length)
}

// transferLen is the length of a signed transfer to to.
func transferLen(to stacks.Principal) uint64 {
	return uint64((&stacks.Transaction{Payload: stacks.TokenTransfer{Recipient: to}}).EncodedLen())
}

// tokenTransferLen is the length of a signed SIP-010 transfer to to: the
// sender is always a standard principal, so its address does not change it.
func tokenTransferLen(asset stacks.AssetInfo, to stacks.Principal, memo []byte) uint64 {
	sender := stacks.Principal{Address: stacks.Address{Version: stacks.AddressVersionTestnetSingleSig}}
	args, err := stacks.SIP010TransferArgs(sender, to, 1, memo)
	if err != nil {
		args, _ = stacks.SIP010TransferArgs(sender, to, 1, nil)
	}
	tx := &stacks.Transaction{
		PostConditions: []stacks.PostCondition{stacks.PrincipalSendsExactlyFT(sender, asset, 1)},
		ContractCall:   &stacks.ContractCall{Contract: asset.Contract, Function: stacks.SIP010TransferFunction, Args: args},
	}
	return uint64(tx.EncodedLen())
}

// rated is the node's transfer fee rate × length, clamped to [Min, Max];
// false when the node has no rate.
func (p *pricer) rated(ctx context.Context, length uint64) (uint64, bool) {
	rate, err := p.rate.Get(ctx, p.fetchRate)
	if err != nil || rate == 0 {
		return 0, false
	}
	hi, fee := bits.Mul64(rate, length)
	if hi != 0 {
		fee = p.fees.Max
	}
	return min(max(fee, p.fees.Min), p.fees.Max), true
}

// batch prices a send-many call from the node's estimate for this very
// payload (the middle estimation, as stacks.js uses), clamped to Min and
// Max scaled to the length (batchFeeMax) and never below the length.
// Without an estimate it is the transfer fee rate × the length. draft is
// the unsigned call: only its payload and length matter.
func (p *pricer) batch(ctx context.Context, draft *stacks.Transaction) uint64 {
	length := uint64(draft.EncodedLen())
	var fee uint64
	// One estimate serves CacheTTL of batches, scaled to each one's
	// length: a call's cost grows with its recipient list, as its length
	// does, and a round trip per batch would add to every batched drip's
	// wait.
	if est, err := p.batchSample.Get(ctx, func(ctx context.Context) (feeSample, error) {
		est, err := p.node.TransactionFeeEstimate(ctx, draft.PayloadBytes(), length)
		if err != nil {
			return feeSample{}, err
		}
		return feeSample{fee: est.Middle(), length: length}, nil
	}); err == nil {
		fee = est.scaled(length)
	} else {
		if !errors.Is(err, node.ErrNoFeeEstimate) && !errors.Is(err, node.ErrFeeEstimationDisabled) {
			p.log.Warn("fee estimate for a send-many batch failed; using the transfer fee rate", "err", err)
		}
		var ok bool
		if fee, ok = p.rated(ctx, length); !ok {
			// Fallback prices a plain transfer; a batch is as many times
			// dearer as it is longer.
			hi, lo := bits.Mul64(p.fees.Fallback, length)
			fee = lo / transferLen(stacks.Principal{})
			if hi != 0 {
				fee = p.fees.Max
			}
		}
	}
	return max(min(max(fee, p.fees.Min), batchFeeMax(p.fees.Max, length)), length)
}

// feeSample is a fee the node estimated for a transaction of length bytes.
type feeSample struct{ fee, length uint64 }

// scaled is the sample's fee for a transaction of n bytes, rounded up.
func (s feeSample) scaled(n uint64) uint64 {
	if n == s.length || s.length == 0 {
		return s.fee
	}
	hi, lo := bits.Mul64(s.fee, n)
	if hi != 0 {
		return ^uint64(0)
	}
	return (lo + s.length - 1) / s.length
}

// batchFeeMax scales Fees.Max, which is sized for a transfer, to a
// send-many call of length bytes: the cap per byte (so per drip) stays
// the same, and a big batch is not priced out when fees rise.
func batchFeeMax(feeMax, length uint64) uint64 {
	unit := transferLen(stacks.Principal{})
	hi, lo := bits.Mul64(feeMax, length)
	if hi != 0 {
		return ^uint64(0)
	}
	scaled := lo / unit
	if lo%unit != 0 {
		scaled++
	}
	return max(feeMax, scaled)
}
