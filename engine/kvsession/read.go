package kvsession

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
)

// ReadGrace is how long D waits past the READ's timeout: the agent's own
// deadline (the same timeout) ends the READ first.
const ReadGrace = time.Second

// Read is D's fetch of session id: it READs the session's lm.SessionBytes
// bytes from P's registered region into a buffer registered with D's
// agent, from the agent P's metadata (agentMD) describes (xfer
// CreateReadFrom: nothing is loaded into D's agent, so no agent a request
// names outlives its READ, the attack run's A7). The wait has its own
// deadline, not ctx's: timeout (engine/server's Config.TransferTimeout,
// the agent's own deadline for the READ) plus ReadGrace, so the READ ends
// before the buffer is released. A READ still in flight at the deadline (the agent did not end
// it) keeps its buffer and request until it ends (CONTRACT ):
// the quarantine quarantineID (Env.EnterQuarantine), whose proof is the
// READ's end. Errors: the agent's (register, create, post, wait), and the
// READ still in flight; a failed deregistration of the buffer is X-1.
func (d *Driver) Read(ctx context.Context, id string, agentMD []byte, region xfer.Descriptor, timeout time.Duration, quarantineID string) ([]byte, error) {
	buf := make([]byte, lm.SessionBytes)
	reg, err := d.Agent.RegisterMemory([][]byte{buf})
	if err != nil {
		return nil, fmt.Errorf("register the KV receive buffer: %w", err)
	}
	xreq, err := d.Agent.CreateReadFrom(reg.Descriptors, agentMD, []xfer.Descriptor{region})
	if err != nil {
		d.deregisterBuffer(reg)
		return nil, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+ReadGrace)
	defer cancel()
	st, err := d.Agent.Post(xreq)
	if err == nil && st == xfer.StatusInProgress {
		st, err = xfer.Wait(wctx, d.Agent, xreq)
	}
	if rerr := d.Agent.Release(xreq); rerr != nil {
		// Still in flight: bytes may yet land in buf until the READ
		// has ended; then it is released and the buffer freed.
		ended := make(chan struct{})
		go func() {
			<-xreq.Done()
			if err := d.Agent.Release(xreq); err != nil {
				d.Log.Error("Q-1 release of an ended KV READ failed; its buffer stays quarantined", "session", id, "err", err)
				return
			}
			close(ended)
		}()
		d.Env.EnterQuarantine(&consumer.Quarantine{ID: quarantineID, Reason: consumer.QuarantineReason("Q-1", "KV READ buffer of session "+cache.Short(id), "READ still in flight after its deadline"),
			Keep: buf, UncountedBytes: int64(len(buf)), Free: func() error { return d.Agent.Deregister(reg) }}, []<-chan struct{}{ended})
		return nil, fmt.Errorf("READ still in flight after %v: %w", timeout, rerr)
	}
	d.deregisterBuffer(reg)
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// deregisterBuffer frees D's receive buffer; a failure is X-1.
func (d *Driver) deregisterBuffer(reg *xfer.Registration) {
	if err := d.Agent.Deregister(reg); err != nil {
		d.Env.FailCleanup("deregister a KV receive buffer", err)
	}
}
