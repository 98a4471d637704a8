package attachments

import (
	"container/list"
	"sync"
)

// cacheBytes bounds the blobs kept in memory for model requests. Every
// step of a turn sends the whole history, so without it a session with
// images would read each of them from disk on every step: with 100 image
// turns that is 5,000 reads where 100 do.
const cacheBytes = 64 << 20

// cache keeps the most recently read blobs, least recently used out
// first. The bytes are shared with the parts that carry them: read-only.
type cache struct {
	mu    sync.Mutex
	size  int64
	items map[string]*list.Element
	order list.List // front: most recent
}

type cached struct {
	hex  string
	data []byte
}

func (c *cache) get(hex string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[hex]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cached).data, true
}

func (c *cache) put(hex string, data []byte) {
	if int64(len(data)) > cacheBytes/4 {
		return // one huge blob would push out everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items == nil {
		c.items = map[string]*list.Element{}
	}
	if _, ok := c.items[hex]; ok {
		return
	}
	c.items[hex] = c.order.PushFront(&cached{hex, data})
	c.size += int64(len(data))
	for c.size > cacheBytes {
		last := c.order.Back()
		c.drop(last.Value.(*cached).hex)
	}
}

func (c *cache) remove(hex string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(hex)
}

func (c *cache) drop(hex string) {
	e, ok := c.items[hex]
	if !ok {
		return
	}
	c.order.Remove(e)
	delete(c.items, hex)
	c.size -= int64(len(e.Value.(*cached).data))
}
