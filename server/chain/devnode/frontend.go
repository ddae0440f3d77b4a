package devnode

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
)

// MaxBehind is how many blocks a front end can be held behind the tip: the
// node keeps account history that far back.
const MaxBehind = 128

// atTip reads the current state rather than a past block's.
const atTip = math.MaxUint64

// FrontEnd is one RPC front end of a node's chain: to a client, one node
// among several that share a chain and a mempool, with faults of its own
// (stopped, hung, slow, held behind, not relaying broadcasts) that leave
// the other front ends as they are. Node.Handler is the node's own front
// end; the Node's fault knobs apply to every front end.
type FrontEnd struct {
	rpc *rpcServer

	mu      sync.Mutex
	stopped bool
	hung    chan struct{} // closed when Hang(false) releases held requests
	latency time.Duration
	behind  uint64
	drop    bool
	served  map[string]int // requests answered, by node client call name
}

// Handler returns the front end's RPC handler.
func (f *FrontEnd) Handler() http.Handler { return http.HandlerFunc(f.serveHTTP) }

// Stop makes the front end close every connection without an answer, as a
// stopped node's address does; Start undoes it.
func (f *FrontEnd) Stop()  { f.set(func() { f.stopped = true }) }
func (f *FrontEnd) Start() { f.set(func() { f.stopped = false }) }

// Hang holds every request until its client gives up (or Hang(false)), as
// a node stuck in a long pause does.
func (f *FrontEnd) Hang(on bool) {
	f.set(func() {
		switch {
		case on && f.hung == nil:
			f.hung = make(chan struct{})
		case !on && f.hung != nil:
			close(f.hung)
			f.hung = nil
		}
	})
}

// SetLatency delays each answer of this front end by d.
func (f *FrontEnd) SetLatency(d time.Duration) { f.set(func() { f.latency = max(d, 0) }) }

// HoldBehind makes the front end answer as a node whose tip is blocks
// behind the chain's (at most MaxBehind; 0 catches it up): /v2/info shows
// the older tip, accounts their state then, and transactions mined later
// are unknown. Other reads, and the admission of broadcasts, use the
// current state.
func (f *FrontEnd) HoldBehind(blocks uint64) {
	f.set(func() { f.behind = min(blocks, MaxBehind) })
}

// DropBroadcasts makes the front end check and answer broadcasts as usual
// but keep none: a follower that accepts and does not relay.
func (f *FrontEnd) DropBroadcasts(on bool) { f.set(func() { f.drop = on }) }

// Served is how many requests of a call (node.CallInfo, node.CallAccount,
// node.CallBroadcast, …) the front end answered.
func (f *FrontEnd) Served(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.served[call]
}

func (f *FrontEnd) set(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

func (f *FrontEnd) serveHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	stopped, hung, latency, behind, drop := f.stopped, f.hung, f.latency, f.behind, f.drop
	f.mu.Unlock()
	if stopped {
		hangUp(w)
		return
	}
	if hung != nil {
		select {
		case <-hung:
		case <-r.Context().Done():
			return
		}
	}
	if latency > 0 && !wait(f.rpc.clock, r, latency) {
		return
	}
	f.mu.Lock()
	f.served[callOf(r)]++
	f.mu.Unlock()

	path, get := r.URL.Path, r.Method == http.MethodGet
	view := uint64(atTip)
	if behind > 0 {
		tip := f.rpc.chain.header(atTip).Height
		view = tip - min(behind, tip)
	}
	switch {
	case view != atTip && get && path == "/v2/info":
		writeJSON(w, http.StatusOK, f.rpc.info(view))
	case view != atTip && get && accountPath.MatchString(path):
		f.rpc.getAccount(w, r, accountPath.FindStringSubmatch(path)[1], view)
	case view != atTip && get && transactionPath.MatchString(path) && r.ContentLength <= 0:
		f.rpc.getTransaction(w, transactionPath.FindStringSubmatch(path)[1], view)
	case drop && r.Method == http.MethodPost && path == "/v2/transactions":
		f.rpc.postTransaction(w, r, true)
	default:
		f.rpc.serveHTTP(w, r)
	}
}

// callOf names a request as the node client's observer does.
func callOf(r *http.Request) string {
	path := r.URL.Path
	switch {
	case path == "/v2/info":
		return node.CallInfo
	case path == "/v2/pox":
		return node.CallPoX
	case path == "/v2/transactions":
		return node.CallBroadcast
	case path == "/v2/fees/transfer":
		return node.CallFeeTransfer
	case path == "/v2/fees/transaction":
		return node.CallFeeTransaction
	case accountPath.MatchString(path):
		return node.CallAccount
	case unconfirmedPath.MatchString(path):
		return node.CallMempoolTx
	case transactionPath.MatchString(path):
		return node.CallTransaction
	case callReadPath.MatchString(path):
		return node.CallReadOnly
	default:
		return "other"
	}
}
