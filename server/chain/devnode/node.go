package devnode

import (
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

const (
	// DefaultMinAmountUstx is the PoX stacking minimum reported when
	// Config.MinAmountUstx is 0: 125,000 STX. Real networks have shown
	// 70k–160k STX (mainnet pox-2 fixture: 90k); the regtest fixture's 833M
	// STX only reflects regtest's inflated supply.
	DefaultMinAmountUstx uint64 = 125_000_000_000

	// Pox5MinAmountUstx is POX_5_SIGNER_SET_MIN_USTX, 50,000 STX: the flat
	// minimum a PoX-5 node reports for every pox-5 cycle, the default
	// instead of DefaultMinAmountUstx on a 4.x node
	// (Config.PoXSBTCContract), and its min_increment_ustx.
	Pox5MinAmountUstx uint64 = 50_000_000_000

	// MempoolMaxTxAge is stacks-core's MEMPOOL_MAX_TRANSACTION_AGE: a tx
	// received at tip height h is garbage-collected once the tip exceeds h+256.
	MempoolMaxTxAge = 256

	// MaxPayloadLen is stacks-core's MAX_PAYLOAD_LEN, the POST body limit.
	MaxPayloadLen = 1 + 16<<20

	// GenesisBurnHeight is the burn height of the genesis block (Stacks
	// height 0). It matches the regtest /v2/pox fixture's current height, so
	// the node starts in reward cycle 11: in Epoch30 as a 3.x node, in
	// Epoch40 as a 4.x one (Config.PoXSBTCContract).
	GenesisBurnHeight = 227

	// stableConfirmations is how far stable_burn_block_height lags the burn
	// tip (stacks-core's default of 7).
	stableConfirmations = 7

	// ServerVersion is reported as /v2/info server_version.
	ServerVersion = "stacks-node devnode (faucet-operator)"

	// Bitcoin network magics reported as /v2/info parent_network_id.
	parentNetworkRegtest uint32 = 0xDAB5BFFA // 3669344250: krypton / today's testnet
	parentNetworkMainnet uint32 = 0xD9B4BEF9 // 3652501241

	// genesisChainstateHash is the value every real network reports.
	genesisChainstateHash = "74237aa39aa50a83de11a4f53e9d3bb7d43461d1de9873f402e5453ae60bc59b"
)

// Config configures a Node. The zero value is a usable testnet node.
type Config struct {
	// ChainID is the chain id transactions must be signed for and the
	// /v2/info network_id; 0 means stacks.ChainIDTestnet. Ignored while the
	// node is in mainnet mode, which always uses 1.
	ChainID uint32
	// Mainnet starts the node in mainnet mode (see SetMainnet).
	Mainnet bool
	// BlockTime is the mining interval for Run; 0 mines only on Mine().
	BlockTime time.Duration
	// Genesis holds µSTX balances at genesis.
	Genesis map[stacks.Address]uint64
	// MinAmountUstx is /v2/pox min_amount_ustx; 0 means
	// DefaultMinAmountUstx, or Pox5MinAmountUstx on a 4.x node.
	MinAmountUstx uint64
	// FeeRate is the /v2/fees/transfer answer in µSTX per byte, and the low
	// fee rate of /v2/fees/transaction; 0 means 1.
	FeeRate uint64
	// MaxBlockTxs caps transactions per block; 0 is unlimited.
	MaxBlockTxs int
	// ConfirmedBalanceOnly makes NotEnoughFunds compare amount+fee with the
	// confirmed balance alone, as stacks-core's admission does. By default the
	// devnode is stricter and also subtracts the sender's other pending
	// spends, so an overspending chain is refused at the door instead of
	// being dropped at mining (which would leave a nonce gap).
	ConfirmedBalanceOnly bool
	// NoTxIndex makes GET /v3/transaction/{txid} answer 501, like a node
	// running without txindex (the stacks-node default).
	NoTxIndex bool
	// SendManyContract is the id ("ADDR.name") of a deployed send-many-memo
	// contract, e.g. stacks.SendManyMemoTestnet; "" deploys none and every
	// contract call is refused with NoSuchContract. New panics on an
	// unparsable id.
	SendManyContract string
	// Tokens are SIP-010 token contracts deployed at genesis, each the
	// template of TokenContractSource rendered for its spec, with its
	// genesis balances minted. New panics on an invalid spec, two specs at
	// one contract, or one at SendManyContract.
	Tokens []TokenSpec
	// TokenAsset and TokenGenesis are a shorthand for one sBTC token:
	// TokenAsset "ADDR.contract::sbtc-token" (e.g. stacks.SBTCTestnet; the
	// token part must be TokenName) adds SBTCToken(TokenAsset, TokenGenesis)
	// to Tokens. "" adds none; New panics on an unparsable identifier or on
	// TokenGenesis without TokenAsset.
	TokenAsset   string
	TokenGenesis map[stacks.Address]uint64
	// PoXSBTCContract, when set, makes /v2/pox answer as a stacks-core 4.x
	// node in Epoch 4.0 (PoX-5): pox_5_sbtc_contract names this contract
	// (usually one of Tokens), pox_5_sbtc_registry_contract its deployer's
	// sbtc-registry, contract_id is pox-5 and the epochs run to Epoch40.
	// In mainnet mode a 4.x node names the fixed mainnet sBTC contracts
	// instead, whatever its configuration. Zero keeps the node a 3.x one,
	// whose /v2/pox has neither field.
	PoXSBTCContract stacks.ContractID
	// Seed seeds the fault-injection randomness; 0 picks a random seed.
	Seed uint64
	// Logger receives mining and drop events; nil discards them.
	Logger *slog.Logger
}

// Block is a mined (or the genesis) block. Hashes are lowercase hex
// without 0x, as /v2/info reports them.
type Block struct {
	Height         uint64
	Hash           string // block header hash: /v2/info stacks_tip
	ParentHash     string
	ConsensusHash  string // 20 bytes: stacks_tip_consensus_hash and pox_consensus
	IndexBlockHash string // SHA-512/256(Hash ‖ ConsensusHash), the ?tip= value
	BurnHeight     uint64
	TenureHeight   uint64
	Time           time.Time
	TxIDs          []stacks.TxID // in block order
}

// TxState is what the node knows about a txid.
type TxState int

const (
	// TxUnknown: never admitted, or dropped, replaced, garbage-collected or
	// swallowed by the drop-rate fault.
	TxUnknown TxState = iota
	// TxPending: in the mempool, not yet mined.
	TxPending
	// TxConfirmed: mined at TxStatus.Height.
	TxConfirmed
)

func (s TxState) String() string {
	switch s {
	case TxPending:
		return "pending"
	case TxConfirmed:
		return "confirmed"
	default:
		return "unknown"
	}
}

// TxStatus is a tx's state and, once confirmed, its block height.
type TxStatus struct {
	State  TxState
	Height uint64
}

// account is confirmed chain state for one principal.
type account struct {
	balance uint64
	nonce   uint64
	// hasBalance records that the balance key was ever written, which decides
	// whether the node has a balance proof to show.
	hasBalance bool
}

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

// poolEntry is one row of the mempool table.
type poolEntry struct {
	tx       *stacks.Transaction
	raw      []byte
	txid     stacks.TxID
	sender   string
	received uint64 // tip height at admission, for GC
	seq      uint64 // arrival order, the tie-breaker when mining
	mined    bool   // mined but kept until GC, like the real mempool table
	// call holds a send-many call's transfers (checked at admission); nil
	// for anything else.
	call []transfer
	// token is a call of the token contract (checked at admission).
	token *tokenCall
}

// spend is what the entry may take from its sender's balance: amount+fee
// for a transfer, the batch total plus fee for a contract call; saturating.
func (e *poolEntry) spend() uint64 {
	amount := e.tx.Payload.Amount
	if e.tx.ContractCall != nil {
		amount = outflow(e.call)
	}
	s, carry := bits.Add64(amount, e.tx.Auth.Fee, 0)
	if carry != 0 {
		return ^uint64(0)
	}
	return s
}

// Node is a simulated Stacks node. Create it with New.
type Node struct {
	mu  sync.Mutex
	cfg Config
	log *slog.Logger
	rng *rand.Rand

	accounts  map[string]*account
	pool      map[stacks.TxID]*poolEntry       // every mempool row, mined or not
	pending   map[string]map[uint64]*poolEntry // sender → nonce → unmined row
	nPending  int
	confirmed map[stacks.TxID]minedTx // kept forever, like the txindex table
	blockIDs  []string                // index block hash by height
	seq       uint64
	tip       Block
	genesis   string
	// past answers for earlier blocks: a front end held behind.
	past chainPast

	// onDelay, when set (tests only, before any request), is called as a
	// request starts its injected latency: a synchronisation point.
	onDelay func()

	// Fault knobs and mutable settings.
	latency   time.Duration
	errorRate float64
	dropRate  float64
	down      bool
	mainnet   bool
	synced    bool
	minAmount uint64
	feeRate   uint64

	noFeeEstimate bool

	sendMany *stacks.ContractID                   // the deployed send-many-memo, if any
	tokens   map[stacks.ContractID]*tokenContract // the deployed token contracts
	schedule poxSchedule                          // 3.x or 4.x (Config.PoXSBTCContract)
}

// New returns a node at its genesis block holding cfg.Genesis balances.
func New(cfg Config) *Node {
	if cfg.ChainID == 0 {
		cfg.ChainID = stacks.ChainIDTestnet
	}
	schedule := newPoXSchedule(cfg.PoXSBTCContract)
	if cfg.MinAmountUstx == 0 {
		cfg.MinAmountUstx = DefaultMinAmountUstx
		if schedule.pox5() {
			cfg.MinAmountUstx = Pox5MinAmountUstx
		}
	}
	if cfg.FeeRate == 0 {
		cfg.FeeRate = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	n := &Node{
		cfg:       cfg,
		log:       log,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		accounts:  make(map[string]*account),
		pool:      make(map[stacks.TxID]*poolEntry),
		pending:   make(map[string]map[uint64]*poolEntry),
		confirmed: make(map[stacks.TxID]minedTx),
		mainnet:   cfg.Mainnet,
		synced:    true,
		minAmount: cfg.MinAmountUstx,
		feeRate:   cfg.FeeRate,
		tokens:    make(map[stacks.ContractID]*tokenContract),
		schedule:  schedule,
	}
	if cfg.SendManyContract != "" {
		id, err := stacks.ParseContractID(cfg.SendManyContract)
		if err != nil {
			panic("devnode: Config.SendManyContract: " + err.Error())
		}
		n.sendMany = &id
	}
	specs := cfg.Tokens
	legacy, ok, err := legacyTokenSpec(&cfg)
	if err != nil {
		panic("devnode: " + err.Error())
	}
	if ok {
		specs = append(slices.Clip(specs), legacy)
	}
	if err := n.deployTokens(specs, ok); err != nil {
		panic("devnode: " + err.Error())
	}
	for addr, ustx := range cfg.Genesis {
		n.credit(addr.String(), ustx)
	}
	// The genesis hash depends on the configured chain id so that nodes of
	// different networks never share block hashes.
	var seedBuf [4 + 16]byte
	binary.BigEndian.PutUint32(seedBuf[:4], cfg.ChainID)
	copy(seedBuf[4:], "devnode genesis")
	g := sha512.Sum512_256(seedBuf[:])
	n.genesis = hex.EncodeToString(g[:])
	n.tip = n.makeBlock(n.genesis, 0, nil)
	n.tip.ParentHash = hex.EncodeToString(make([]byte, 32))
	n.blockIDs = []string{n.tip.IndexBlockHash}
	n.past = newChainPast(n.tip)
	return n
}

// makeBlock derives a block's hashes from its parent, height and txids.
func (n *Node) makeBlock(parent string, height uint64, txids []stacks.TxID) Block {
	burn := GenesisBurnHeight + height
	ch := n.consensusHash(burn)
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
		Time:           time.Now(),
		TxIDs:          txids,
	}
}

// consensusHash is the 20-byte consensus hash of a burn block. It is a pure
// function of the height so the stable (lagging) one needs no history.
func (n *Node) consensusHash(burnHeight uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], burnHeight)
	sum := sha512.Sum512_256(append([]byte("devnode consensus "+n.genesis), b[:]...))
	return hex.EncodeToString(sum[:20])
}

// chainID is the chain id txs must carry; callers hold n.mu.
func (n *Node) chainID() uint32 {
	if n.mainnet {
		return stacks.ChainIDMainnet
	}
	return n.cfg.ChainID
}

// credit adds ustx to a principal, saturating instead of wrapping; callers
// hold n.mu (or own n exclusively).
func (n *Node) credit(principal string, ustx uint64) {
	a := n.acct(principal)
	if a.balance > math.MaxUint64-ustx {
		n.log.Warn("devnode: balance saturated at 2^64-1", "principal", principal)
		a.balance = math.MaxUint64
	} else {
		a.balance += ustx
	}
	a.hasBalance = true
}

// acct returns the principal's account, creating it, for a change; inside
// Mine the state before the block is kept (chainPast). Callers hold n.mu.
func (n *Node) acct(principal string) *account {
	a := n.accounts[principal]
	if a == nil {
		a = &account{}
		n.accounts[principal] = a
	}
	n.past.changing(principal, *a)
	return a
}

// peek returns the principal's account without creating it.
func (n *Node) peek(principal string) account {
	if a := n.accounts[principal]; a != nil {
		return *a
	}
	return account{}
}

// Fund credits ustx to addr immediately, outside any block (a test faucet
// for the faucet).
func (n *Node) Fund(addr stacks.Address, ustx uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.credit(addr.String(), ustx)
}

// Account returns addr's confirmed balance and next nonce.
func (n *Node) Account(addr stacks.Address) (balance, nonce uint64) {
	return n.PrincipalAccount(stacks.Principal{Address: addr})
}

// PrincipalAccount is Account for any principal, including contracts.
func (n *Node) PrincipalAccount(p stacks.Principal) (balance, nonce uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.peek(p.String())
	return a.balance, a.nonce
}

// Tip returns the current chain tip.
func (n *Node) Tip() Block {
	n.mu.Lock()
	defer n.mu.Unlock()
	b := n.tip
	b.TxIDs = append([]stacks.TxID(nil), b.TxIDs...)
	return b
}

// MempoolSize is the number of pending (admitted, not yet mined) txs.
func (n *Node) MempoolSize() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nPending
}

// TxStatus reports whether txid is pending, confirmed (and where) or unknown.
func (n *Node) TxStatus(txid stacks.TxID) TxStatus {
	n.mu.Lock()
	defer n.mu.Unlock()
	if m, ok := n.confirmed[txid]; ok {
		return TxStatus{State: TxConfirmed, Height: m.height}
	}
	if e, ok := n.pool[txid]; ok && !e.mined {
		return TxStatus{State: TxPending}
	}
	return TxStatus{State: TxUnknown}
}

// TxResult returns a mined tx's result as GET /v3/transaction reports it
// ("(ok true)", "(err u1)", …), and false when txid is not mined.
func (n *Node) TxResult(txid stacks.TxID) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.confirmed[txid]
	return m.result, ok
}

// TxAborted reports whether a mined contract call was rolled back (it
// returned an err or failed a post-condition) and only paid its fee. A
// post-condition abort keeps the would-have-been result, e.g. "(ok true)",
// so TxResult alone cannot tell.
func (n *Node) TxAborted(txid stacks.TxID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.confirmed[txid].aborted
}

// ChainID returns the chain id the node currently enforces (1 in mainnet mode).
func (n *Node) ChainID() uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.chainID()
}

// SetLatency delays every RPC response by d.
func (n *Node) SetLatency(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.latency = max(d, 0)
}

// SetErrorRate makes fraction p of RPCs answer 500 text/plain instead.
func (n *Node) SetErrorRate(p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.errorRate = clamp01(p)
}

// SetDropRate makes fraction p of admitted txs answer 200 with their txid
// but never be stored, like a follower that accepts and never relays.
func (n *Node) SetDropRate(p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropRate = clamp01(p)
}

// SetDown makes the node close every connection without a response.
func (n *Node) SetDown(down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = down
}

// SetMainnet switches mainnet mode: network_id 1, bitcoin-mainnet parent,
// SP boot contracts, and only mainnet txs (version 0x00, chain id 1,
// recipients SP/SM) are admitted. Existing state is kept.
func (n *Node) SetMainnet(mainnet bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mainnet = mainnet
}

// SetSynced sets /v2/info is_fully_synced.
func (n *Node) SetSynced(synced bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.synced = synced
}

// SetMinAmountUstx sets the /v2/pox stacking minimum.
func (n *Node) SetMinAmountUstx(v uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.minAmount = v
}

// SetFeeRate sets the /v2/fees/transfer answer (µSTX per byte), which is
// also the low fee rate of /v2/fees/transaction.
func (n *Node) SetFeeRate(v uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.feeRate = v
}

// SetNoFeeEstimate makes POST /v2/fees/transaction answer the node's 400
// NoEstimateAvailable error (its estimator has no data yet) while on.
func (n *Node) SetNoFeeEstimate(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.noFeeEstimate = on
}

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
