package leader

import "sync"

// notifier delivers changes to observers on one goroutine, in order, without ever blocking the election.
type notifier struct {
	observers []func(Change)
	cfg       config
	mu        sync.Mutex
	queue     []Change
	closed    bool
	wake      chan struct{}
	done      chan struct{}
}

func newNotifier(observers []func(Change), cfg config) *notifier {
	n := &notifier{observers: observers, cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if len(observers) == 0 {
		close(n.done)
		return n
	}
	go n.loop()
	return n
}

func (n *notifier) notify(c Change) {
	if len(n.observers) == 0 {
		return
	}
	n.mu.Lock()
	n.queue = append(n.queue, c)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// close delivers what is queued and waits for the notification goroutine to exit.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	<-n.done
}

func (n *notifier) loop() {
	defer close(n.done)
	for {
		n.mu.Lock()
		batch, closed := n.queue, n.closed
		n.queue = nil
		n.mu.Unlock()
		for _, c := range batch {
			for _, fn := range n.observers {
				n.deliver(fn, c)
			}
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-n.wake
		}
	}
}

func (n *notifier) deliver(fn func(Change), c Change) {
	defer func() {
		if r := recover(); r != nil {
			n.cfg.logger.Warn("coordkit/leader: change observer panicked", "panic", r, "state", c.State.String())
		}
	}()
	fn(c)
}
