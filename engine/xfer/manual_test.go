package xfer

import (
	"bytes"
	"errors"
	"testing"
)

// manualPair is a producer and a consumer agent of one ManualNetwork; the
// producer's next Post takes fault.
type manualPair struct {
	net        *ManualNetwork
	prod, cons Agent
	fault      Fault
	events     []InboundEvent
	md         []byte
}

func newManualPair(t *testing.T) *manualPair {
	t.Helper()
	m := &manualPair{net: NewManualNetwork()}
	var err error
	if m.cons, err = NewManual(m.net, Options{Name: "consumer", OnInbound: func(ev InboundEvent) { m.events = append(m.events, ev) }}); err != nil {
		t.Fatal(err)
	}
	if m.prod, err = NewManual(m.net, Options{Name: "producer", Faults: func(WriteInfo) Fault { return m.fault }}); err != nil {
		t.Fatal(err)
	}
	if m.md, err = m.cons.LocalMetadata(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.prod.Close(); m.cons.Close() })
	return m
}

// post registers src and dst, creates the WRITE src -> dst and posts it;
// Post must answer StatusInProgress.
func (m *manualPair) post(t *testing.T, src, dst []byte) (*Request, *Registration, *Registration) {
	t.Helper()
	s := register(t, m.prod, src)
	d := register(t, m.cons, dst)
	req, err := m.prod.CreateWriteTo(s.Descriptors, m.md, d.Descriptors)
	if err != nil {
		t.Fatalf("CreateWriteTo = %v", err)
	}
	if st, err := m.prod.Post(req); err != nil || st != StatusInProgress {
		t.Fatalf("Post = %v, %v; want NIXL_IN_PROG, nil", st, err)
	}
	return req, s, d
}

// TestManualWriteMovesOnlyWhenStepped: a posted WRITE touches nothing
// until Deliver, is in flight until Complete, and then is done; the
// consumer's region counts it in flight from Post to Deliver.
func TestManualWriteMovesOnlyWhenStepped(t *testing.T) {
	m := newManualPair(t)
	src, dst := randomBytes(7, 300), filled(300, canary)
	req, s, d := m.post(t, src, dst)
	if !bytes.Equal(dst, filled(300, canary)) {
		t.Fatal("bytes landed at Post")
	}
	if c := m.cons.Counters(); c.InboundInFlight != 1 {
		t.Errorf("consumer InboundInFlight after Post = %d; want 1 (accepted)", c.InboundInFlight)
	}
	if err := m.cons.Deregister(d); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("consumer Deregister during an accepted WRITE = %v; want ErrNotAllowed", err)
	}
	if err := m.net.Deliver(req); err != nil {
		t.Fatalf("Deliver = %v", err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("Deliver did not land the bytes")
	}
	if len(m.events) != 1 || m.events[0].Outcome != InboundLanded || m.events[0].Landed != 300 {
		t.Errorf("OnInbound = %+v; want one InboundLanded of 300 bytes", m.events)
	}
	if st, err := m.prod.Status(req); err != nil || st != StatusInProgress {
		t.Errorf("Status before Complete = %v, %v; want NIXL_IN_PROG (no acknowledgement yet)", st, err)
	}
	if err := m.prod.Release(req); !errors.Is(err, ErrRepostActive) {
		t.Errorf("Release before Complete = %v; want ErrRepostActive", err)
	}
	if err := m.net.Complete(req); err != nil {
		t.Fatalf("Complete = %v", err)
	}
	if st, err := m.prod.Status(req); err != nil || st != StatusDone {
		t.Errorf("Status after Complete = %v, %v; want NIXL_SUCCESS", st, err)
	}
	if err := m.prod.Release(req); err != nil {
		t.Fatal(err)
	}
	if err := m.prod.Deregister(s); err != nil {
		t.Fatal(err)
	}
	if err := m.cons.Deregister(d); err != nil {
		t.Fatal(err)
	}
	if n := m.net.Pending(); n != 0 {
		t.Errorf("Pending = %d; want 0", n)
	}
}

// TestManualRevokeWaitsForAcceptedWrite: a WRITE accepted before the
// consumer's Revoke still lands at Deliver and Revoke is done only then
// a WRITE posted after the Revoke is refused before a byte lands.
func TestManualRevokeWaitsForAcceptedWrite(t *testing.T) {
	m := newManualPair(t)
	src, dst := randomBytes(8, 100), filled(100, canary)
	req, _, d := m.post(t, src, dst)
	done, err := m.cons.Revoke(d)
	if err != nil {
		t.Fatal(err)
	}
	if isDone(done) {
		t.Fatal("Revoke done while an accepted WRITE is in flight")
	}
	if err := m.net.Deliver(req); err != nil {
		t.Fatalf("Deliver = %v", err)
	}
	if !isDone(done) {
		t.Fatal("Revoke not done once the accepted WRITE ended")
	}
	if !bytes.Equal(dst, src) {
		t.Error("the accepted WRITE did not land")
	}
	must0(t, m.net.Complete(req))
	must0(t, m.prod.Release(req))

	// A later WRITE naming the revoked region: refused at Post, fails at Complete.
	s2 := register(t, m.prod, randomBytes(9, 100))
	req2, err := m.prod.CreateWriteTo(s2.Descriptors, m.md, d.Descriptors)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.prod.Post(req2); err != nil {
		t.Fatal(err)
	}
	before := append([]byte(nil), dst...)
	if err := m.net.Deliver(req2); !errors.Is(err, ErrBackend) {
		t.Errorf("Deliver of a WRITE to a revoked region = %v; want ErrBackend", err)
	}
	if !bytes.Equal(dst, before) {
		t.Error("a WRITE to a revoked region landed")
	}
	if err := m.net.Complete(req2); !errors.Is(err, ErrBackend) {
		t.Errorf("Complete = %v; want ErrBackend", err)
	}
	if _, err := m.prod.Status(req2); !errors.Is(err, ErrBackend) {
		t.Errorf("Status = %v; want ErrBackend", err)
	}
}

// TestManualFaults: FaultFailAfter lands its first bytes and fails,
// FaultLoseAck lands every byte and fails, Cut lands nothing, a closed
// target and a closed initiator end their transfers.
func TestManualFaults(t *testing.T) {
	cases := []struct {
		name   string
		fault  Fault
		step   func(m *manualPair, req *Request) error
		landed int
		want   error
	}{
		{"fail-after", Fault{Kind: FaultFailAfter, AfterBytes: 10}, func(m *manualPair, r *Request) error { return m.net.Deliver(r) }, 10, ErrRemoteDisconnect},
		{"fail-before", Fault{Kind: FaultFailAfter}, func(m *manualPair, r *Request) error { return m.net.Deliver(r) }, 0, ErrRemoteDisconnect},
		{"lose-ack", Fault{Kind: FaultLoseAck}, func(m *manualPair, r *Request) error { return m.net.Deliver(r) }, 64, ErrRemoteDisconnect},
		{"cut", Fault{}, func(m *manualPair, r *Request) error { return m.net.Cut(r) }, 0, ErrRemoteDisconnect},
		{"complete-undelivered", Fault{}, func(*manualPair, *Request) error { return errors.New("none") }, 0, ErrRemoteDisconnect},
		{"target-closed", Fault{}, func(m *manualPair, r *Request) error { m.cons.Close(); return m.net.Deliver(r) }, 0, ErrRemoteDisconnect},
		{"hang-is-none", Fault{Kind: FaultHang, Hang: NewHang()}, func(m *manualPair, r *Request) error { return m.net.Deliver(r) }, 64, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newManualPair(t)
			m.fault = tc.fault
			src, dst := randomBytes(3, 64), filled(64, canary)
			req, _, _ := m.post(t, src, dst)
			_ = tc.step(m, req)
			if err := m.net.Complete(req); !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Errorf("Complete = %v; want %v", err, tc.want)
			}
			if !bytes.Equal(dst[:tc.landed], src[:tc.landed]) || !bytes.Equal(dst[tc.landed:], filled(64-tc.landed, canary)) {
				t.Errorf("target holds %x; want the first %d source bytes, canary after", dst, tc.landed)
			}
			if c := m.cons.Counters(); c.InboundInFlight != 0 {
				t.Errorf("consumer InboundInFlight = %d; want 0", c.InboundInFlight)
			}
		})
	}
	t.Run("initiator-closed", func(t *testing.T) {
		m := newManualPair(t)
		req, _, _ := m.post(t, randomBytes(4, 64), filled(64, canary))
		must0(t, m.prod.Close())
		if _, err := m.prod.Status(req); !errors.Is(err, ErrCanceled) {
			t.Errorf("Status after the initiator's Close = %v; want ErrCanceled", err)
		}
		if c := m.cons.Counters(); c.InboundInFlight != 0 {
			t.Errorf("consumer InboundInFlight = %d; want 0", c.InboundInFlight)
		}
		if err := m.net.Deliver(req); !errors.Is(err, ErrInvalidParam) {
			t.Errorf("Deliver after Close = %v; want ErrInvalidParam", err)
		}
	})
}

// TestManualRead: a READ posted on a manual agent pulls the target's bytes
// at Deliver.
func TestManualRead(t *testing.T) {
	m := newManualPair(t)
	kv := randomBytes(5, 128)
	kvReg := register(t, m.cons, kv)
	dst := filled(128, canary)
	dReg := register(t, m.prod, dst)
	req, err := m.prod.CreateReadFrom(dReg.Descriptors, m.md, kvReg.Descriptors)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := m.prod.Post(req); err != nil || st != StatusInProgress {
		t.Fatalf("Post = %v, %v", st, err)
	}
	must0(t, m.net.Deliver(req))
	must0(t, m.net.Complete(req))
	if !bytes.Equal(dst, kv) {
		t.Error("READ did not copy the target's bytes")
	}
}

// TestManualMisuse: the network's steps refuse requests that are not its
// pending transfers, and a second Deliver; NewManual refuses a nil network
// and a taken name.
func TestManualMisuse(t *testing.T) {
	m := newManualPair(t)
	if _, err := NewManual(nil, Options{Name: "x"}); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("NewManual(nil) = %v; want ErrInvalidParam", err)
	}
	if _, err := NewManual(m.net, Options{Name: "consumer"}); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("NewManual(taken name) = %v; want ErrInvalidParam", err)
	}
	if _, err := NewManual(m.net, Options{Name: ""}); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("NewManual(empty name) = %v; want ErrInvalidParam", err)
	}
	for name, step := range map[string]func(*Request) error{"Deliver": m.net.Deliver, "Cut": m.net.Cut, "Complete": m.net.Complete} {
		if err := step(nil); !errors.Is(err, ErrInvalidParam) {
			t.Errorf("%s(nil) = %v; want ErrInvalidParam", name, err)
		}
	}
	s := register(t, m.prod, randomBytes(6, 16))
	d := register(t, m.cons, filled(16, canary))
	req, err := m.prod.CreateWriteTo(s.Descriptors, m.md, d.Descriptors)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.net.Deliver(req); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("Deliver of a request never posted = %v; want ErrInvalidParam", err)
	}
	if _, err := m.prod.Post(req); err != nil {
		t.Fatal(err)
	}
	if _, err := m.prod.Post(req); !errors.Is(err, ErrRepostActive) {
		t.Errorf("second Post while held = %v; want ErrRepostActive", err)
	}
	must0(t, m.net.Deliver(req))
	if err := m.net.Deliver(req); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("second Deliver = %v; want ErrNotAllowed", err)
	}
	must0(t, m.net.Complete(req))
	if err := m.net.Complete(req); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("second Complete = %v; want ErrInvalidParam", err)
	}
	// Metadata of another network (another registry) is refused before anything is created.
	other := NewManualNetwork()
	o, err := NewManual(other, Options{Name: "consumer"})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	omd, _ := o.LocalMetadata()
	if _, err := m.prod.CreateWriteTo(s.Descriptors, omd, d.Descriptors); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("CreateWriteTo with another network's metadata = %v; want ErrInvalidParam", err)
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestManualCloseEndsTransfersInPostOrder: closing an agent with several
// transfers pending ends them in the order they were posted, on every run
// (the simulator's traces are a function of the seed alone); a scan in the
// pending map's order failed this within a few rounds.
func TestManualCloseEndsTransfersInPostOrder(t *testing.T) {
	for round := 0; round < 20; round++ {
		for _, closeTarget := range []bool{false, true} {
			m := newManualPair(t)
			const n = 6
			for i := 0; i < n; i++ {
				m.post(t, randomBytes(uint64(i+1), 10*(i+1)), filled(10*(i+1), canary))
			}
			if closeTarget {
				m.cons.Close()
			} else {
				m.prod.Close()
			}
			if len(m.events) != n {
				t.Fatalf("round %d: %d inbound events after Close; want %d", round, len(m.events), n)
			}
			for i, ev := range m.events {
				if ev.Bytes != uint64(10*(i+1)) {
					t.Fatalf("round %d (close target %v): event %d is the WRITE of %d bytes; want %d (post order)", round, closeTarget, i, ev.Bytes, 10*(i+1))
				}
			}
		}
	}
}

// TestRegistrationsInlineNeverReused: the one-region registrations an
// agent holds in its own allocation (core.onesInline) and in its blocks
// (onesBlock) are each taken once, so a deregistered handle stays unknown
// while later ones are registered.
func TestRegistrationsInlineNeverReused(t *testing.T) {
	a, err := NewManual(NewManualNetwork(), Options{Name: "A"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*Registration]bool{}
	for i := 0; i < oneRegionsInline+2*onesBlock+1; i++ {
		reg, err := a.RegisterMemory([][]byte{make([]byte, 8)})
		if err != nil {
			t.Fatal(err)
		}
		if seen[reg] {
			t.Fatalf("registration %d reuses an earlier handle", i)
		}
		seen[reg] = true
		if err := a.Deregister(reg); err != nil {
			t.Fatal(err)
		}
	}
	for reg := range seen {
		if err := a.Deregister(reg); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Deregister of a deregistered handle: %v, want ErrNotFound", err)
		}
	}
}

// TestRegionByKeyPastScan: the regions of live registrations are found by
// their keys, and those of ended ones are not, below and above the count
// at which the agent indexes them in a map (keyScanMax).
func TestRegionByKeyPastScan(t *testing.T) {
	a, err := NewManual(NewManualNetwork(), Options{Name: "A"})
	if err != nil {
		t.Fatal(err)
	}
	c := a.(*core)
	var regs []*Registration
	check := func(live map[*Registration]bool) {
		t.Helper()
		for _, reg := range regs {
			for _, d := range reg.Descriptors {
				c.mu.Lock()
				r := c.regionByKey(d.RemoteKey)
				c.mu.Unlock()
				if (r != nil) != live[reg] || r != nil && r.base != d.Address {
					t.Fatalf("key of %v (live %v): region %v", d, live[reg], r)
				}
			}
		}
	}
	live := map[*Registration]bool{}
	for i := 0; i < 2*keyScanMax+1; i++ {
		regions := [][]byte{make([]byte, 8)}
		if i%3 == 0 {
			regions = append(regions, make([]byte, 8))
		}
		reg, err := a.RegisterMemory(regions)
		if err != nil {
			t.Fatal(err)
		}
		regs, live[reg] = append(regs, reg), true
		if i%4 == 1 {
			if err := a.Deregister(regs[i/2]); err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			live[regs[i/2]] = false
		}
		check(live)
	}
	if c.byKey == nil {
		t.Fatal("the regions were never indexed in a map")
	}
	for _, reg := range regs {
		if live[reg] {
			if _, err := a.Revoke(reg); err != nil {
				t.Fatal(err)
			}
			live[reg] = false
		}
	}
	check(live)
}
