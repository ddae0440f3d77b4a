package server

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
)

// NodeHealth reports each node's health; *nodepool.Pool (Stacks) and
// *nodepool.BTCPool have it.
type NodeHealth interface {
	Nodes() []nodepool.NodeStatus
}

// infoNode is one node in /faucet/v1/info. URLs never carry
// credentials (the node client drops them).
type infoNode struct {
	URL       string  `json:"url"`
	State     string  `json:"state"` // ready, out or unknown
	Reason    string  `json:"reason,omitempty"`
	TipHeight uint64  `json:"tip_height"`
	LagBlocks uint64  `json:"lag_blocks"`
	LatencyMS float64 `json:"latency_ms"`
	// Since is when the node entered its state (RFC 3339); null before
	// the first probe.
	Since      *string        `json:"since"`
	Broadcasts infoBroadcasts `json:"broadcasts"`
}

type infoBroadcasts struct {
	Accepted   uint64 `json:"accepted"`
	Refused    uint64 `json:"refused"`
	Unanswered uint64 `json:"unanswered"`
	// Resent counts transactions the node lacked and was sent again.
	Resent uint64 `json:"resent"`
}

// nodesInfo is the nodes' section of the info document.
func nodesInfo(h NodeHealth) []infoNode {
	if h == nil {
		return nil
	}
	nodes := h.Nodes()
	out := make([]infoNode, len(nodes))
	for i, n := range nodes {
		out[i] = infoNode{URL: n.URL, State: n.State, Reason: n.Reason, TipHeight: n.Tip, LagBlocks: n.Lag,
			LatencyMS:  float64(n.Latency.Microseconds()) / 1000,
			Broadcasts: infoBroadcasts{Accepted: n.Accepted, Refused: n.Refused, Unanswered: n.Unanswered, Resent: n.Resent}}
		if !n.Since.IsZero() {
			s := n.Since.UTC().Format(time.RFC3339)
			out[i].Since = &s
		}
	}
	return out
}

// nodeCollector reads the nodes' health at scrape time.
type nodeCollector struct {
	mu sync.RWMutex
	h  NodeHealth

	inRotation, tip, lag, latency, broadcasts, resent *prometheus.Desc
}

// newNodeCollector describes one chain's nodes: chain is the metric
// names' word for it (stacks, bitcoin), title its name in the help text.
func newNodeCollector(chain, title string) *nodeCollector {
	node := []string{"node"}
	name := func(s string) string { return "faucet_" + chain + "_node_" + s }
	return &nodeCollector{
		inRotation: prometheus.NewDesc(name("in_rotation"),
			"1 when the "+title+" node serves the faucet's reads and broadcasts; 0 while it is out of rotation (unreachable, answering errors, lagging or of another chain).", node, nil),
		tip:     prometheus.NewDesc(name("tip_height"), title+" tip height the node last reported.", node, nil),
		lag:     prometheus.NewDesc(name("lag_blocks"), "Blocks the node trailed the best tip at the last probe.", node, nil),
		latency: prometheus.NewDesc(name("latency_seconds"), "Moving average of the node's answered calls.", node, nil),
		broadcasts: prometheus.NewDesc(name("broadcasts_total"),
			"Transactions posted to the node, by result (accepted, refused: a verdict on the transaction, unanswered).", []string{"node", "result"}, nil),
		resent: prometheus.NewDesc(name("resent_total"),
			"Transactions the node lacked after another node accepted them, sent to it again.", node, nil),
	}
}

func (c *nodeCollector) set(h NodeHealth) {
	c.mu.Lock()
	c.h = h
	c.mu.Unlock()
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inRotation, c.tip, c.lag, c.latency, c.broadcasts, c.resent} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	h := c.h
	c.mu.RUnlock()
	if h == nil {
		return
	}
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	for _, n := range h.Nodes() {
		in := 0.0
		if n.State == "ready" {
			in = 1
		}
		ch <- prometheus.MustNewConstMetric(c.inRotation, gauge, in, n.URL)
		ch <- prometheus.MustNewConstMetric(c.tip, gauge, float64(n.Tip), n.URL)
		ch <- prometheus.MustNewConstMetric(c.lag, gauge, float64(n.Lag), n.URL)
		ch <- prometheus.MustNewConstMetric(c.latency, gauge, n.Latency.Seconds(), n.URL)
		ch <- prometheus.MustNewConstMetric(c.broadcasts, counter, float64(n.Accepted), n.URL, "accepted")
		ch <- prometheus.MustNewConstMetric(c.broadcasts, counter, float64(n.Refused), n.URL, "refused")
		ch <- prometheus.MustNewConstMetric(c.broadcasts, counter, float64(n.Unanswered), n.URL, "unanswered")
		ch <- prometheus.MustNewConstMetric(c.resent, counter, float64(n.Resent), n.URL)
	}
}
