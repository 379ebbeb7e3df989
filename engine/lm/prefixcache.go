package lm

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"
)

// DefaultPrefixKey is the correct prefix-cache key: lowercase hex SHA-256 over a
// domain tag, the prompt token ids (ImageID markers included) and every image
// identity (content hash, or fresh identity for a missing hash; H-2), each
// length-prefixed so no two inputs share an encoding.
func DefaultPrefixKey(tokenIDs []uint32, imageIdentities []string) string {
	// The pre-image is built in one buffer (on the stack for the usual
	// prompt) and hashed at once: no allocation but the key itself.
	var stack [512]byte
	buf := append(stack[:0], "baton-lm-prefix-v1\x00"...)
	buf = binary.AppendUvarint(buf, uint64(len(tokenIDs)))
	for _, id := range tokenIDs {
		buf = binary.LittleEndian.AppendUint32(buf, id)
	}
	buf = binary.AppendUvarint(buf, uint64(len(imageIdentities)))
	for _, s := range imageIdentities {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	sum := sha256.Sum256(buf)
	var key [2 * sha256.Size]byte
	hex.Encode(key[:], sum[:])
	return string(key[:]) // hex.EncodeToString in one allocation
}

// PrefixCacheStats returns the prefix cache's lookup counts since New: hits
// (Prefill reused a stored state) and misses (Prefill computed it).
func (m *Model) PrefixCacheStats() (hits, misses uint64) {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	return m.cache.hits, m.cache.misses
}

// prefixCache is a bounded LRU map from prefix key to prefilled state.
// capacity < 0 stores nothing (every lookup is a miss).
type prefixCache struct {
	mu           sync.Mutex
	capacity     int
	order        *list.List // of *cacheEntry, most recently used first
	byKey        map[string]*list.Element
	hits, misses uint64
}

type cacheEntry struct {
	key   string
	state uint64
}

func newPrefixCache(capacity int) *prefixCache {
	return &prefixCache{capacity: capacity, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *prefixCache) get(key string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		c.misses++
		return 0, false
	}
	c.hits++
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).state, true
}

func (c *prefixCache) put(key string, state uint64) {
	if c.capacity < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok { // a concurrent prefill of the same key
		e.Value.(*cacheEntry).state = state
		c.order.MoveToFront(e)
		return
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, state: state})
	for c.order.Len() > c.capacity {
		old := c.order.Remove(c.order.Back()).(*cacheEntry)
		delete(c.byKey, old.key)
	}
}
