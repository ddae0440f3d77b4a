package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/internal/ttlcache"
)

// Status values.
const (
	statusReady           = "ready"
	statusSyncing         = "syncing"
	statusNodeUnreachable = "node_unreachable"
)

// statusFetchTimeout bounds one shared node read for the status endpoint.
const statusFetchTimeout = 5 * time.Second

// statusBody is @stacks/stacks-blockchain-api-types ServerStatusResponse,
// whose schema allows no additional properties: no field may be added.
type statusBody struct {
	ServerVersion string `json:"server_version"`
	Status        string `json:"status"`
	// Burn heights at which PoX-1/2/3 locks were force-released (the first
	// block of epochs 2.1, 2.2 and 2.5); null when the node does not say.
	PoxV1UnlockHeight *uint64   `json:"pox_v1_unlock_height"`
	PoxV2UnlockHeight *uint64   `json:"pox_v2_unlock_height"`
	PoxV3UnlockHeight *uint64   `json:"pox_v3_unlock_height"`
	ChainTip          *chainTip `json:"chain_tip,omitempty"`
}

// headerFaucets lists, on the status answers, the assets this faucet
// drips now ("stx, tusd, btc"), so a script can tell whether an asset's
// endpoints will answer before calling them. A header, not a body field: the incumbent's
// published status schema allows no additional properties.
const headerFaucets = "X-Faucet-Assets"

type chainTip struct {
	BlockHeight        uint64  `json:"block_height"`
	BlockHash          string  `json:"block_hash"`
	IndexBlockHash     string  `json:"index_block_hash"`
	MicroblockHash     *string `json:"microblock_hash,omitempty"`
	MicroblockSequence *uint16 `json:"microblock_sequence,omitempty"`
	BurnBlockHeight    uint64  `json:"burn_block_height"`
}

// statusSnapshot is a rendered status body and its ETag.
type statusSnapshot struct {
	body []byte
	etag string
	// status, tip and chainID are the parsed parts other endpoints reuse;
	// chainID is 0 when the node did not answer.
	status  string
	tip     *chainTip
	chainID uint32
}

// statusCache renders the status from at most one node read per ttl; callers
// arriving while a read is under way wait for it instead of starting their
// own, so a burst of requests costs the node one /v2/info and one /v2/pox.
// The shared read is detached from the request that started it (see
// ttlcache), so one client hanging up does not fail the others.
type statusCache struct {
	node          StatusNode
	serverVersion string
	log           *slog.Logger
	snap          ttlcache.Value[*statusSnapshot]
	// poxFailing makes a failing /v2/pox one warning, not one a second.
	poxFailing atomic.Bool
}

func newStatusCache(n StatusNode, ttl time.Duration, clk clock.PassiveClock, version string, log *slog.Logger) *statusCache {
	c := &statusCache{node: n, serverVersion: version, log: log}
	c.snap.TTL, c.snap.Clock, c.snap.FetchTimeout = ttl, clk, statusFetchTimeout
	return c
}

// get returns the current snapshot; it fails only when ctx ends first.
func (c *statusCache) get(ctx context.Context) (*statusSnapshot, error) {
	return c.snap.Get(ctx, func(ctx context.Context) (*statusSnapshot, error) {
		return c.fetch(ctx), nil
	})
}

// fetch reads the node and renders the body; a node failure is rendered as
// status node_unreachable, never returned.
func (c *statusCache) fetch(ctx context.Context) *statusSnapshot {
	var (
		info    *node.Info
		pox     *node.PoXInfo
		infoErr error
		poxErr  error
		wg      sync.WaitGroup
	)
	wg.Go(func() { info, infoErr = c.node.Info(ctx) })
	wg.Go(func() { pox, poxErr = c.node.PoX(ctx) })
	wg.Wait()

	body := statusBody{ServerVersion: c.serverVersion}
	switch {
	case infoErr != nil:
		// Debug: the engine's poll reports an outage, with back-off; this
		// read repeats every second while the page is open.
		c.log.Debug("status: node info failed", "err", infoErr)
		body.Status = statusNodeUnreachable
	default:
		body.Status = statusReady
		if info.IsFullySynced != nil && !*info.IsFullySynced {
			body.Status = statusSyncing
		}
		body.ChainTip = c.chainTip(info)
		if poxErr != nil {
			// The tip is still worth showing; only the unlock heights go null.
			level := slog.LevelDebug
			if !c.poxFailing.Swap(true) {
				level = slog.LevelWarn
			}
			c.log.Log(ctx, level, "status: node pox failed", "err", poxErr)
		} else {
			if c.poxFailing.Swap(false) {
				c.log.Info("status: node pox works again")
			}
			body.PoxV1UnlockHeight = unlockHeight(pox, "Epoch21")
			body.PoxV2UnlockHeight = unlockHeight(pox, "Epoch22")
			body.PoxV3UnlockHeight = unlockHeight(pox, "Epoch25")
		}
	}
	b, err := marshalJSON(body)
	if err != nil {
		panic(err) // fixed types; cannot fail
	}
	var chainID uint32
	if infoErr == nil {
		chainID = info.NetworkID
	}
	// A strong ETag over the whole body: any change (tip, burn height,
	// status, version) changes it, so a 304 is never stale.
	sum := sha256.Sum256(b)
	return &statusSnapshot{body: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, status: body.Status, tip: body.ChainTip, chainID: chainID}
}

func (c *statusCache) chainTip(info *node.Info) *chainTip {
	ibh, err := info.IndexBlockHash()
	if err != nil {
		// index_block_hash is required in chain_tip; omit the object rather
		// than send a made-up value.
		c.log.Warn("status: cannot compute index block hash", "err", err)
		return nil
	}
	tip := &chainTip{
		BlockHeight:     info.StacksTipHeight,
		BlockHash:       "0x" + info.StacksTip,
		IndexBlockHash:  "0x" + ibh,
		BurnBlockHeight: info.BurnBlockHeight,
	}
	if info.UnanchoredTip != nil && *info.UnanchoredTip != "" {
		h := "0x" + strings.TrimPrefix(*info.UnanchoredTip, "0x")
		tip.MicroblockHash = &h
	}
	if info.UnanchoredSeq != nil {
		seq := *info.UnanchoredSeq
		tip.MicroblockSequence = &seq
	}
	return tip
}

// unlockHeight is the first burn block after epochID starts, or nil.
func unlockHeight(pox *node.PoXInfo, epochID string) *uint64 {
	start, ok := pox.EpochStart(epochID)
	if !ok {
		return nil
	}
	h := start + 1
	return &h
}

// handleStatus serves the Hiro-compatible status document with an ETag.
func (s *server) handleStatus(w http.ResponseWriter, r *http.Request) {
	snap, err := s.status.get(r.Context())
	if err != nil {
		return // the client went away while the shared read ran
	}
	h := w.Header()
	// The switches change the header without touching the body; the tag
	// covers both, so a 304 never keeps an asset that was turned off.
	on := strings.Join(s.onNames(), ", ")
	etag := statusETag(snap.etag, on)
	h.Set(headerFaucets, on)
	h.Set("ETag", etag)
	// Clients may store it but must revalidate; the ETag makes that cheap.
	h.Set("Cache-Control", "no-cache")
	if etagMatches(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeJSONBytes(w, http.StatusOK, snap.body)
}

// statusETag is the tag of a status answer: its body's tag and the
// assets X-Faucet-Assets lists.
func statusETag(bodyTag, assets string) string {
	sum := sha256.Sum256([]byte(bodyTag + "\x00" + assets))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// etagMatches applies If-None-Match: "*" or any listed tag equal to etag
// under the weak comparison RFC 9110 §13.1.2 prescribes for this header.
func etagMatches(headers []string, etag string) bool {
	for _, h := range headers {
		for t := range strings.SplitSeq(h, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}
