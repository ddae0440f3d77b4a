package devnode

import (
	"log/slog"
	"math"
	"sync"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// account is confirmed chain state for one principal.
type account struct {
	balance uint64
	nonce   uint64
	// hasBalance records that the balance key was ever written, which decides
	// whether the node has a balance proof to show.
	hasBalance bool
}

// ledger is the confirmed STX state: each principal's balance and nonce,
// and (accountHistory) their states before recent blocks, for a front end
// held behind.
type ledger struct {
	mu       *sync.Mutex // the node's state lock
	log      *slog.Logger
	accounts map[string]*account
	past     accountHistory
}

func newLedger(mu *sync.Mutex, log *slog.Logger) *ledger {
	return &ledger{mu: mu, log: log, accounts: make(map[string]*account), past: newAccountHistory()}
}

// Fund credits ustx to addr immediately, outside any block (a test faucet
// for the faucet).
func (l *ledger) Fund(addr stacks.Address, ustx uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.credit(addr.String(), ustx)
}

// Account returns addr's confirmed balance and next nonce.
func (l *ledger) Account(addr stacks.Address) (balance, nonce uint64) {
	return l.PrincipalAccount(stacks.Principal{Address: addr})
}

// PrincipalAccount is Account for any principal, including contracts.
func (l *ledger) PrincipalAccount(p stacks.Principal) (balance, nonce uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.peek(p.String())
	return a.balance, a.nonce
}

// accountAt is the principal's account as of block h (atTip: the tip).
func (l *ledger) accountAt(principal string, h uint64) account {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.past.account(principal, h, l.peek(principal))
}

// credit adds ustx to a principal, saturating instead of wrapping; callers
// hold the state lock (or own the ledger exclusively).
func (l *ledger) credit(principal string, ustx uint64) {
	a := l.acct(principal)
	if a.balance > math.MaxUint64-ustx {
		l.log.Warn("devnode: balance saturated at 2^64-1", "principal", principal)
		a.balance = math.MaxUint64
	} else {
		a.balance += ustx
	}
	a.hasBalance = true
}

// acct returns the principal's account, creating it, for a change; inside
// a block the state before it is kept (accountHistory). Callers hold the
// state lock.
func (l *ledger) acct(principal string) *account {
	a := l.accounts[principal]
	if a == nil {
		a = &account{}
		l.accounts[principal] = a
	}
	l.past.changing(principal, *a)
	return a
}

// peek returns the principal's account without creating it. Callers hold
// the state lock.
func (l *ledger) peek(principal string) account {
	if a := l.accounts[principal]; a != nil {
		return *a
	}
	return account{}
}

// supply is the sum of all balances, saturating. Callers hold the state
// lock.
func (l *ledger) supply() uint64 {
	var s uint64
	for _, a := range l.accounts {
		s = addSat(s, a.balance)
	}
	return s
}

// beginBlock starts keeping the states block height changes; endBlock
// stops, and forgets what no front end can ask for any more. Callers hold
// the state lock.
func (l *ledger) beginBlock(height uint64) { l.past.mining = height }

func (l *ledger) endBlock(height uint64) {
	l.past.mining = 0
	l.past.prune(height)
}
