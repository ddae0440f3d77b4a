package guard

import (
	"context"
	"sync"
	"time"
)

// spentSweepEvery bounds how often expired ids are swept.
const spentSweepEvery = time.Minute

// MemorySpent is an in-process SpentChallenges. Replicas that share no
// store each keep their own, so a challenge could be used once per replica.
type MemorySpent struct {
	now func() time.Time

	mu        sync.Mutex
	ids       map[string]time.Time // id → when it may be forgotten
	lastSweep time.Time
}

// NewMemorySpent returns an empty in-memory SpentChallenges whose expired
// ids are swept.
func NewMemorySpent() *MemorySpent { return newMemorySpent(time.Now) }

func newMemorySpent(now func() time.Time) *MemorySpent {
	return &MemorySpent{now: now, ids: map[string]time.Time{}}
}

// SpendChallenge marks id used until expires; fresh is false when it was
// already spent and has not expired.
func (s *MemorySpent) SpendChallenge(_ context.Context, id string, expires time.Time) (bool, error) {
	now := s.now()
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
