package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// dispense is the one path a valid drip of any asset and any door takes:
//
//  1. a suspended faucet refuses at once (no proof of work asked for);
//  2. Check: the abuse checks (deny list, API token, proof of work, balance cap);
//  3. Reserve: a slot in each rate-limit bucket the request counts against;
//  4. pay: the asset's kind pays it;
//  5. Release: a drip that failed sent nothing, so its slots go back;
//  6. Dispensed: a paid anonymous drip feeds the adaptive proof of work,
//     and every drip the kind answered is written to the history.
//
// It logs and counts the outcome; on failure it returns what the caller
// renders in its own shape.
func (s *server) dispense(h http.Header, r *http.Request, k ask) (*paid, *dripFailure) {
	a := k.asset
	adm := k.admission()
	if ri := infoFrom(r.Context()); ri != nil {
		adm.ClientIP = ri.clientIP
	}
	// The drip outlives a client that hangs up: stopping a broadcast midway
	// leaves the engine unsure whether the node took the transaction.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.DripTimeout)
	defer cancel()
	log := &dripLog{log: s.log, attrs: []slog.Attr{slog.String("recipient", k.text), slog.String("asset", string(a.name)),
		slog.Bool("stacking", k.opts.stacking), slog.String("client_ip", addrString(adm.ClientIP))}}

	quote := func(ctx context.Context) (uint64, *dripFailure) {
		amt, err := a.quote(ctx, k.opts)
		if err != nil {
			return 0, s.failed(ctx, log, a, err)
		}
		return amt, nil
	}
	adm, res, fail := s.admit(ctx, r, h, a.name, adm, quote, log)
	if fail != nil {
		return nil, fail
	}

	p, err := a.pay(ctx, k, res.Amount)
	s.cfg.Faucet.Record(ctx, recordOf(s.cfg.Clock.Now(), k, p, err, adm))
	if err != nil {
		// Every failure of a kind leaves no transaction of this drip in
		// flight (one that may have been sent succeeds, in doubt), so the
		// charge goes back. A failed release keeps it: the safe side.
		if rerr := s.cfg.Limits.Release(context.WithoutCancel(ctx), res); rerr != nil {
			log.at(ctx, slog.LevelWarn, "rate-limit release failed; the slot stays charged", slog.Any("err", rerr))
		}
		f := s.failed(ctx, log, a, err)
		if h != nil && replicaLocal(f) {
			// Another replica may well pay it: the client's next request
			// takes a new connection, which the Service may route there.
			h.Set("Connection", "close")
		}
		return nil, f
	}
	s.metrics.observePaid(a, k.opts, p.amount)
	s.outflow.add(a.name, p.amount, s.cfg.Clock.Now())
	if s.cfg.Guard != nil {
		s.cfg.Guard.Dispensed(adm.Grant)
	}
	attrs := []slog.Attr{slog.Uint64("amount", p.amount), slog.Uint64("fee", p.fee), slog.String("txid", a.display(p)),
		slog.String("sender", p.sender), slog.Uint64("nonce", p.nonce), slog.Bool("in_doubt", p.inDoubt)}
	if p.batch > 0 {
		attrs = append(attrs, slog.Int("batch_size", p.batch))
	}
	if adm.Grant.Bypassed != "" {
		attrs = append(attrs, slog.String("bypass", adm.Grant.Bypassed))
	}
	if t := adm.Grant.Token; t != nil {
		attrs = append(attrs, slog.String("token", t.Name)) // the token's name, never the token
	}
	log.at(ctx, slog.LevelInfo, "drip sent", attrs...)
	return p, nil
}

// failed is the answer to a kind's error, logged and counted.
func (s *server) failed(ctx context.Context, log *dripLog, a *asset, err error) *dripFailure {
	f, level := a.failure(a, err)
	transient(f, a, node.RetryAfter(err))
	s.metrics.observeDrip(a.name, f.reason)
	log.at(ctx, level, "drip failed", slog.String("reason", f.reason), slog.Any("err", err))
	return f
}

// dripLog writes the lines of one drip with its attributes, formatted only
// when a line is written: a child logger would format them for every drip.
type dripLog struct {
	log   *slog.Logger
	attrs []slog.Attr
}

func (d *dripLog) at(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if !d.log.Enabled(ctx, level) {
		return
	}
	d.log.LogAttrs(ctx, level, msg, append(slices.Clip(d.attrs), attrs...)...)
}

// recordOf is the history's row of a drip the kind answered: sent, or the
// reason it failed.
func recordOf(at time.Time, k ask, p *paid, err error, adm guard.Admission) faucet.DripRecord {
	d := faucet.DripRecord{At: at, Recipient: k.text, Asset: k.asset.name, Stacking: k.opts.stacking,
		ClientBucket: guard.ClientBucket(adm.ClientIP)}
	if p != nil {
		d.Amount, d.Fee, d.TxID, d.Sender, d.Nonce, d.Outcome, d.Batch = p.amount, p.fee, p.txid, p.sender, p.nonce, faucet.OutcomeSent, p.batch
		return d
	}
	if d.Outcome = string(faucet.ReasonOf(err)); d.Outcome == "" {
		d.Outcome = "internal"
	}
	return d
}

// admit runs steps 1 to 3 for a drip of any asset: the suspension switch,
// the abuse checks, the drip's amount (see budget.go) and the rate limits
// with the budget. It returns the admission with its grant and the
// reservation to release if the drip then fails; the reservation's Amount
// is what the drip pays (0: the engine's configured drip). quote reads
// the asset's configured drip when the amount is decided here. Past the
// checks it writes the RateLimit fields to h (nil: none).
func (s *server) admit(ctx context.Context, r *http.Request, h http.Header, asset faucet.Asset, adm guard.Admission,
	quote func(context.Context) (uint64, *dripFailure), log *dripLog) (guard.Admission, guard.Reservation, *dripFailure) {
	if s.suspended(asset) {
		s.metrics.observeDrip(asset, string(faucet.ReasonDisabled))
		all := s.cfg.Switches.Load().Suspend
		log.at(ctx, slog.LevelInfo, "drip refused: suspended by the operator", slog.Bool("all_assets", all))
		detail := "the faucet is suspended"
		if !all {
			detail = "the " + s.assetLabel(asset) + " faucet is suspended"
		}
		return adm, guard.Reservation{}, &dripFailure{status: http.StatusForbidden, reason: string(faucet.ReasonDisabled),
			message: "Faucet is not available", detail: detail, v3Message: s.assetLabel(asset) + " faucet is not available"}
	}

	who, fail := s.identify(r)
	if fail != nil {
		s.metrics.observeDrip(asset, fail.reason)
		log.at(ctx, slog.LevelInfo, "drip refused: sign-in", slog.String("reason", fail.reason))
		return adm, guard.Reservation{}, fail
	}
	adm.Person = who.limited()
	tier := who.tier
	if who.person != nil {
		log.attrs = append(log.attrs, slog.String("person", who.person.Key()), slog.String("tier", tier.Name))
	}

	if s.cfg.Guard != nil {
		gctx, cancel := context.WithTimeout(ctx, s.storeWait())
		g, err := s.cfg.Guard.Check(gctx, guard.Request{
			ClientIP: adm.ClientIP, Recipient: adm.Recipient, Asset: adm.Asset, Stacking: adm.Stacking,
			Authorization: who.apiAuthorization(r),
			Challenge:     r.Header.Get(headerChallenge), Solution: r.Header.Get(headerSolution),
			SignedIn: who.skipsProofOfWork(),
		})
		cancel()
		var rej *guard.Rejection
		switch {
		case errors.As(err, &rej):
			s.metrics.observeRejection(asset, rej)
			log.at(ctx, slog.LevelInfo, "drip refused by a check", slog.String("check", rej.Check), slog.String("reason", rej.Reason))
			fail := &dripFailure{status: rej.Status, reason: rej.Reason, message: rej.Message, v3Message: rej.Message}
			if rej.Status == http.StatusTooManyRequests { // the token lock-out: v3 keeps the incumbent's 429 text
				fail.retryAfter, fail.v3Message = retryAfterSeconds(rej.RetryAfter), v3TooMany
			}
			return adm, guard.Reservation{}, fail
		case err != nil:
			log.at(ctx, slog.LevelWarn, "abuse checks failed", slog.Any("err", err))
			return adm, guard.Reservation{}, s.storeFailure(asset)
		}
		adm.Grant = g
	}

	if s.quoted(asset, tier) {
		base, fail := quote(ctx)
		if fail != nil {
			return adm, guard.Reservation{}, fail
		}
		if !s.plan(ctx, &adm, asset, base, tier) {
			s.metrics.observeDrip(asset, string(faucet.ReasonExhausted))
			log.at(ctx, slog.LevelInfo, "drip refused: the treasury is at its reserve")
			return adm, guard.Reservation{}, s.reserveFailure(asset)
		}
	}

	// Limits before the engine: a limited client learns that even while
	// the node is down.
	rctx, cancel := context.WithTimeout(ctx, s.storeWait())
	res, err := s.cfg.Limits.Reserve(rctx, adm)
	cancel()
	var limited *guard.Limited
	var exhausted *guard.Exhausted
	switch {
	case err == nil:
		setRateLimit(h, s.cfg.Limits.Uses(adm, res))
		if res.Drawn != nil {
			s.cache.forget(asset)
		}
	case errors.As(err, &exhausted):
		setRateLimit(h, exhausted.Use)
		s.metrics.observeDrip(asset, reasonBudgetExhausted)
		log.at(ctx, slog.LevelInfo, "drip refused: budget used up", slog.String("pool", exhausted.Pool), slog.String("retry_after", exhausted.RetryAfter.String()))
		return adm, guard.Reservation{}, s.budgetFailure(asset, exhausted, tier)
	case errors.As(err, &limited):
		setRateLimit(h, limited.Use)
		s.metrics.observeDrip(asset, reasonRateLimited)
		log.at(ctx, slog.LevelDebug, "drip refused by a rate limit", slog.String("retry_after", limited.RetryAfter.String()))
		return adm, guard.Reservation{}, &dripFailure{
			status: http.StatusTooManyRequests, reason: reasonRateLimited, message: "Too many requests",
			retryAfter: retryAfterSeconds(limited.RetryAfter), v3Message: v3TooMany,
		}
	case err != nil:
		log.at(ctx, slog.LevelWarn, "rate limits unavailable", slog.Any("err", err))
		return adm, guard.Reservation{}, s.storeFailure(asset)
	}

	return adm, res, nil
}

// setRateLimit writes the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers) of the limits a drip counts
// against, as its reservation left them (or as they refused it): q and w
// are each limit's requests and window, r what remains and t the seconds
// until a slot frees. The reservation's own statement counted them: no
// store read more per drip. Nothing is written without a use or a header.
func setRateLimit(h http.Header, use []guard.LimitUse) {
	if h == nil || len(use) == 0 {
		return
	}
	policies, states := make([]string, len(use)), make([]string, len(use))
	for i, u := range use {
		name := strconv.Quote(u.Policy)
		policies[i] = name + ";q=" + strconv.Itoa(u.Limit.Requests) + ";w=" + strconv.FormatInt(ceilSeconds(u.Limit.Window), 10)
		t := u.Reset
		if u.Wait > 0 {
			t = u.Wait
		}
		states[i] = name + ";r=" + strconv.Itoa(max(u.Limit.Requests-u.Used, 0)) + ";t=" + strconv.FormatInt(ceilSeconds(t), 10)
	}
	h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	h.Set("RateLimit", strings.Join(states, ", "))
}

// ceilSeconds rounds d up to whole seconds (0 stays 0).
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// storeFailure is the answer when the state store behind the checks or the
// limits cannot be reached: nothing was sent.
func (s *server) storeFailure(asset faucet.Asset) *dripFailure {
	s.metrics.observeDrip(asset, string(faucet.ReasonStoreUnavailable))
	f := &dripFailure{reason: string(faucet.ReasonStoreUnavailable), message: dripErrorText[faucet.ReasonStoreUnavailable], v3Message: v3Unavailable}
	a, _ := s.lookup(asset)
	transient(f, a, 0)
	return f
}

// replicaLocal reports whether a failure may be this replica's alone: its
// node unreachable from here, or no key held here.
func replicaLocal(f *dripFailure) bool {
	return f.reason == string(faucet.ReasonNodeUnavailable) || f.reason == string(faucet.ReasonBusy)
}

// maxStoreWait bounds admission's wait on the store (the abuse checks and
// the rate limits). A store cut off by the network drops packets without a
// reset, so a statement would otherwise wait out the drip's whole timeout,
// past any client's patience; bounded, the drip is answered 503 with
// Retry-After. A reservation that committed just as the wait ended keeps
// its slots: the safe side.
const maxStoreWait = 5 * time.Second

// storeWait is maxStoreWait, or half the drip's timeout if that is
// shorter: admission leaves the payment time.
func (s *server) storeWait() time.Duration { return min(maxStoreWait, s.cfg.DripTimeout/2) }

// retryTransient is the Retry-After, in seconds, of an answer that says to
// try again shortly: outages of the store, the node or a replica's keys
// last seconds, and a client waiting this long does not hammer a recovery.
const retryTransient = 5

// transient completes the answer to a failure of asset a that passes by
// itself (the store, the node or this replica's keys unavailable for now):
// a store outage is 503 on v1 as on v3 (v1 keeps the seed's 500 for the
// engine's own reasons), and each says when to try again: retryTransient,
// or later when the node asked the faucet to wait longer (nodeWait, a
// gateway's 429), since a client retrying sooner would meet the same
// refusal. BTC's answers keep no Retry-After of theirs: the page asks v3
// for BTC's usual drip and reads a v3 503 with Retry-After as the budget's
// refusal.
func transient(f *dripFailure, a *asset, nodeWait time.Duration) {
	switch faucet.Reason(f.reason) {
	case faucet.ReasonStoreUnavailable:
		f.status, f.v3Status = http.StatusServiceUnavailable, http.StatusServiceUnavailable
	case faucet.ReasonBusy, faucet.ReasonNodeUnavailable, faucet.ReasonStackingUnavailable:
	default:
		return
	}
	if f.retryAfter == 0 && (a == nil || a.chain != chainBitcoin) {
		f.retryAfter = retryTransient
		if nodeWait > 0 && f.reason == string(faucet.ReasonNodeUnavailable) {
			f.retryAfter = max(f.retryAfter, retryAfterSeconds(nodeWait))
		}
	}
}
