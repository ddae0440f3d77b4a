package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/stxfaucet/faucet-operator/server"
	"github.com/stxfaucet/faucet-operator/server/peer"
)

// peerStore is a shared store's side of the peer path: where each replica
// answers, and who holds a key (*store.Postgres).
type peerStore interface {
	peer.Locator
	AdvertisePeer(ctx context.Context, url string) error
	ForgetPeer(ctx context.Context) error
}

// peerSecretPurpose names the HMAC key the replicas sign forwarded
// requests with, derived from the Bitcoin key.
const peerSecretPurpose = "peer requests"

// btcForHTTP is the BTC engine the HTTP layer uses: with replicas on a
// shared store and a peer listener, one that forwards BTC drips to the
// replica holding the Bitcoin key; otherwise this process's engine (nil
// when BTC is off). It also returns the peer listener's task.
func (r *serveRun) btcForHTTP() (server.BTCFaucet, task, error) {
	idle := task{"peer listener", func(ctx context.Context) error { <-ctx.Done(); return nil }}
	ps := r.state.peers
	if r.btc == nil || ps == nil || r.state.owner == nil || r.o.HTTP.PeerListen == "" {
		return btcOrNil(r.btc), idle, nil
	}
	auth, err := peer.NewAuth(r.btc.DeriveSecret(peerSecretPurpose))
	if err != nil {
		return nil, idle, err
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", r.o.HTTP.PeerListen)
	if err != nil {
		return nil, idle, fmt.Errorf("--peer-listen %s: %w", r.o.HTTP.PeerListen, err)
	}
	r.stops = append(r.stops, func() { _ = ln.Close() })
	self := r.o.HTTP.AdvertisedPeerURL(os.Getenv, ln.Addr())
	fwd, err := peer.New(peer.Config{
		Local: r.btc, Auth: auth, Locate: ps, Key: r.btc.Address().String(), Self: self,
		Clock: r.clk, Logger: r.log.With("component", "btc-peer"),
	})
	if err != nil {
		return nil, idle, err
	}
	h := peer.Handler(peer.HandlerConfig{Auth: auth, BTC: r.btc, Clock: r.clk, Logger: r.log.With("component", "btc-peer")})
	run := func(ctx context.Context) error { return r.servePeers(ctx, ps, ln, self, h) }
	return fwd, task{"peer listener", run}, nil
}

// servePeers advertises self and serves the other replicas on ln until
// ctx ends (the engines' context: the replica keeps paying forwarded drips
// while it holds the Bitcoin key, lame duck included).
func (r *serveRun) servePeers(ctx context.Context, ps peerStore, ln net.Listener, self string, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	r.advertise(ctx, ps, ln, self)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("peer listener: %w", err)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = ps.ForgetPeer(fctx)
	if err := srv.Shutdown(fctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("peer listener: shutdown: %w", err)
	}
	return nil
}

// advertise records self as where the others reach this replica, retrying
// every second while the store is down, until it takes or ctx ends.
func (r *serveRun) advertise(ctx context.Context, ps peerStore, ln net.Listener, self string) {
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := ps.AdvertisePeer(actx, self)
		cancel()
		if err == nil {
			r.log.Info("peer listener serving", "listen", ln.Addr().String(), "url", self)
			return
		}
		r.log.Warn("cannot record this replica's peer URL yet; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-r.clk.After(time.Second):
		}
	}
}
