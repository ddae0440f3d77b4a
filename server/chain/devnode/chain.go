package devnode

import (
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// minedTx is what the node's txindex keeps for a mined tx.
type minedTx struct {
	height  uint64
	raw     []byte
	result  string // receipt result, e.g. "(ok true)" or "(err u1)"
	aborted bool   // a contract call whose effects were rolled back
	// pcFailure is the post-condition failure that aborted a call, else "".
	pcFailure string
	events    []TxEvent
}

// callRunner executes admitted contract calls whose fee has been paid
// (the contracts).
type callRunner interface {
	runTokenCall(e *poolEntry) callOutcome
	runContractCall(e *poolEntry, from *account) callOutcome
}

// chain is the block-production side: the tip and every block's header,
// the txindex, and mining, which moves txs from the mempool into blocks
// against the ledger.
type chain struct {
	mu          *sync.Mutex // the node's state lock
	log         *slog.Logger
	clock       clock.WithTicker
	blockTime   time.Duration // Config.BlockTime
	maxBlockTxs int           // Config.MaxBlockTxs

	ledger *ledger
	pool   *mempool
	calls  callRunner

	genesis   string
	tip       Block
	headers   []Block                 // by height, without txids
	confirmed map[stacks.TxID]minedTx // kept forever, like the txindex table
}

func newChain(mu *sync.Mutex, log *slog.Logger, clk clock.WithTicker, cfg Config, l *ledger, pool *mempool, calls callRunner) *chain {
	c := &chain{
		mu: mu, log: log, clock: clk, blockTime: cfg.BlockTime, maxBlockTxs: cfg.MaxBlockTxs,
		ledger: l, pool: pool, calls: calls,
		confirmed: make(map[stacks.TxID]minedTx),
	}
	// The genesis hash depends on the configured chain id so that nodes of
	// different networks never share block hashes.
	var seedBuf [4 + 16]byte
	binary.BigEndian.PutUint32(seedBuf[:4], cfg.ChainID)
	copy(seedBuf[4:], "devnode genesis")
	g := sha512.Sum512_256(seedBuf[:])
	c.genesis = hex.EncodeToString(g[:])
	c.tip = c.makeBlock(c.genesis, 0, nil)
	c.tip.ParentHash = hex.EncodeToString(make([]byte, 32))
	c.headers = []Block{c.tip}
	return c
}

// makeBlock derives a block's hashes from its parent, height and txids.
func (c *chain) makeBlock(parent string, height uint64, txids []stacks.TxID) Block {
	burn := GenesisBurnHeight + height
	ch := c.consensusHash(burn)
	h := sha512.New512_256()
	h.Write([]byte(parent))
	var hb [8]byte
	binary.BigEndian.PutUint64(hb[:], height)
	h.Write(hb[:])
	h.Write([]byte(ch))
	for _, id := range txids {
		h.Write(id[:])
	}
	hash := hex.EncodeToString(h.Sum(nil))
	ibh, _ := node.ComputeIndexBlockHash(hash, ch) // inputs are well-formed by construction
	return Block{
		Height:         height,
		Hash:           hash,
		ParentHash:     parent,
		ConsensusHash:  ch,
		IndexBlockHash: ibh,
		BurnHeight:     burn,
		TenureHeight:   height,
		Time:           c.clock.Now(),
		TxIDs:          txids,
	}
}

// consensusHash is the 20-byte consensus hash of a burn block. It is a pure
// function of the height so the stable (lagging) one needs no history.
func (c *chain) consensusHash(burnHeight uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], burnHeight)
	sum := sha512.Sum512_256(append([]byte("devnode consensus "+c.genesis), b[:]...))
	return hex.EncodeToString(sum[:20])
}

// Tip returns the current chain tip.
func (c *chain) Tip() Block {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.tip
	b.TxIDs = append([]stacks.TxID(nil), b.TxIDs...)
	return b
}

// header is the block at height h, or the tip when h is at or above it;
// its TxIDs are shared, not to be changed.
func (c *chain) header(h uint64) Block {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h >= c.tip.Height {
		return c.tip
	}
	return c.headers[h]
}

// poxState is the tip's burn height and the liquid supply, read together.
func (c *chain) poxState() (burn, supply uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tip.BurnHeight, c.ledger.supply()
}

// minedAt returns txid's txindex entry and its block's index hash, as a
// node whose tip is block h knows it: false when it was not mined by then.
func (c *chain) minedAt(txid stacks.TxID, h uint64) (minedTx, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.confirmed[txid]
	if !ok || m.height > h {
		return minedTx{}, "", false
	}
	return m, c.headers[m.height].IndexBlockHash, true
}

// mined is txid's txindex entry, the zero one when it is not mined.
func (c *chain) mined(txid stacks.TxID) (minedTx, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.confirmed[txid]
	return m, ok
}

// TxStatus reports whether txid is pending, confirmed (and where) or unknown.
func (c *chain) TxStatus(txid stacks.TxID) TxStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.confirmed[txid]; ok {
		return TxStatus{State: TxConfirmed, Height: m.height}
	}
	if c.pool.isPending(txid) {
		return TxStatus{State: TxPending}
	}
	return TxStatus{State: TxUnknown}
}

// TxResult returns a mined tx's result as GET /v3/transaction reports it
// ("(ok true)", "(err u1)", …), and false when txid is not mined.
func (c *chain) TxResult(txid stacks.TxID) (string, bool) {
	m, ok := c.mined(txid)
	return m.result, ok
}

// TxAborted reports whether a mined contract call was rolled back (it
// returned an err or failed a post-condition) and only paid its fee. A
// post-condition abort keeps the would-have-been result, e.g. "(ok true)",
// so TxResult alone cannot tell.
func (c *chain) TxAborted(txid stacks.TxID) bool {
	m, _ := c.mined(txid)
	return m.aborted
}

// TxEvents returns a mined tx's events (see TxEvent for what is modelled),
// and false when txid is not mined. Like stacks-core's event dispatcher,
// which sends no events for a tx aborted by its post-conditions, a
// rolled-back call has none.
func (c *chain) TxEvents(txid stacks.TxID) ([]TxEvent, bool) {
	m, ok := c.mined(txid)
	return append([]TxEvent(nil), m.events...), ok
}

// TxPostConditionFailure returns stacks-core's reason when a mined contract
// call was aborted by its post-conditions (the receipt's vm_error, e.g.
// "Post-condition check failure on fungible asset … owned by …: 5 SentEq
// 0"), else "". With TxAborted it tells a post-condition abort from an
// (err …) result, which the API calls abort_by_post_condition and
// abort_by_response.
func (c *chain) TxPostConditionFailure(txid stacks.TxID) string {
	m, _ := c.mined(txid)
	return m.pcFailure
}
