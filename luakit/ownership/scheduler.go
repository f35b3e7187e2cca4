package ownership

import (
	"container/heap"
	"sync"
	"time"
)

// MaxRenewalsInFlight is how many keep-alive renewals one scheduler (one [Config], so one primitive
// factory and its client) has in flight at most: due renewals beyond it wait for a slot. With
// rueidis's auto-pipelining the renewals in flight together go out in few writes.
const MaxRenewalsInFlight = 64

// A scheduler renews every keep-alive of the handles of one Config: one timer goroutine over a heap of
// the handles' due times, and at most MaxRenewalsInFlight worker goroutines, each sending one renewal.
// The timer goroutine runs only while the heap holds a handle (it exits once the heap is empty), and a
// worker only while its renewal is in flight, so an idle scheduler holds no goroutine. Schedulers live
// in the registry while at least one handle keeps alive through them.
//
// Locking: h.mu before s.mu, and registryMu after h.mu; the scheduler never takes h.mu holding s.mu.
type scheduler struct {
	cfg   *Config
	slots chan struct{} // one token per renewal in flight (capacity MaxRenewalsInFlight)

	mu      sync.Mutex
	due     dueHeap       // the queued handles, earliest first; guarded by mu
	running bool          // the timer goroutine runs; guarded by mu
	wake    chan struct{} // signalled (without blocking) when the earliest due time moved earlier
	active  int           // handles keeping alive through s; guarded by registryMu
}

var (
	registryMu sync.Mutex
	registry   = map[*Config]*scheduler{}
)

// acquireScheduler returns cfg's scheduler, counting one more handle keeping alive through it.
func acquireScheduler(cfg *Config) *scheduler {
	registryMu.Lock()
	defer registryMu.Unlock()
	s := registry[cfg]
	if s == nil {
		s = &scheduler{cfg: cfg, slots: make(chan struct{}, MaxRenewalsInFlight), wake: make(chan struct{}, 1)}
		registry[cfg] = s
	}
	s.active++
	return s
}

// releaseScheduler counts one handle fewer keeping alive through s, dropping s from the registry
// after the last one (renewals still in flight finish on it).
func releaseScheduler(s *scheduler) {
	registryMu.Lock()
	defer registryMu.Unlock()
	s.active--
	if s.active == 0 && registry[s.cfg] == s {
		delete(registry, s.cfg)
	}
}

// push queues h to be renewed at due, starting the timer goroutine if it is not running. h must not
// be queued.
func (s *scheduler) push(h *Handle, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.kaDue = due
	heap.Push(&s.due, h)
	s.startLocked(h)
}

// reschedule moves queued h to due; it does nothing when h is not queued (a renewal of h is in flight
// and queues it again from the new deadline when it completes).
func (s *scheduler) reschedule(h *Handle, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.kaPos == 0 {
		return
	}
	h.kaDue = due
	heap.Fix(&s.due, h.kaPos-1)
	s.startLocked(h)
}

// startLocked starts the timer goroutine, or wakes it when h is now the earliest; s.mu must be held.
func (s *scheduler) startLocked(h *Handle) {
	if !s.running {
		s.running = true
		go s.run()
		return
	}
	if h.kaPos == 1 {
		s.signalLocked()
	}
}

// remove takes h out of the queue, if it is queued. When h was the earliest, the timer goroutine is
// woken to sleep until the next one instead, or to exit when none is left.
func (s *scheduler) remove(h *Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.kaPos == 0 {
		return
	}
	first := h.kaPos == 1
	heap.Remove(&s.due, h.kaPos-1)
	if first {
		s.signalLocked()
	}
}

// signalLocked wakes the timer goroutine, if it sleeps; s.mu must be held.
func (s *scheduler) signalLocked() {
	select {
	case s.wake <- struct{}{}:
	default: // already signalled
	}
}

// run is the timer goroutine: it sleeps until the earliest due time, takes a renewal slot, pops every
// handle due by then (one slot each) and hands each to a worker. It returns once the queue is empty.
func (s *scheduler) run() {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		s.mu.Lock()
		if len(s.due) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		wait := time.Until(s.due[0].kaDue)
		s.mu.Unlock()
		if wait > 0 {
			if t == nil {
				t = time.NewTimer(wait)
			} else {
				t.Reset(wait)
			}
			select {
			case <-t.C:
			case <-s.wake:
				t.Stop()
			}
			continue
		}
		// A slot first, then the pop: a popped handle's renewal never waits, so Release's wait for it
		// is as short as the renewal.
		s.slots <- struct{}{}
		s.mu.Lock()
		if len(s.due) == 0 || time.Until(s.due[0].kaDue) > 0 {
			s.mu.Unlock()
			<-s.slots // removed or moved meanwhile
			continue
		}
		h := heap.Pop(&s.due).(*Handle)
		// Counted in flight before s.mu is released: a Release that finds h no longer queued then
		// sees the renewal and waits for it.
		h.kaInFlight.Add(1)
		gen := h.kaGen.Load()
		s.mu.Unlock()
		go func() {
			defer func() { <-s.slots }()
			h.renewRound(s, gen)
		}()
	}
}

// dueHeap orders queued handles by due time (container/heap); each handle knows its place (kaPos:
// index + 1, 0 when not queued).
type dueHeap []*Handle

func (q dueHeap) Len() int           { return len(q) }
func (q dueHeap) Less(i, j int) bool { return q[i].kaDue.Before(q[j].kaDue) }
func (q dueHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].kaPos, q[j].kaPos = i+1, j+1
}
func (q *dueHeap) Push(x any) {
	h := x.(*Handle)
	*q = append(*q, h)
	h.kaPos = len(*q)
}
func (q *dueHeap) Pop() any {
	old := *q
	n := len(old)
	h := old[n-1]
	old[n-1] = nil
	h.kaPos = 0
	*q = old[:n-1]
	if cap(*q) > 64 && len(*q) < cap(*q)/4 {
		*q = append(dueHeap(nil), *q...) // give back the memory of a queue that shrank
	}
	return h
}
