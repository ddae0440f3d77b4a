package devnode

import "slices"

// accountHistory is what the ledger keeps to answer as of an earlier
// block, as a front end held behind does: each principal's account before
// each block that changed it, MaxBehind blocks back. (The chain keeps the
// block headers.) The state lock guards it.
type accountHistory struct {
	before map[string][]accountBefore // oldest first
	mining uint64                     // the height Mine is building, 0 outside it
}

// accountBefore is a principal's account before block height changed it.
type accountBefore struct {
	height uint64
	account
}

func newAccountHistory() accountHistory {
	return accountHistory{before: map[string][]accountBefore{}}
}

// changing keeps a's state before the block being mined changes it; it
// does nothing outside Mine or once the block has kept it.
func (p *accountHistory) changing(principal string, a account) {
	if p.mining == 0 {
		return
	}
	h := p.before[principal]
	if len(h) == 0 || h[len(h)-1].height != p.mining {
		p.before[principal] = append(h, accountBefore{height: p.mining, account: a})
	}
}

// prune forgets account states no front end can ask for any more; it
// walks every principal, so only every 64 blocks.
func (p *accountHistory) prune(tip uint64) {
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
func (p *accountHistory) account(principal string, h uint64, current account) account {
	hist := p.before[principal]
	for i := len(hist) - 1; i >= 0 && hist[i].height > h; i-- {
		current = hist[i].account
	}
	return current
}
