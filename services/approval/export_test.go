package approval

import "runtime"

// WaitAsks blocks until n asks of agentID hold or wait for its turn, so a
// test can act while they are queued rather than hope they are.
func WaitAsks(s *Service, agentID string, n int) {
	for {
		s.mu.Lock()
		t := s.turns[agentID]
		got := t != nil && t.users >= n
		s.mu.Unlock()
		if got {
			return
		}
		runtime.Gosched()
	}
}
