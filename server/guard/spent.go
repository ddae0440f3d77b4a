package guard

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// spentSweepEvery bounds how often expired ids are swept.
const spentSweepEvery = time.Minute

// MemorySpent is an in-process SpentChallenges. Replicas that share no
// store each keep their own, so a challenge could be used once per replica.
type MemorySpent struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	ids       map[string]time.Time // id → when it may be forgotten
	lastSweep time.Time
}

// NewMemorySpent returns an empty in-memory SpentChallenges whose expired
// ids are swept, on clk (nil: the real clock): give it the clock that
// checks the challenges, so that one still valid by that clock is never
// re-spendable.
func NewMemorySpent(clk clock.PassiveClock) *MemorySpent {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &MemorySpent{clock: clk, ids: map[string]time.Time{}}
}

// SpendChallenge marks id used until expires; fresh is false when it was
// already spent and has not expired.
func (s *MemorySpent) SpendChallenge(_ context.Context, id string, expires time.Time) (bool, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) >= spentSweepEvery {
		s.lastSweep = now
		for k, exp := range s.ids {
			if !now.Before(exp) {
				delete(s.ids, k)
			}
		}
	}
	if exp, ok := s.ids[id]; ok && now.Before(exp) {
		return false, nil
	}
	s.ids[id] = expires
	return true, nil
}

func (s *MemorySpent) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}
