package devnode

import "slices"

// chainPast is what the node keeps to answer as of an earlier block, as a
// front end held behind does: every block's header, and each principal's
// account before each block that changed it, MaxBehind blocks back. The
// node's lock guards it.
type chainPast struct {
	headers []Block                    // by height, without txids
	before  map[string][]accountBefore // oldest first
	mining  uint64                     // the height Mine is building, 0 outside it
}

// accountBefore is a principal's account before block height changed it.
type accountBefore struct {
	height uint64
	account
}

func newChainPast(genesis Block) chainPast {
	return chainPast{headers: []Block{genesis}, before: map[string][]accountBefore{}}
}

// changing keeps a's state before the block being mined changes it; it
// does nothing outside Mine or once the block has kept it.
func (p *chainPast) changing(principal string, a account) {
	if p.mining == 0 {
		return
	}
	h := p.before[principal]
	if len(h) == 0 || h[len(h)-1].height != p.mining {
		p.before[principal] = append(h, accountBefore{height: p.mining, account: a})
	}
}

// mined keeps the new tip's header.
func (p *chainPast) mined(tip Block) {
	tip.TxIDs = nil
	p.headers = append(p.headers, tip)
}

// prune forgets account states no front end can ask for any more; it
// walks every principal, so only every 64 blocks.
func (p *chainPast) prune(tip uint64) {
	if tip <= MaxBehind || tip%64 != 0 {
		return
	}
	for principal, hist := range p.before {
		i := 0
		for i < len(hist) && hist[i].height+MaxBehind < tip {
			i++
		}
		switch {
		case i == len(hist):
			delete(p.before, principal)
		case i > 0:
			p.before[principal] = slices.Clone(hist[i:])
		}
	}
}

// account is the principal's account as of block h, given its current
// state (the tip's, when h is at or above it).
func (p *chainPast) account(principal string, h uint64, current account) account {
	hist := p.before[principal]
	for i := len(hist) - 1; i >= 0 && hist[i].height > h; i-- {
		current = hist[i].account
	}
	return current
}

// header is the block at height h, or tip when h is at or above it.
func (p *chainPast) header(h uint64, tip Block) Block {
	if h >= tip.Height {
		return tip
	}
	return p.headers[h]
}
