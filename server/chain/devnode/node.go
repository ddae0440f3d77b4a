package devnode

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"

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
	// TokenAsset "ADDR.contract::sbtc-token" (e.g. settings.SBTCTestnet; the
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
	// Clock times blocks, drives Run's block ticker and the injected
	// latency; nil means clock.RealClock{}.
	Clock clock.WithTicker
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

// Node is a simulated Stacks node. Create it with New.
//
// It is a facade over parts that each hold their own state: the chain
// (blocks, txindex, mining), the ledger (STX balances and nonces), the
// mempool (admission), the contracts (send-many and the SIP-010 tokens),
// the fault knobs and the RPC front. The embedded parts' exported methods
// (Mine, Account, Submit, FundToken, SetDown, …) are the Node's API.
type Node struct {
	*chain
	*ledger
	*mempool
	*contracts
	*faults

	rpc *rpcServer
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
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}

	// One lock guards the chain state, which a block or an admission
	// changes across the chain, ledger, mempool and contracts at once.
	mu := new(sync.Mutex)
	f := newFaults(cfg, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	l := newLedger(mu, log)
	c, err := newContracts(mu, log, l, &cfg)
	if err != nil {
		panic("devnode: " + err.Error())
	}
	for addr, ustx := range cfg.Genesis {
		l.credit(addr.String(), ustx)
	}
	pool := newMempool(mu, log, l, c, f, cfg.ConfirmedBalanceOnly)
	ch := newChain(mu, log, clk, cfg, l, pool, c)
	return &Node{
		chain:     ch,
		ledger:    l,
		mempool:   pool,
		contracts: c,
		faults:    f,
		rpc: &rpcServer{
			clock: clk, faults: f, chain: ch, ledger: l, pool: pool, contracts: c,
			schedule: schedule, noTxIndex: cfg.NoTxIndex,
		},
	}
}

// Handler returns the RPC handler. It is safe for concurrent use.
func (n *Node) Handler() http.Handler { return http.HandlerFunc(n.rpc.serveHTTP) }

// FrontEnd returns a new front end of n with no fault set.
func (n *Node) FrontEnd() *FrontEnd { return &FrontEnd{rpc: n.rpc, served: map[string]int{}} }
