package journal

import (
	"context"
	"errors"
	"net"
)

// NeverSent reports whether err proves a request did not reach the node:
// the connection was refused at dial, or the client held the request back
// (an error with a NotSent method that says so, such as a node client's
// wait after a 429). Any other failure after the request left may hide an
// answer that was lost.
func NeverSent(err error) bool {
	if ns, ok := errors.AsType[interface {
		error
		NotSent() bool
	}](err); ok && ns.NotSent() {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Cut reports whether err ended a request that may have reached the node
// before its answer came: the caller's deadline or cancellation, unless
// the request never left.
func Cut(err error) bool {
	return (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && !NeverSent(err)
}

// Hooked is a Chain that calls Before ahead of every Send: a test's seam
// between the record and the broadcast. An error from Before stops the
// send there, as a crash would: the entry stays recorded and unsent, and
// the payer sees it in doubt (Sent.Err wraps Before's error).
type Hooked struct {
	Chain
	Before func(raw []byte) error
}

// Send runs Before, then the chain's Send.
func (h Hooked) Send(ctx context.Context, raw []byte) error {
	if h.Before != nil {
		if err := h.Before(raw); err != nil {
			return &stopped{err}
		}
	}
	return h.Chain.Send(ctx, raw)
}

// Judge keeps an entry whose send a hook stopped: a crash there leaves the
// record, not the broadcast.
func (h Hooked) Judge(err error) Verdict {
	var s *stopped
	if errors.As(err, &s) {
		return InDoubt
	}
	return h.Chain.Judge(err)
}

// stopped is a send a hook stopped before it left.
type stopped struct{ err error }

func (s *stopped) Error() string { return "stopped before the send: " + s.err.Error() }
func (s *stopped) Unwrap() error { return s.err }
