// Package kvsession is the reference engine's E+P+D KV session state
// (CONTRACT section 1, L-2; WIRE.md KvSessionRef): P's sessions, each the
// serialised lm.Session of a prefill (lm.SessionBytes bytes) kept in
// memory registered with P's tcp transfer agent until D fetched and
// released it, it was aborted, or it expired (Driver: Register, Hold,
// Release, Drain); and D's READ of a session (Driver.Read, with its Q-1
// quarantine) and record of the sessions it attached to, its replay guard
// (Sessions.Attach, Forget). engine/server describes a
// session on the wire (KvSessionRef), parses the one D gets, READs it and
// releases it on P (gRPC); this package imports no gRPC.
//
// Locking: Sessions has a lock of its own, never held across I/O or an
// agent call (CONTRACT Q-5), and taken by no one else.
package kvsession

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
)

// Retries of a session's deregistration while a READ is served from it.
const (
	freeRetry  = 50 * time.Millisecond
	freeGiveUp = 30 * time.Second // a READ being served ends within the agent's idle timeout (10 s)
)

// Sessions is P's table of KV sessions waiting for D, and D's record of
// the sessions it attached to (its replay guard). The zero value is ready;
// safe for concurrent use.
type Sessions struct {
	mu       sync.Mutex
	live     map[string]*Session  // P: session id -> session
	attached map[string]time.Time // D: session id -> when this D attached to it
	released int                  // P: sessions released (fetched and released by D, or Abort)
	expired  int                  // P: sessions expired unfetched
}

// Session is one KV session P holds: the lm.Session bytes in registered
// memory until D fetched it, it was aborted, or it expired.
type Session struct {
	// ID is the session id (32 lowercase hex digits, 128 random bits).
	ID string
	// Images is how many images the prefill had (the session is
	// multimodal when it is not 0).
	Images int
	// Reg is the registration of the session's lm.SessionBytes bytes
	// with P's agent: one descriptor, which the KvSessionRef names.
	Reg   *xfer.Registration
	buf   []byte
	timer *time.Timer
}

// Env is what the KV session driver needs of the engine around it
// (engine/server implements it).
type Env interface {
	// FailCleanup records a cleanup failure (X-1: sticky NOT_READY).
	FailCleanup(what string, err error)
	// EnterQuarantine records q, turns Health NOT_READY and ends q
	// once every proof is closed: D's KV READ buffer while its READ
	// is still in flight (Read). Call without any lock.
	EnterQuarantine(q *consumer.Quarantine, proofs []<-chan struct{})
}

// Driver is the KV session driver. On P, over Sessions: it registers a
// session's bytes with the agent, holds them for D, and frees them when D
// released the session, it was aborted, it expired or the engine drains.
// On D: it READs a session (Read, read.go).
type Driver struct {
	// Sessions is P's table of sessions held for D and D's replay guard.
	Sessions *Sessions
	// Agent is the transfer agent: P registers sessions' bytes with it, D
	// READs through it.
	Agent xfer.Agent
	// Env is the engine around the driver: X-1 and the quarantine entry.
	Env Env
	// Log receives the driver's events: sessions expired unfetched, failed
	// READ releases.
	Log *slog.Logger
}

// Register copies b, a serialised lm.Session (lm.SessionBytes bytes), and
// registers the copy with the agent as session id of a prefill with images
// images; Hold then keeps it, or Free frees it when it cannot be
// described. Errors: a b of another length, the agent's.
func (d *Driver) Register(id string, b []byte, images int) (*Session, error) {
	if len(b) != lm.SessionBytes {
		return nil, fmt.Errorf("server: KV session of %d bytes, want %d", len(b), lm.SessionBytes)
	}
	buf := append([]byte(nil), b...)
	reg, err := d.Agent.RegisterMemory([][]byte{buf})
	if err != nil {
		return nil, fmt.Errorf("server: register the KV session: %w", err)
	}
	return &Session{ID: id, Images: images, Reg: reg, buf: buf}, nil
}

// Hold keeps a registered session for D until it is released (Release),
// or frees it once ttl passed unfetched.
func (d *Driver) Hold(s *Session, ttl time.Duration) {
	t := d.Sessions
	t.mu.Lock()
	if t.live == nil {
		t.live = map[string]*Session{}
	}
	t.live[s.ID] = s
	s.timer = time.AfterFunc(ttl, func() { d.expire(s.ID) })
	t.mu.Unlock()
}

// Release removes a live session and frees its memory. It reports whether
// the session was live (Abort: ABORTED) or not (ALREADY_FINISHED:
// released, fetched or expired before).
func (d *Driver) Release(id string) bool {
	s, ok := d.Sessions.take(id, &d.Sessions.released)
	if !ok {
		return false
	}
	s.timer.Stop()
	d.Free(s.Reg)
	return true
}

// expire frees a session nobody fetched within its TTL.
func (d *Driver) expire(id string) {
	if s, ok := d.Sessions.take(id, &d.Sessions.expired); ok {
		d.Log.Info("KV session expired unfetched", "session", id)
		d.Free(s.Reg)
	}
}

// take removes live session id and counts it in count (released or
// expired); ok is false when it is not live.
func (t *Sessions) take(id string, count *int) (s *Session, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok = t.live[id]
	if ok {
		delete(t.live, id)
		*count++
	}
	return s, ok
}

// Free deregisters a session's memory. The agent refuses while a READ is
// being served from it; that ends within the agent's idle timeout, so the
// deregistration is retried until freeGiveUp, after which it is a cleanup
// failure.
func (d *Driver) Free(reg *xfer.Registration) {
	deadline := time.Now().Add(freeGiveUp)
	var try func()
	try = func() {
		err := d.Agent.Deregister(reg)
		switch {
		case err == nil:
		case errors.Is(err, xfer.ErrNotAllowed) && time.Now().Before(deadline):
			time.AfterFunc(freeRetry, try)
		default:
			d.Env.FailCleanup("deregister a KV session", err)
		}
	}
	try()
}

// Drain releases every KV session P still holds (S-2, S-4); a session
// being READ keeps its memory until the agent closes.
func (d *Driver) Drain() {
	t := d.Sessions
	t.mu.Lock()
	ids := make([]string, 0, len(t.live))
	for id := range t.live {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	for _, id := range ids {
		d.Release(id)
	}
}

// Live is the number of KV sessions P holds (GetLoad kv.sessions.live).
func (t *Sessions) Live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

// Ended is how many KV sessions P no longer holds, by how they ended:
// released (D fetched and released them, Abort(kv_session), or the drain)
// and expired (their TTL passed unfetched).
func (t *Sessions) Ended() (released, expired int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.released, t.expired
}

// Attach records that this D attaches to session id; false if it did
// before (a replayed session). Records older than maxTTL (the longest a
// session can live on P: engine/server's Config.MaxTTL) are forgotten, and
// so is the record of a session P answered ALREADY_FINISHED for (Forget).
func (t *Sessions) Attach(id string, maxTTL time.Duration) bool {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.attached == nil {
		t.attached = map[string]time.Time{}
	}
	if _, seen := t.attached[id]; seen {
		return false
	}
	for k, at := range t.attached {
		if now.Sub(at) > maxTTL {
			delete(t.attached, k)
		}
	}
	t.attached[id] = now
	return true
}

// Forget drops the attach record of a session P said is not this D's
// (ALREADY_FINISHED): P answers the same for it from now on, so the record
// guards nothing, and a client's forged sessions leave none behind (the
// attack run's A7).
func (t *Sessions) Forget(id string) {
	t.mu.Lock()
	delete(t.attached, id)
	t.mu.Unlock()
}

// Attached is the number of sessions this D's replay guard remembers.
func (t *Sessions) Attached() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.attached)
}
