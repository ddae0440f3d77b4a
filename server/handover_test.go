package server

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// handingOverEngine is the fake engine of a replica handing its keys over.
type handingOverEngine struct {
	*fakeEngine
	on atomic.Bool
}

func (e *handingOverEngine) HandingKeysOver() bool { return e.on.Load() }

// While the replica hands its keys over, every answer closes the client's
// connection, so that a kept-alive client reaches, through the Service, a
// replica that keeps its keys; otherwise connections stay open.
func TestHandingOverClosesConnections(t *testing.T) {
	e := &handingOverEngine{fakeEngine: &fakeEngine{dripRes: sentResult(t)}}
	h := newFakeServer(t, e.fakeEngine, func(c *Config) { c.Faucet = e })
	for _, on := range []bool{false, true, false} {
		e.on.Store(on)
		for _, target := range []string{"/extended/v1/faucets/stx?address=" + newRecipient(t), "/extended/v1/status"} {
			method := http.MethodPost
			if target == "/extended/v1/status" {
				method = http.MethodGet
			}
			w := serveFake(h, method, target, "")
			if got := w.Header().Get("Connection") == "close"; got != on {
				t.Errorf("handing over %v, %s %s: Connection %q", on, method, target, w.Header().Get("Connection"))
			}
		}
	}
}
