package devnode

import (
	"encoding/hex"
	"math"
	"slices"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// PoX parameters of the regtest node captured in the v2-pox-regtest-pox4
// fixture: 20-block reward cycles (15 reward + 5 prepare) from burn height 0.
const (
	firstBurnchainBlockHeight = 0
	prepareLength             = 5
	rewardLength              = 15
	cycleLength               = prepareLength + rewardLength
	rewardSlots               = 30
)

// Peer version majors (libcommon.rs), OR'd with the epoch's network byte.
const (
	peerVersionMainnet uint32 = 0x18000000
	peerVersionTestnet uint32 = 0xfacade00
)

var (
	limitEpoch20 = node.ExecutionCost{WriteLength: 150_000_000, WriteCount: 50_000, ReadLength: 1_000_000_000, ReadCount: 50_000, Runtime: 100_000_000_000}
	limitEpoch25 = node.ExecutionCost{WriteLength: 15_000_000, WriteCount: 15_000, ReadLength: 100_000_000, ReadCount: 15_000, Runtime: 5_000_000_000}
	// limitEpoch40 is BLOCK_LIMIT_MAINNET_40: the read limits doubled.
	limitEpoch40 = node.ExecutionCost{WriteLength: 15_000_000, WriteCount: 15_000, ReadLength: 200_000_000, ReadCount: 30_000, Runtime: 5_000_000_000}

	// epochs2x is the regtest fixture's burn-height schedule up to Epoch 3.0.
	// Each Epoch2x start is distinct because consumers derive PoX unlock
	// heights from them.
	epochs2x = []node.Epoch{
		{EpochID: "Epoch10", StartHeight: 0, EndHeight: 0, NetworkEpoch: 0},
		{EpochID: "Epoch20", StartHeight: 0, EndHeight: 102, BlockLimit: limitEpoch20, NetworkEpoch: 0},
		{EpochID: "Epoch2_05", StartHeight: 102, EndHeight: 103, BlockLimit: limitEpoch20, NetworkEpoch: 5},
		{EpochID: "Epoch21", StartHeight: 103, EndHeight: 105, BlockLimit: limitEpoch20, NetworkEpoch: 6},
		{EpochID: "Epoch22", StartHeight: 105, EndHeight: 106, BlockLimit: limitEpoch20, NetworkEpoch: 7},
		{EpochID: "Epoch23", StartHeight: 106, EndHeight: 107, BlockLimit: limitEpoch20, NetworkEpoch: 8},
		{EpochID: "Epoch24", StartHeight: 107, EndHeight: 132, BlockLimit: limitEpoch20, NetworkEpoch: 9},
		{EpochID: "Epoch25", StartHeight: 132, EndHeight: 152, BlockLimit: limitEpoch25, NetworkEpoch: 10},
	}

	// epochs3x is the regtest fixture's schedule: a 3.x node, in Epoch30
	// from burn height 152 on.
	epochs3x = append(slices.Clip(epochs2x),
		node.Epoch{EpochID: "Epoch30", StartHeight: 152, EndHeight: math.MaxInt64, BlockLimit: limitEpoch25, NetworkEpoch: 11})

	// epochs4x is the same chain on a 4.x node, compressed the way the PoX-5
	// testnet configures it (epochs 3.0 to 3.3 one block each, a longer
	// 3.4, then 4.0): Epoch40 starts at pox5Activation, before
	// GenesisBurnHeight, so the node is in Epoch 4.0 from genesis.
	epochs4x = append(slices.Clip(epochs2x),
		node.Epoch{EpochID: "Epoch30", StartHeight: 152, EndHeight: 153, BlockLimit: limitEpoch25, NetworkEpoch: 11},
		node.Epoch{EpochID: "Epoch31", StartHeight: 153, EndHeight: 154, BlockLimit: limitEpoch25, NetworkEpoch: 12},
		node.Epoch{EpochID: "Epoch32", StartHeight: 154, EndHeight: 155, BlockLimit: limitEpoch25, NetworkEpoch: 13},
		node.Epoch{EpochID: "Epoch33", StartHeight: 155, EndHeight: 156, BlockLimit: limitEpoch25, NetworkEpoch: 14},
		node.Epoch{EpochID: "Epoch34", StartHeight: 156, EndHeight: pox5Activation, BlockLimit: limitEpoch25, NetworkEpoch: 15},
		node.Epoch{EpochID: "Epoch40", StartHeight: pox5Activation, EndHeight: math.MaxInt64, BlockLimit: limitEpoch40, NetworkEpoch: 16})

	// poxContracts3x are a 3.x node's contract_versions (getpoxinfo.rs:
	// the activation heights of the regtest fixture); a 4.x node adds pox-5.
	poxContracts3x = []poxContract{
		{"pox", 0, 0},
		{"pox-2", 104, 6},
		{"pox-3", 107, 6},
		{"pox-4", 132, 7},
	}
	poxContracts4x = append(slices.Clip(poxContracts3x),
		poxContract{"pox-5", pox5Activation, pox5Activation/cycleLength + 1})

	// The contracts a 4.x node names on mainnet, whatever its configuration
	// (signer_set.rs SBTC_TOKEN_MAINNET_CONTRACT, SBTC_REGISTRY_MAINNET_CONTRACT).
	sbtcMainnet         = mustContractID("SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token")
	sbtcRegistryMainnet = mustContractID("SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-registry")

	// nodeKey is a fixed identity for node_public_key(_hash).
	nodePublicKey, nodePublicKeyHash = func() (string, string) {
		k, err := stacks.ParsePrivateKey("d3ec5b1f6d8d4d3c9e6b8a7f5c4e3d2c1b0a99887766554433221100ffeeddcc01")
		if err != nil {
			panic(err)
		}
		pub := k.PublicKey()
		h := stacks.Hash160(pub)
		return hex.EncodeToString(pub), hex.EncodeToString(h[:])
	}()
)

// pox5Activation is a 4.x node's pox_5_activation_height, the Epoch40
// start: in reward cycle 10, so cycle 11, where the node starts, is PoX-5's
// first.
const pox5Activation = 202

// sbtcRegistryName is the registry contract's name beside the sBTC token,
// as the sBTC deployments (testnet and mainnet) name it.
const sbtcRegistryName = "sbtc-registry"

// poxContract is one entry of contract_versions: a PoX contract's name,
// activation burn height and first reward cycle.
type poxContract struct {
	name       string
	activation uint64
	firstCycle uint64
}

// poxSchedule is what /v2/pox reports of the node's release line: its
// epochs and PoX contracts, and on a 4.x node the sBTC contract
// (Config.PoXSBTCContract), nil on a 3.x node.
type poxSchedule struct {
	epochs    []node.Epoch
	contracts []poxContract
	sbtc      *stacks.ContractID
}

func newPoXSchedule(sbtc stacks.ContractID) poxSchedule {
	if sbtc == (stacks.ContractID{}) {
		return poxSchedule{epochs: epochs3x, contracts: poxContracts3x}
	}
	return poxSchedule{epochs: epochs4x, contracts: poxContracts4x, sbtc: &sbtc}
}

// pox5 reports a 4.x node, on which PoX-5 is active.
func (s poxSchedule) pox5() bool { return s.sbtc != nil }

// epochAt returns the epoch containing burn height h.
func (s poxSchedule) epochAt(h uint64) node.Epoch {
	for _, e := range s.epochs {
		if e.StartHeight <= h && h < e.EndHeight {
			return e
		}
	}
	return s.epochs[len(s.epochs)-1]
}

// activeContract is PoxConstants::active_pox_contract: the newest contract
// whose activation height the burn height has passed.
func (s poxSchedule) activeContract(burn uint64) string {
	for _, c := range slices.Backward(s.contracts) {
		if burn > c.activation {
			return c.name
		}
	}
	return s.contracts[0].name
}

// sbtcContracts are pox_5_sbtc_contract and pox_5_sbtc_registry_contract
// (signer_set.rs pox_5_sbtc_contract, pox_5_sbtc_registry_contract): ""
// on a 3.x node, which omits both; the fixed mainnet contracts in mainnet
// mode; else the configured token and its deployer's registry.
func (s poxSchedule) sbtcContracts(mainnet bool) (token, registry string) {
	switch {
	case s.sbtc == nil:
		return "", ""
	case mainnet:
		return sbtcMainnet.String(), sbtcRegistryMainnet.String()
	}
	reg := stacks.ContractID{Address: s.sbtc.Address, Name: sbtcRegistryName}
	return s.sbtc.String(), reg.String()
}

func mustContractID(s string) stacks.ContractID {
	id, err := stacks.ParseContractID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// bootDeployer is the boot contract address of the network.
func bootDeployer(mainnet bool) string {
	if mainnet {
		return "SP000000000000000000002Q6VF78"
	}
	return "ST000000000000000000002AMW42H"
}

// info builds /v2/info as a node whose tip is block h answers it (atTip:
// the current tip).
func (s *rpcServer) info(h uint64) *node.Info {
	tip := s.chain.header(h)
	k := s.faults.snapshot()
	stable := tip.BurnHeight - min(tip.BurnHeight, stableConfirmations)
	peer, parent := peerVersionTestnet, parentNetworkRegtest
	if k.mainnet {
		peer, parent = peerVersionMainnet, parentNetworkMainnet
	}
	tenure, synced := tip.TenureHeight, k.synced
	return &node.Info{
		PeerVersion:            peer | uint32(s.schedule.epochAt(tip.BurnHeight).NetworkEpoch),
		PoxConsensus:           tip.ConsensusHash, // one tenure per burn block
		BurnBlockHeight:        tip.BurnHeight,
		StablePoxConsensus:     s.chain.consensusHash(stable),
		StableBurnBlockHeight:  stable,
		ServerVersion:          ServerVersion,
		NetworkID:              k.chainID(),
		ParentNetworkID:        parent,
		StacksTipHeight:        tip.Height,
		StacksTip:              tip.Hash,
		StacksTipConsensusHash: tip.ConsensusHash,
		GenesisChainstateHash:  genesisChainstateHash,
		TenureHeight:           &tenure,
		IsFullySynced:          &synced,
		NodePublicKey:          nodePublicKey,
		NodePublicKeyHash:      nodePublicKeyHash,
		StackerDBs:             []string{},
	}
}

// pox builds /v2/pox (getpoxinfo.rs) for the current burn height. Nothing
// is stacked in the simulation, so stacked_ustx is 0.
func (s *rpcServer) pox() *node.PoXInfo {
	burn, supply := s.chain.poxState()
	k := s.faults.snapshot()
	minAmount, mainnet := k.minAmount, k.mainnet

	cycle := (burn - firstBurnchainBlockHeight) / cycleLength
	next := cycle + 1
	rewardStart := firstBurnchainBlockHeight + next*cycleLength
	prepareStart := rewardStart - prepareLength
	deployer := bootDeployer(mainnet)

	versions := make([]node.ContractVersion, len(s.schedule.contracts))
	for i, c := range s.schedule.contracts {
		versions[i] = node.ContractVersion{
			ContractID:                     deployer + "." + c.name,
			ActivationBurnchainBlockHeight: c.activation,
			FirstRewardCycleID:             c.firstCycle,
		}
	}
	// pox-4's get-pox-info min-amount-ustx is the liquid supply / 8000 on
	// testnet; pox-5's is SIGNER_SET_MIN_USTX.
	minIncrement := supply / 8000
	if s.schedule.pox5() {
		minIncrement = Pox5MinAmountUstx
	}
	sbtc, registry := s.schedule.sbtcContracts(mainnet)
	return &node.PoXInfo{
		ContractID:                  deployer + "." + s.schedule.activeContract(burn),
		PoxActivationThresholdUstx:  supply / 100,
		FirstBurnchainBlockHeight:   firstBurnchainBlockHeight,
		CurrentBurnchainBlockHeight: burn,
		PreparePhaseBlockLength:     prepareLength,
		RewardPhaseBlockLength:      rewardLength,
		RewardSlots:                 rewardSlots,
		TotalLiquidSupplyUstx:       supply,
		CurrentCycle: node.CurrentCycleInfo{
			ID:               cycle,
			MinThresholdUstx: minAmount,
			IsPoxActive:      true,
		},
		NextCycle: node.NextCycleInfo{
			ID:                           next,
			MinThresholdUstx:             minAmount,
			MinIncrementUstx:             minIncrement,
			PreparePhaseStartBlockHeight: prepareStart,
			BlocksUntilPreparePhase:      int64(prepareStart) - int64(burn),
			RewardPhaseStartBlockHeight:  rewardStart,
			BlocksUntilRewardPhase:       rewardStart - burn,
		},
		Epochs:             slices.Clone(s.schedule.epochs),
		CurrentEpoch:       s.schedule.epochAt(burn).EpochID,
		MinAmountUstx:      minAmount,
		PrepareCycleLength: prepareLength,
		RewardCycleID:      cycle,
		RewardCycleLength:  cycleLength,
		NextRewardCycleIn:  rewardStart - burn,
		ContractVersions:   versions,
		// Empty on a 3.x node: omitted, as such a node does not send them.
		Pox5SBTCContract:         sbtc,
		Pox5SBTCRegistryContract: registry,
	}
}

func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
