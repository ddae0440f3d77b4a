package faucet

import (
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// defaultBlockGap stands in for the time between blocks until the poll
// loop has seen two: about a Nakamoto testnet's.
const defaultBlockGap = 5 * time.Second

// blockClock measures the chain's pace as the poll loop sees it: the gap
// between blocks and the gap between the polls that found one, which is
// when in-flight slots free. The adaptive batcher spreads its slots over
// what is left of the gap; repairs wait a few gaps before calling a nonce
// stuck.
type blockClock struct {
	clk clock.PassiveClock
	// gap and releaseGap are moving averages in nanoseconds (0 until two
	// blocks were seen); lastRelease is the last poll that found a block
	// (unix ns, 0 before one).
	gap, releaseGap, lastRelease atomic.Int64
}

// noteBlocks folds the time since the last new block, spread over the n
// blocks that came, into the moving average of the block gap.
func (c *blockClock) noteBlocks(n uint64) {
	now := c.clk.Now().UnixNano()
	if last := c.lastRelease.Load(); last != 0 {
		since := now - last
		c.gap.Store(movingAverage(c.gap.Load(), since/int64(n)))
		c.releaseGap.Store(movingAverage(c.releaseGap.Load(), since))
	}
	c.lastRelease.Store(now)
}

// movingAverage folds sample into avg (0: none yet), at least 1.
func movingAverage(avg, sample int64) int64 {
	if avg > 0 {
		sample = avg + (sample-avg)*3/10
	}
	return max(sample, 1)
}

// untilRelease is how long until in-flight slots are expected to free
// next: a release gap after the last poll that found a block. An overdue
// block is expected within an eighth of a gap.
func (c *blockClock) untilRelease() time.Duration {
	g := c.releaseInterval()
	last := c.lastRelease.Load()
	if last == 0 {
		return g
	}
	return max(time.Duration(last-c.clk.Now().UnixNano())+g, g/8)
}

// releaseInterval is the expected time between slot releases.
func (c *blockClock) releaseInterval() time.Duration {
	if g := c.releaseGap.Load(); g > 0 {
		return time.Duration(g)
	}
	return defaultBlockGap
}

// stuckWait is the least time a nonce must wait to count as stuck:
// stuckBlocks block gaps, once the gap has been measured (until then the
// block count alone decides).
func (c *blockClock) stuckWait(stuckBlocks uint64) time.Duration {
	return time.Duration(c.gap.Load()) * time.Duration(stuckBlocks)
}
