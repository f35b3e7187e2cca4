package denylist

import (
	"container/heap"
	"container/list"
	"time"
)

// cache is the deny list's local cache: at most capacity identities, each with the membership read
// from the server and a fixed expiry (the start of that read plus the cache duration). Lookups never
// extend an expiry. When full, an insertion first removes every expired entry, then the least recently
// used one. It is not safe for concurrent use: the DenyList's mutex guards it.
type cache struct {
	capacity int
	entries  map[string]*entry
	lru      list.List // of *entry; front = most recently used
	byExpiry expiryHeap
}

type entry struct {
	identity string
	denied   bool
	expires  time.Time
	elem     *list.Element
	index    int // in byExpiry
}

func newCache(capacity int) cache {
	return cache{capacity: capacity, entries: make(map[string]*entry)}
}

// get returns the cached membership of identity if it has not expired at now, marking it most
// recently used. An expired entry is removed.
func (c *cache) get(identity string, now time.Time) (denied, ok bool) {
	e := c.entries[identity]
	if e == nil {
		return false, false
	}
	if !now.Before(e.expires) {
		c.remove(e)
		return false, false
	}
	c.lru.MoveToFront(e.elem)
	return e.denied, true
}

// put caches denied for identity until expires, unless that is not after now. An entry for identity
// with a later expiry (from a read that started later) is kept.
func (c *cache) put(identity string, denied bool, expires, now time.Time) {
	if !now.Before(expires) {
		return
	}
	if e := c.entries[identity]; e != nil {
		if e.expires.After(expires) {
			return
		}
		e.denied, e.expires = denied, expires
		heap.Fix(&c.byExpiry, e.index)
		c.lru.MoveToFront(e.elem)
		return
	}
	if len(c.entries) >= c.capacity {
		c.removeExpired(now)
	}
	for len(c.entries) >= c.capacity {
		c.remove(c.lru.Back().Value.(*entry))
	}
	e := &entry{identity: identity, denied: denied, expires: expires}
	e.elem = c.lru.PushFront(e)
	heap.Push(&c.byExpiry, e)
	c.entries[identity] = e
}

// removeExpired removes every entry whose expiry is not after now.
func (c *cache) removeExpired(now time.Time) {
	for len(c.byExpiry) > 0 && !now.Before(c.byExpiry[0].expires) {
		c.remove(c.byExpiry[0])
	}
}

func (c *cache) remove(e *entry) {
	delete(c.entries, e.identity)
	c.lru.Remove(e.elem)
	heap.Remove(&c.byExpiry, e.index)
}

// clear removes every entry.
func (c *cache) clear() {
	clear(c.entries)
	c.lru.Init()
	clear(c.byExpiry)
	c.byExpiry = c.byExpiry[:0]
}

func (c *cache) len() int { return len(c.entries) }

// expiryHeap is a min-heap of entries by expiry.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *expiryHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}
