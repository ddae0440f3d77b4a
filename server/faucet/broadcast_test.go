package faucet

import (
	"context"
	"net"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
)

// scriptedBroadcast plays its script, one step per Broadcast call, then
// passes calls through to the real client.
type scriptedBroadcast struct {
	NodeClient
	mu     sync.Mutex
	script []func(ctx context.Context, raw []byte) (string, error)
}

func (s *scriptedBroadcast) Broadcast(ctx context.Context, raw []byte) (string, error) {
	s.mu.Lock()
	var step func(context.Context, []byte) (string, error)
	if len(s.script) > 0 {
		step, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	if step == nil {
		return s.NodeClient.Broadcast(ctx, raw)
	}
	return step(ctx, raw)
}

// lostAnswer wraps the node so that the first broadcast reaches it but its
// answer is lost (a timeout) and the retry of the same bytes is refused at
// dial: the outcome stays unknown.
func lostAnswer(n NodeClient) *scriptedBroadcast {
	sb := &scriptedBroadcast{NodeClient: n}
	sb.script = []func(context.Context, []byte) (string, error){
		func(ctx context.Context, raw []byte) (string, error) {
			_, _ = sb.NodeClient.Broadcast(ctx, raw)
			return "", &node.TransportError{Call: node.CallBroadcast, Err: context.DeadlineExceeded}
		},
		func(context.Context, []byte) (string, error) {
			return "", &node.TransportError{Call: node.CallBroadcast, Err: &url.Error{Op: "Post", URL: "http://node/v2/transactions",
				Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}}
		},
	}
	return sb
}

// An attempt that may have reached the node keeps its nonce in flight even
// when a later retry of the same bytes fails definitely; the drip answers
// with the txid (success in doubt), so its rate-limit charge stays and a
// client retry is not paid a second time (server's TestAdmission…).
func TestUnknownOutcomeSurvivesLaterDefiniteFailure(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
	e.f.setNode(lostAnswer(e.f.cfg.Node))
	to := recipient(t)
	res, err := e.f.Drip(context.Background(), Request{Recipient: to})
	if err != nil {
		t.Fatalf("maybe-sent drip: %v, want its txid", err)
	}
	if !res.InDoubt {
		t.Error("result not marked in doubt")
	}
	if e.dn.MempoolSize() != 1 {
		t.Fatalf("mempool %d, want the tx the node took", e.dn.MempoolSize())
	}
	if e.dn.TxStatus(res.TxID).State != devnode.TxPending {
		t.Fatalf("answered txid %s is not the one in the mempool", res.TxID)
	}
	if st := e.f.Keys()[0]; st.InFlight != 1 || st.NextNonce != 1 {
		t.Fatalf("key %+v: the possibly accepted nonce 0 was given back", st)
	}
}

// A slot freed by a failed drip wakes a drip waiting in BusyWait at once,
// not only at the next block.
func TestReleasedSlotWakesBusyWaiter(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{Timing: Timing{MaxInFlight: 1, BusyWait: 10 * time.Second}})
	sb := &scriptedBroadcast{NodeClient: e.f.cfg.Node}
	started, fail := make(chan struct{}), make(chan struct{})
	sb.script = []func(context.Context, []byte) (string, error){
		func(context.Context, []byte) (string, error) {
			close(started)
			<-fail
			return "", &node.HTTPError{Call: node.CallBroadcast, StatusCode: 403}
		},
	}
	e.f.setNode(sb)
	waiting := make(chan struct{}, 1)
	e.f.pool.onBusyWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	first := make(chan error, 1)
	go func() {
		_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		first <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		second <- err
	}()
	<-waiting // the second drip waits for a slot
	close(fail)
	if err := <-first; err == nil {
		t.Fatal("scripted failure succeeded")
	}
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("waiting drip: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("waiting drip not woken by the freed slot")
	}
}

// A node blaming itself (ServerFailure*, e.g. no chain tip while it syncs)
// is unavailable, not a refusal of the faucet's transaction.
func TestServerFailureRejectionIsUnavailable(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
	e.f.setNode(&scriptedBroadcast{NodeClient: e.f.cfg.Node, script: []func(context.Context, []byte) (string, error){
		func(context.Context, []byte) (string, error) {
			return "", &node.RejectionError{Reason: node.ReasonServerFailureNoSuchChainTip}
		},
	}})
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if ReasonOf(err) != ReasonNodeUnavailable {
		t.Fatalf("err %v, want node_unavailable", err)
	}
	if st := e.f.Keys()[0]; st.InFlight != 0 {
		t.Fatalf("nonce kept after a definite refusal: %+v", st)
	}
}

// Readiness agrees with key choice: a key the node called dry does not count.
func TestDryKeyIsNotReady(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
	if err := e.f.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	k := e.f.pool.keys[0]
	k.mu.Lock()
	k.dry = true
	k.mu.Unlock()
	if err := e.f.Ready(context.Background()); err == nil {
		t.Fatal("ready although the only key is dry")
	}
}

// A 400 "Failed to decode" refuses the faucet's bytes: rejected, nonce freed.
func TestDecodeErrorIsRejected(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
	e.f.setNode(&scriptedBroadcast{NodeClient: e.f.cfg.Node, script: []func(context.Context, []byte) (string, error){
		func(context.Context, []byte) (string, error) {
			return "", &node.DecodeError{Call: node.CallBroadcast, Message: "Failed to decode: Failed to deserialize posted transaction"}
		},
	}})
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if ReasonOf(err) != ReasonRejected {
		t.Fatalf("err %v, want rejected", err)
	}
	if st := e.f.Keys()[0]; st.InFlight != 0 {
		t.Fatalf("nonce kept after a definite refusal: %+v", st)
	}
}

// An answered drip in doubt that the node, asked again, cannot take yet
// (its chaining limit for the key, or its own failure) stays in doubt and
// is delivered later: it is never dropped and its nonce never reused.
func TestInDoubtDripRefusedForNowIsDeliveredLater(t *testing.T) {
	for _, reason := range []string{node.ReasonTooMuchChaining, node.ReasonServerFailureDatabase} {
		t.Run(reason, func(t *testing.T) {
			e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
			e.f.setNode(&scriptedBroadcast{NodeClient: e.f.cfg.Node, script: []func(context.Context, []byte) (string, error){
				// The drip's broadcast is lost before the node sees it,
				// and the retry of the same bytes is refused at dial…
				func(context.Context, []byte) (string, error) {
					return "", &node.TransportError{Call: node.CallBroadcast, Err: context.DeadlineExceeded}
				},
				func(context.Context, []byte) (string, error) {
					return "", &node.TransportError{Call: node.CallBroadcast, Err: &url.Error{Op: "Post", URL: "http://node/v2/transactions",
						Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}}
				},
				// …and the node refuses it for now when it is resolved.
				func(context.Context, []byte) (string, error) {
					return "", &node.RejectionError{Reason: reason}
				},
			}})
			res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
			if err != nil || !res.InDoubt {
				t.Fatalf("drip: %+v %v, want success in doubt", res, err)
			}
			for range 3 {
				e.mine()
			}
			if st := e.dn.TxStatus(res.TxID); st.State != devnode.TxConfirmed {
				t.Fatalf("answered drip %s is %v, want it delivered", res.TxID, st.State)
			}
			if e.f.Dropped(res.TxID.String()) {
				t.Fatal("answered drip recorded as dropped")
			}
		})
	}
}
