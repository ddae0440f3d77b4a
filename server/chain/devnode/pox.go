package devnode

import (
	"encoding/hex"
	"math"

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

	// epochs are the regtest fixture's burn-height schedule. Each Epoch2x
	// start is distinct because consumers derive PoX unlock heights from them.
	epochs = []node.Epoch{
		{EpochID: "Epoch10", StartHeight: 0, EndHeight: 0, NetworkEpoch: 0},
		{EpochID: "Epoch20", StartHeight: 0, EndHeight: 102, BlockLimit: limitEpoch20, NetworkEpoch: 0},
		{EpochID: "Epoch2_05", StartHeight: 102, EndHeight: 103, BlockLimit: limitEpoch20, NetworkEpoch: 5},
		{EpochID: "Epoch21", StartHeight: 103, EndHeight: 105, BlockLimit: limitEpoch20, NetworkEpoch: 6},
		{EpochID: "Epoch22", StartHeight: 105, EndHeight: 106, BlockLimit: limitEpoch20, NetworkEpoch: 7},
		{EpochID: "Epoch23", StartHeight: 106, EndHeight: 107, BlockLimit: limitEpoch20, NetworkEpoch: 8},
		{EpochID: "Epoch24", StartHeight: 107, EndHeight: 132, BlockLimit: limitEpoch20, NetworkEpoch: 9},
		{EpochID: "Epoch25", StartHeight: 132, EndHeight: 152, BlockLimit: limitEpoch25, NetworkEpoch: 10},
		{EpochID: "Epoch30", StartHeight: 152, EndHeight: math.MaxInt64, BlockLimit: limitEpoch25, NetworkEpoch: 11},
	}

	// poxContracts are (name, activation burn height, first reward cycle).
	poxContracts = []struct {
		name       string
		activation uint64
		firstCycle uint64
	}{
		{"pox", 0, 0},
		{"pox-2", 104, 6},
		{"pox-3", 107, 6},
		{"pox-4", 132, 7},
	}

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

// epochAt returns the epoch containing burn height h.
func epochAt(h uint64) node.Epoch {
	for _, e := range epochs {
		if e.StartHeight <= h && h < e.EndHeight {
			return e
		}
	}
	return epochs[len(epochs)-1]
}

// bootDeployer is the boot contract address of the network.
func bootDeployer(mainnet bool) string {
	if mainnet {
		return "SP000000000000000000002Q6VF78"
	}
	return "ST000000000000000000002AMW42H"
}

// info builds /v2/info from the current state.
func (n *Node) info() *node.Info {
	n.mu.Lock()
	defer n.mu.Unlock()
	tip := n.tip
	stable := tip.BurnHeight - min(tip.BurnHeight, stableConfirmations)
	peer, parent := peerVersionTestnet, parentNetworkRegtest
	if n.mainnet {
		peer, parent = peerVersionMainnet, parentNetworkMainnet
	}
	tenure, synced := tip.TenureHeight, n.synced
	return &node.Info{
		PeerVersion:            peer | uint32(epochAt(tip.BurnHeight).NetworkEpoch),
		PoxConsensus:           tip.ConsensusHash, // one tenure per burn block
		BurnBlockHeight:        tip.BurnHeight,
		StablePoxConsensus:     n.consensusHash(stable),
		StableBurnBlockHeight:  stable,
		ServerVersion:          ServerVersion,
		NetworkID:              n.chainID(),
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
func (n *Node) pox() *node.PoXInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	burn := n.tip.BurnHeight
	var supply uint64
	for _, a := range n.accounts {
		supply = addSat(supply, a.balance)
	}
	minAmount, mainnet := n.minAmount, n.mainnet

	cycle := (burn - firstBurnchainBlockHeight) / cycleLength
	next := cycle + 1
	rewardStart := firstBurnchainBlockHeight + next*cycleLength
	prepareStart := rewardStart - prepareLength
	deployer := bootDeployer(mainnet)

	versions := make([]node.ContractVersion, len(poxContracts))
	for i, c := range poxContracts {
		versions[i] = node.ContractVersion{
			ContractID:                     deployer + "." + c.name,
			ActivationBurnchainBlockHeight: c.activation,
			FirstRewardCycleID:             c.firstCycle,
		}
	}
	return &node.PoXInfo{
		ContractID:                  deployer + ".pox-4",
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
			MinIncrementUstx:             supply / 8000,
			PreparePhaseStartBlockHeight: prepareStart,
			BlocksUntilPreparePhase:      int64(prepareStart) - int64(burn),
			RewardPhaseStartBlockHeight:  rewardStart,
			BlocksUntilRewardPhase:       rewardStart - burn,
		},
		Epochs:             append([]node.Epoch(nil), epochs...),
		CurrentEpoch:       epochAt(burn).EpochID,
		MinAmountUstx:      minAmount,
		PrepareCycleLength: prepareLength,
		RewardCycleID:      cycle,
		RewardCycleLength:  cycleLength,
		NextRewardCycleIn:  rewardStart - burn,
		ContractVersions:   versions,
	}
}

func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
