package btcnode

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Call names passed to the observer: stable and low-cardinality, fit for
// metric labels. Each is the RPC method the call uses, except
// CallFeeEstimate, which covers estimatesmartfee and estimatefee.
const (
	CallBlockchainInfo  = "getblockchaininfo"
	CallBlockCount      = "getblockcount"
	CallBestBlockHash   = "getbestblockhash"
	CallBlockHash       = "getblockhash"
	CallBlock           = "getblock"
	CallBlockHeader     = "getblockheader"
	CallRawTransaction  = "getrawtransaction"
	CallSendRawTx       = "sendrawtransaction"
	CallRawMempool      = "getrawmempool"
	CallTxSpending      = "gettxspendingprevout"
	CallFeeEstimate     = "fee_estimate"
	CallGenerate        = "generate"
	CallGenerateToAddr  = "generatetoaddress"
	CallInvalidateBlock = "invalidateblock"
	CallReconsiderBlock = "reconsiderblock"
)

// BlockchainInfo calls getblockchaininfo.
func (c *Client) BlockchainInfo(ctx context.Context) (info *BlockchainInfo, err error) {
	defer c.rc.Observe(CallBlockchainInfo)(&err)
	var w wireBlockchainInfo
	if err := c.call(ctx, CallBlockchainInfo, nil, &w); err != nil {
		return nil, err
	}
	chain, _ := normalizeChain(w.Chain)
	return &BlockchainInfo{
		Chain:                chain,
		ChainName:            w.Chain,
		Blocks:               w.Blocks,
		Headers:              w.Headers,
		BestBlockHash:        strings.ToLower(w.BestBlockHash),
		InitialBlockDownload: w.InitialBlockDownload,
		Pruned:               w.Pruned,
	}, nil
}

// RequireTestChain returns the node's chain, refusing mainnet (ErrMainChain:
// Core's "main", btcd's "mainnet") and names it does not know, which could
// be mainnet under a new spelling.
func (c *Client) RequireTestChain(ctx context.Context) (Chain, error) {
	info, err := c.BlockchainInfo(ctx)
	if err != nil {
		return "", err
	}
	switch info.Chain {
	case ChainMain:
		return "", fmt.Errorf("btcnode: the node at %s reports chain %q: %w", c.rc.URL(), info.ChainName, ErrMainChain)
	case "":
		return "", fmt.Errorf("btcnode: the node at %s reports an unknown chain %q", c.rc.URL(), excerpt([]byte(info.ChainName), 40))
	}
	return info.Chain, nil
}

// BlockCount calls getblockcount: the height of the tip.
func (c *Client) BlockCount(ctx context.Context) (height int64, err error) {
	defer c.rc.Observe(CallBlockCount)(&err)
	if err := c.call(ctx, CallBlockCount, nil, &height); err != nil {
		return 0, err
	}
	return height, nil
}

// BestBlockHash calls getbestblockhash: the hash of the tip.
func (c *Client) BestBlockHash(ctx context.Context) (hash string, err error) {
	defer c.rc.Observe(CallBestBlockHash)(&err)
	return c.hashResult(ctx, CallBestBlockHash, nil)
}

// BlockHash calls getblockhash: the hash of the main-chain block at
// height, or an error wrapping ErrHeightOutOfRange above the tip (Core
// -8 "Block height out of range", btcd -1 "Block number out of range").
func (c *Client) BlockHash(ctx context.Context, height int64) (hash string, err error) {
	defer c.rc.Observe(CallBlockHash)(&err)
	if height < 0 {
		return "", fmt.Errorf("btcnode %s: negative height %d", CallBlockHash, height)
	}
	hash, err = c.hashResult(ctx, CallBlockHash, []any{height})
	if re := asRPC(err); re != nil && (re.Code == CodeInvalidParameter || re.Code == CodeMisc) && re.contains("out of range") {
		re.kind = ErrHeightOutOfRange
	}
	return hash, err
}

// Block calls getblock with verbosity 2: the block with every
// transaction's inputs and outputs. Errors wrap ErrBlockNotFound for an
// unknown hash and ErrNotInMainChain when btcd knows the block but it is
// off its main chain (read it with BlockRaw then).
func (c *Client) Block(ctx context.Context, hash string) (b *Block, err error) {
	defer c.rc.Observe(CallBlock)(&err)
	var w wireBlock
	h, err := c.blockCall(ctx, hash, 2, &w)
	if err != nil {
		return nil, err
	}
	if b, err = w.convert(); err != nil {
		return nil, responseError(CallBlock, err)
	}
	if b.Hash != h {
		return nil, responseError(CallBlock, fmt.Errorf("asked for block %s, got %s", h, b.Hash))
	}
	return b, nil
}

// BlockHeight calls getblockheader (verbose) for the height of the block
// hash. Errors wrap ErrBlockNotFound for a hash the node does not know.
func (c *Client) BlockHeight(ctx context.Context, hash string) (height int64, err error) {
	defer c.rc.Observe(CallBlockHeader)(&err)
	h, err := normalizeHash(CallBlockHeader, hash)
	if err != nil {
		return 0, err
	}
	var w struct {
		Hash   string `json:"hash"`
		Height *int64 `json:"height"`
	}
	err = c.call(ctx, CallBlockHeader, []any{h, true}, &w)
	if re := asRPC(err); re != nil && re.Code == CodeInvalidAddressOrKey {
		re.kind = ErrBlockNotFound
	}
	if err != nil {
		return 0, err
	}
	if w.Hash != h || w.Height == nil {
		return 0, responseError(CallBlockHeader, fmt.Errorf("asked for the header of block %s, got %q", h, w.Hash))
	}
	return *w.Height, nil
}

// BlockRaw calls getblock with verbosity 0: the serialized block. Unlike
// Block it reads blocks off the main chain on btcd too, which is what a
// caller undoing a reorg needs.
func (c *Client) BlockRaw(ctx context.Context, hash string) (raw []byte, err error) {
	defer c.rc.Observe(CallBlock)(&err)
	var s string
	h, err := c.blockCall(ctx, hash, 0, &s)
	if err != nil {
		return nil, err
	}
	if raw, err = hex.DecodeString(s); err != nil || len(raw) < 81 {
		return nil, responseError(CallBlock, fmt.Errorf("block %s: not a serialized block (%d hex characters)", h, len(s)))
	}
	return raw, nil
}

// blockCall checks hash and sends getblock with an integer verbosity,
// which both nodes take (Core also takes a bool, btcd only an int), and
// maps the errors. It returns the hash as sent: lower case.
func (c *Client) blockCall(ctx context.Context, hash string, verbosity int, out any) (string, error) {
	h, err := normalizeHash(CallBlock, hash)
	if err != nil {
		return "", err
	}
	err = c.call(ctx, CallBlock, []any{h, verbosity}, out)
	if re := asRPC(err); re != nil {
		switch {
		case re.Code == CodeInvalidAddressOrKey:
			re.kind = ErrBlockNotFound
		case re.Code == CodeInternal && re.contains("not in the main chain"):
			re.kind = ErrNotInMainChain
		}
	}
	return h, err
}

// RawTransaction calls getrawtransaction verbose: a mempool transaction,
// or a confirmed one (needs the node's transaction index), with its block
// and confirmations. Errors wrap ErrTxNotFound, or ErrTxIndexDisabled when
// the node says it would need its index.
func (c *Client) RawTransaction(ctx context.Context, txid string) (tx *Tx, err error) {
	defer c.rc.Observe(CallRawTransaction)(&err)
	id, err := normalizeHash(CallRawTransaction, txid)
	if err != nil {
		return nil, err
	}
	var w wireTx
	// verbose as the integer 1: btcd rejects a bool, Core takes either.
	err = c.call(ctx, CallRawTransaction, []any{id, 1}, &w)
	if re := asRPC(err); re != nil && re.Code == CodeInvalidAddressOrKey {
		if re.contains("txindex", "transaction index") {
			re.kind = ErrTxIndexDisabled
		} else {
			re.kind = ErrTxNotFound
		}
	}
	if err != nil {
		return nil, err
	}
	t, err := w.convert()
	if err != nil {
		return nil, responseError(CallRawTransaction, err)
	}
	if t.TxID != id {
		return nil, responseError(CallRawTransaction, fmt.Errorf("asked for %s, got %s", id, t.TxID))
	}
	return &t, nil
}

// SendRawTransaction calls sendrawtransaction and returns the txid the
// node computed. Only the transaction is sent: Core's maxfeerate (default
// 0.10 BTC/kvB) applies on Core, and btcd has no such check, so the caller
// must bound its own fees.
func (c *Client) SendRawTransaction(ctx context.Context, rawTx []byte) (txid string, err error) {
	defer c.rc.Observe(CallSendRawTx)(&err)
	if len(rawTx) == 0 {
		return "", fmt.Errorf("btcnode %s: empty transaction", CallSendRawTx)
	}
	if len(rawTx) > MaxTxBytes {
		return "", fmt.Errorf("btcnode %s: transaction is %d bytes, above the %d a block can hold", CallSendRawTx, len(rawTx), MaxTxBytes)
	}
	return c.hashResult(ctx, CallSendRawTx, []any{hex.EncodeToString(rawTx)})
}

// RawMempool calls getrawmempool: the txids in the node's mempool.
func (c *Client) RawMempool(ctx context.Context) (txids []string, err error) {
	defer c.rc.Observe(CallRawMempool)(&err)
	if err := c.call(ctx, CallRawMempool, nil, &txids); err != nil {
		return nil, err
	}
	for i, id := range txids {
		if err := checkHash(id); err != nil {
			return nil, responseError(CallRawMempool, fmt.Errorf("txid %d: %w", i, err))
		}
		txids[i] = strings.ToLower(id)
	}
	return txids, nil
}

// OutPoint names a transaction output: its transaction's id (hex, as the
// node writes it) and its index.
type OutPoint struct {
	TxID string `json:"txid"`
	Vout uint32 `json:"vout"`
}

// MempoolSpends calls gettxspendingprevout (Bitcoin Core 24+, btcd 0.24+):
// of outs, those a mempool transaction spends, with that transaction's id.
// An output spent in a block, or not spent, is not listed: gettxout cannot
// tell this, since btcd ignores mempool spends there.
func (c *Client) MempoolSpends(ctx context.Context, outs []OutPoint) (spends map[OutPoint]string, err error) {
	defer c.rc.Observe(CallTxSpending)(&err)
	ids := make([]OutPoint, len(outs))
	for i, o := range outs {
		id, err := normalizeHash(CallTxSpending, o.TxID)
		if err != nil {
			return nil, err
		}
		ids[i] = OutPoint{TxID: id, Vout: o.Vout}
	}
	var res []struct {
		OutPoint
		SpendingTxID string `json:"spendingtxid"`
	}
	if err := c.call(ctx, CallTxSpending, []any{ids}, &res); err != nil {
		return nil, err
	}
	spends = map[OutPoint]string{}
	for _, r := range res {
		if r.SpendingTxID == "" {
			continue
		}
		if err := checkHash(r.SpendingTxID); err != nil {
			return nil, responseError(CallTxSpending, fmt.Errorf("spendingtxid: %w", err))
		}
		spends[OutPoint{TxID: strings.ToLower(r.TxID), Vout: r.Vout}] = strings.ToLower(r.SpendingTxID)
	}
	return spends, nil
}

// EstimateFee asks for a fee rate that confirms within confTarget blocks:
// Core's estimatesmartfee, else (when the node has no such method, as
// btcd) btcd's estimatefee, whose targets stop at btcdMaxFeeTarget (a
// larger target is asked as that, and Blocks says so). Without an
// estimate, as on a fresh regtest chain, the error wraps ErrNoFeeEstimate:
// Core answers {"errors": [...]}; btcd's estimatefee fails with a plain
// error ("not enough blocks have been observed"), which its HTTP server
// turns into -32600 "Invalid request: malformed", or answers a rate <= 0.
func (c *Client) EstimateFee(ctx context.Context, confTarget int) (est *FeeEstimate, err error) {
	defer c.rc.Observe(CallFeeEstimate)(&err)
	if confTarget < 1 {
		return nil, fmt.Errorf("btcnode %s: confirmation target %d, want >= 1", CallFeeEstimate, confTarget)
	}
	if !c.noSmartFee.Load() {
		var w wireSmartFee
		err := c.call(ctx, "estimatesmartfee", []any{confTarget}, &w)
		switch {
		case err == nil:
			if w.FeeRate == nil {
				return nil, fmt.Errorf("btcnode estimatesmartfee: %w: %s", ErrNoFeeEstimate, excerpt([]byte(strings.Join(w.Errors, "; ")), maxMessageExcerpt))
			}
			return feeEstimate("estimatesmartfee", *w.FeeRate, w.Blocks)
		case !IsMethodNotFound(err):
			return nil, err
		}
		c.noSmartFee.Store(true)
	}
	target := min(confTarget, btcdMaxFeeTarget)
	var rate json.Number
	err = c.call(ctx, "estimatefee", []any{target}, &rate)
	if re := asRPC(err); re != nil && (re.Code == CodeInvalidRequest && re.contains("malformed") ||
		re.Code == CodeInternal && re.contains("not enough blocks have been observed")) {
		re.kind = ErrNoFeeEstimate
	}
	if err != nil {
		return nil, err
	}
	return feeEstimate("estimatefee", rate, target)
}

// btcdMaxFeeTarget is btcd's estimateFeeDepth: estimatefee fails beyond it.
const btcdMaxFeeTarget = 25

func feeEstimate(method string, btcPerKB json.Number, blocks int) (*FeeEstimate, error) {
	if strings.HasPrefix(strings.TrimSpace(string(btcPerKB)), "-") {
		return nil, fmt.Errorf("btcnode %s: %w: rate %s", method, ErrNoFeeEstimate, btcPerKB)
	}
	sats, err := parseBTC(btcPerKB)
	if err != nil {
		return nil, responseError(method, fmt.Errorf("fee rate: %w", err))
	}
	if sats == 0 {
		return nil, fmt.Errorf("btcnode %s: %w: rate 0", method, ErrNoFeeEstimate)
	}
	return &FeeEstimate{SatPerKvB: sats, Blocks: blocks, Method: method}, nil
}

// Generate calls btcd's generate: mine n blocks paying btcd's --miningaddr.
// Core removed generate; use GenerateToAddress there.
func (c *Client) Generate(ctx context.Context, n int) (hashes []string, err error) {
	defer c.rc.Observe(CallGenerate)(&err)
	return c.generated(ctx, CallGenerate, n, []any{n})
}

// GenerateToAddress calls Core's generatetoaddress: mine n blocks paying
// addr. btcd does not have it (-32601); use Generate there.
func (c *Client) GenerateToAddress(ctx context.Context, n int, addr string) (hashes []string, err error) {
	defer c.rc.Observe(CallGenerateToAddr)(&err)
	return c.generated(ctx, CallGenerateToAddr, n, []any{n, addr})
}

func (c *Client) generated(ctx context.Context, method string, n int, params []any) ([]string, error) {
	if n < 1 {
		return nil, fmt.Errorf("btcnode %s: %d blocks, want >= 1", method, n)
	}
	var hashes []string
	if err := c.call(ctx, method, params, &hashes); err != nil {
		return nil, err
	}
	if len(hashes) != n {
		return nil, responseError(method, fmt.Errorf("asked for %d blocks, got %d hashes", n, len(hashes)))
	}
	for i, h := range hashes {
		if err := checkHash(h); err != nil {
			return nil, responseError(method, fmt.Errorf("hash %d: %w", i, err))
		}
		hashes[i] = strings.ToLower(h)
	}
	return hashes, nil
}

// InvalidateBlock calls invalidateblock: the node treats the block and its
// descendants as invalid and reorganises to the best other chain.
func (c *Client) InvalidateBlock(ctx context.Context, hash string) (err error) {
	defer c.rc.Observe(CallInvalidateBlock)(&err)
	return c.blockCommand(ctx, CallInvalidateBlock, hash)
}

// ReconsiderBlock calls reconsiderblock, undoing InvalidateBlock: the node
// reorganises back if that chain has more work.
func (c *Client) ReconsiderBlock(ctx context.Context, hash string) (err error) {
	defer c.rc.Observe(CallReconsiderBlock)(&err)
	return c.blockCommand(ctx, CallReconsiderBlock, hash)
}

func (c *Client) blockCommand(ctx context.Context, method, hash string) error {
	h, err := normalizeHash(method, hash)
	if err != nil {
		return err
	}
	return c.call(ctx, method, []any{h}, nil)
}

// hashResult makes a call whose result is one block hash or txid.
func (c *Client) hashResult(ctx context.Context, method string, params []any) (string, error) {
	var s string
	if err := c.call(ctx, method, params, &s); err != nil {
		return "", err
	}
	if err := checkHash(s); err != nil {
		return "", responseError(method, fmt.Errorf("result: %w", err))
	}
	return strings.ToLower(s), nil
}

// normalizeHash checks a hash or txid argument before it is sent.
func normalizeHash(method, s string) (string, error) {
	s = strings.TrimSpace(s)
	if err := checkHash(s); err != nil {
		return "", fmt.Errorf("btcnode %s: hash %q: %w", method, excerpt([]byte(s), 70), err)
	}
	return strings.ToLower(s), nil
}
