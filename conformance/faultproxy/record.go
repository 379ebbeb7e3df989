package faultproxy

import (
	"context"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// CallRecord is what the proxy did with one call and what the upstream
// answered. Records are kept per plan: SetPlan starts a new list and
// restarts every method's Index at 0.
type CallRecord struct {
	// Method is the full method name, "/pkg.Service/Method".
	Method string
	// Index is the call's 0-based position among Method's calls since the
	// plan was set (arrival order at the proxy); the Step came from it.
	Index int
	// Seq is the call's 0-based position among all calls since the plan
	// was set.
	Seq int
	// Step is the fault applied; Random says whether the seeded PRNG chose it.
	Step Step
	// Random: the seeded PRNG chose Step (false: Rule.Sequence did, or
	// no rule applied and Step is FaultNone).
	Random bool
	// Forwarded: the proxy opened the upstream stream and sent the request.
	Forwarded bool
	// UpstreamReached: the upstream server answered (sent headers or a
	// status), so the request took effect there as far as the wire can tell.
	// False when the call was not forwarded, or the upstream could not be
	// reached.
	UpstreamReached bool
	// UpstreamDone: the upstream call finished; UpstreamCode, UpstreamMessage
	// and UpstreamTrailer are its final status and trailers (valid only then).
	UpstreamDone bool
	// UpstreamCode is the upstream's final gRPC code (valid once
	// UpstreamDone).
	UpstreamCode codes.Code
	// UpstreamMessage is the upstream's final status message (valid once
	// UpstreamDone).
	UpstreamMessage string
	// UpstreamTrailer is the upstream's trailer, valid once UpstreamDone
	// (where `baton-transfer-rejected: before-write` would be, CONTRACT
	//
	UpstreamTrailer metadata.MD
	// Done: the proxy finished handling the call (answered, dropped after the
	// caller gave up, or cut).
	Done bool
}

// epoch holds the call counters and records of one plan.
type epoch struct {
	next    map[string]int
	seq     int
	records map[string][]*CallRecord
}

func newEpoch() *epoch {
	return &epoch{next: map[string]int{}, records: map[string][]*CallRecord{}}
}

// begin decides the step for a new call of method under the current plan and
// records it; the returned record is updated under p.mu only.
func (p *Proxy) begin(method string) *CallRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	ep := p.epoch
	idx := ep.next[method]
	ep.next[method]++
	step, random := p.plan.Decide(method, idx)
	rec := &CallRecord{Method: method, Index: idx, Seq: ep.seq, Step: step, Random: random}
	ep.seq++
	ep.records[method] = append(ep.records[method], rec)
	p.notifyLocked()
	return rec
}

// update applies f to rec under the lock and wakes waiters.
func (p *Proxy) update(rec *CallRecord, f func(*CallRecord)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(rec)
	p.notifyLocked()
}

func (p *Proxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Calls returns copies of the records of method's calls under the current
// plan, in Index order (calls still in progress included, Done false).
func (p *Proxy) Calls(method string) []CallRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return copyRecords(p.epoch.records[method])
}

// AllCalls returns copies of every record under the current plan, in Seq
// (arrival) order.
func (p *Proxy) AllCalls() []CallRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	var all []*CallRecord
	for _, rs := range p.epoch.records {
		all = append(all, rs...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	return copyRecords(all)
}

// WaitCalls blocks until at least n calls of method under the current plan
// are Done and returns Calls(method); it returns ctx's error (with the
// records so far) if ctx ends first. Use it after the caller saw its result,
// since the proxy may finish a dropped call a moment after the caller's
// deadline.
func (p *Proxy) WaitCalls(ctx context.Context, method string, n int) ([]CallRecord, error) {
	for {
		p.mu.Lock()
		done := 0
		for _, r := range p.epoch.records[method] {
			if r.Done {
				done++
			}
		}
		recs := copyRecords(p.epoch.records[method])
		ch := p.changed
		p.mu.Unlock()
		if done >= n {
			return recs, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return recs, ctx.Err()
		}
	}
}

// WaitArrived blocks until at least n calls of method under the current plan
// have arrived at the proxy (done or not), or ctx ends.
func (p *Proxy) WaitArrived(ctx context.Context, method string, n int) error {
	for {
		p.mu.Lock()
		arrived := len(p.epoch.records[method])
		ch := p.changed
		p.mu.Unlock()
		if arrived >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func copyRecords(rs []*CallRecord) []CallRecord {
	out := make([]CallRecord, len(rs))
	for i, r := range rs {
		out[i] = *r
		out[i].UpstreamTrailer = r.UpstreamTrailer.Copy()
	}
	return out
}
