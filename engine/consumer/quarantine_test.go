package consumer

import (
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
)

// TestQuarantineEndsOnceOnProof: a quarantine ends only once every proof
// channel has closed, at once when they are closed already; its End
// runs on removal, a second removal finds nothing, and only the memory no
// table counts is counted by UncountedQuarantine.
func TestQuarantineEndsOnceOnProof(t *testing.T) {
	r := New(handoff.ConsumerConfig{InflightQuotaBytes: 1 << 20})
	ends := 0
	r.AddQuarantine(&Quarantine{ID: "receive/a", End: func() { ends++ }})
	r.AddQuarantine(&Quarantine{ID: "kv/s/1", UncountedBytes: 64})
	if n, b := r.UncountedQuarantine(); n != 1 || b != 64 {
		t.Errorf("UncountedQuarantine() = %d, %d; want 1, 64 (the KV READ buffer only)", n, b)
	}

	p1, p2 := make(chan struct{}), make(chan struct{})
	ended := make(chan string, 1)
	OnProof([]<-chan struct{}{p1, p2}, func() { ended <- "receive/a" })
	close(p1)
	select {
	case <-ended:
		t.Fatal("OnProof ended the quarantine with a proof still open")
	default:
	}
	close(p2)
	id := <-ended
	q, left := r.RemoveQuarantine(id)
	if q == nil || q.ID != id || left != 1 || ends != 1 {
		t.Fatalf("RemoveQuarantine(%q) = %v, %d left, End ran %d times; want it, 1 left, once", id, q, left, ends)
	}
	if q, left := r.RemoveQuarantine(id); q != nil || left != 1 || ends != 1 {
		t.Errorf("second RemoveQuarantine(%q) = %v, %d left, End ran %d times; want nil, 1, once", id, q, left, ends)
	}

	now := false
	OnProof([]<-chan struct{}{p1, p2}, func() { now = true })
	if !now {
		t.Error("OnProof with every proof closed did not end on the caller's goroutine (the quarantine must end before the answer leaves)")
	}
}
