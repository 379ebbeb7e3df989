package xfer

import (
	"bytes"
	"errors"
	"testing"
)

// read creates, posts and waits for one READ, then releases it; it returns
// the outcome of the wait.
func read(t *testing.T, a Agent, local []Descriptor, peer string, remote []Descriptor) error {
	t.Helper()
	req, err := a.CreateRead(local, peer, remote)
	if err != nil {
		t.Fatalf("CreateRead = %v", err)
	}
	if _, perr := a.Post(req); perr == nil {
		wait(t, a, req)
	}
	_, err = a.Status(req)
	if rerr := a.Release(req); rerr != nil {
		t.Fatalf("Release after the read ended = %v", rerr)
	}
	return err
}

// TestReadHappyPath: the initiator (p.prod) READs the target's (p.cons)
// registered regions, whole and as a sub-range, into its own registered
// memory, on both backends: the bytes land exactly where the local
// descriptors say, the target's memory is unchanged, the target reports a
// landed READ, and the tables end empty.
func TestReadHappyPath(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			seed := testSeed(t)
			p := bc.make(t, nil)
			peer := p.connect(t)
			srcA, srcB := randomBytes(seed, 100_000), randomBytes(seed+1, 32)
			keepA, keepB := append([]byte(nil), srcA...), append([]byte(nil), srcB...)
			treg := register(t, p.cons, srcA, srcB)
			dstA, dstB := filled(len(srcA), canary), filled(len(srcB), canary)
			lreg := register(t, p.prod, dstA, dstB)

			req, err := p.prod.CreateRead(lreg.Descriptors, peer, treg.Descriptors)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.prod.Status(req); !errors.Is(err, ErrNotPosted) {
				t.Fatalf("Status before Post = %v, want ErrNotPosted", err)
			}
			for round := range 2 { // a finished READ may be posted again
				st, err := p.prod.Post(req)
				if err != nil || (st != StatusDone && st != StatusInProgress) {
					t.Fatalf("round %d: Post = %v, %v", round, st, err)
				}
				if st, err := wait(t, p.prod, req); st != StatusDone || err != nil {
					t.Fatalf("round %d: Wait = %v, %v; want NIXL_SUCCESS", round, st, err)
				}
				want := uint64(len(srcA) + len(srcB))
				if ev := p.event(t); !ev.Read || ev.Outcome != InboundLanded || ev.Landed != want || ev.From != "producer" {
					t.Fatalf("round %d: inbound event %+v, want a landed READ of %d bytes", round, ev, want)
				}
				// The target's end of its mark precedes completion, so its
				// region may be deregistered right now (not done here: the
				// next round reads it again).
				if c := p.cons.Counters(); c.InboundInFlight != 0 {
					t.Fatalf("round %d: target InboundInFlight = %d after the READ completed", round, c.InboundInFlight)
				}
			}
			if !bytes.Equal(dstA, srcA) || !bytes.Equal(dstB, srcB) {
				t.Fatal("local destinations differ from the target's regions after a completed READ")
			}
			if !bytes.Equal(srcA, keepA) || !bytes.Equal(srcB, keepB) {
				t.Fatal("a READ changed the target's memory")
			}
			if err := p.prod.Deregister(lreg); !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("Deregister of the destinations while the READ is unreleased = %v, want ErrNotAllowed", err)
			}
			if err := p.prod.Release(req); err != nil {
				t.Fatal(err)
			}

			// A sub-range into a sub-range: only those local bytes change.
			for i := range dstA {
				dstA[i] = canary
			}
			local, _ := lreg.Descriptors[0].Sub(70_000, 20)
			remote, _ := treg.Descriptors[1].Sub(5, 20)
			if err := read(t, p.prod, []Descriptor{local}, peer, []Descriptor{remote}); err != nil {
				t.Fatalf("sub-range read = %v", err)
			}
			if ev := p.event(t); !ev.Read || ev.Landed != 20 {
				t.Fatalf("sub-range inbound event %+v, want a READ of 20 bytes", ev)
			}
			if !bytes.Equal(dstA[70_000:70_020], srcB[5:25]) || !allCanary(dstA[:70_000]) || !allCanary(dstA[70_020:]) {
				t.Fatal("sub-range read touched bytes outside its local descriptor")
			}

			if err := p.cons.Deregister(treg); err != nil {
				t.Fatalf("target Deregister = %v", err)
			}
			if err := p.prod.Deregister(lreg); err != nil {
				t.Fatalf("initiator Deregister = %v", err)
			}
			if err := p.prod.InvalidateRemoteMetadata(peer); err != nil {
				t.Fatal(err)
			}
			mustZero(t, p.prod)
			mustZero(t, p.cons)
		})
	}
}

// TestReadRefusedByTarget: a READ naming a wrong remote key, a range past
// the region, or a region the target has deregistered is refused by the
// target; the initiator sees ErrBackend (uncertain by the collapse rules)
// with its destination untouched, the target reports the refusal, and a
// valid READ afterwards works.
func TestReadRefusedByTarget(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			seed := testSeed(t)
			p := bc.make(t, nil)
			peer := p.connect(t)
			src := randomBytes(seed, 4096)
			treg := register(t, p.cons, src)
			gone := register(t, p.cons, randomBytes(seed+1, 64))
			goneDesc := gone.Descriptors[0]
			if err := p.cons.Deregister(gone); err != nil {
				t.Fatal(err)
			}
			dst := filled(4096, canary)
			lreg := register(t, p.prod, dst)
			d := treg.Descriptors[0]

			badKey := d
			badKey.RemoteKey = bytes.Repeat([]byte{0x42}, remoteKeyBytes)
			past := d
			past.Address += 4000
			past.Length = 100
			local100, _ := lreg.Descriptors[0].Sub(0, 100)
			local64, _ := lreg.Descriptors[0].Sub(0, 64)
			cases := []struct {
				name          string
				local, remote Descriptor
			}{
				{"wrong remote key", lreg.Descriptors[0], badKey},
				{"range past the region", local100, past},
				{"deregistered region", local64, goneDesc},
			}
			for _, tc := range cases {
				err := read(t, p.prod, []Descriptor{tc.local}, peer, []Descriptor{tc.remote})
				if !errors.Is(err, ErrBackend) {
					t.Errorf("%s: READ = %v, want ErrBackend", tc.name, err)
				}
				if ev := p.event(t); !ev.Read || ev.Outcome != InboundRefused || ev.Landed != 0 {
					t.Errorf("%s: inbound event %+v, want a refused READ", tc.name, ev)
				}
				if !allCanary(dst) {
					t.Fatalf("%s: a refused READ wrote into the local destination", tc.name)
				}
			}
			if err := read(t, p.prod, lreg.Descriptors, peer, treg.Descriptors); err != nil {
				t.Fatalf("valid READ after refusals = %v", err)
			}
			p.event(t)
			if !bytes.Equal(dst, src) {
				t.Fatal("valid READ after refusals: destination differs")
			}
			if err := p.cons.Deregister(treg); err != nil {
				t.Fatal(err)
			}
			if err := p.prod.Deregister(lreg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCreateReadArguments: malformed CreateRead calls fail at once with the
// definite errors (nothing is sent) and leave no request behind.
func TestCreateReadArguments(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			p := bc.make(t, nil)
			peer := p.connect(t)
			treg := register(t, p.cons, filled(64, 1))
			lreg := register(t, p.prod, filled(64, canary))
			l, r := lreg.Descriptors[0], treg.Descriptors[0]
			short, _ := l.Sub(0, 32)
			cuda := r
			cuda.MemoryKind = MemoryCUDA
			unregistered := l
			unregistered.Address += 1 << 30
			unregistered.RemoteKey = nil
			cases := []struct {
				name   string
				local  []Descriptor
				peer   string
				remote []Descriptor
				want   error
			}{
				{"no descriptors", nil, peer, nil, ErrInvalidParam},
				{"counts differ", []Descriptor{l}, peer, []Descriptor{r, r}, ErrMismatch},
				{"lengths differ", []Descriptor{short}, peer, []Descriptor{r}, ErrMismatch},
				{"unknown peer", []Descriptor{l}, "nobody", []Descriptor{r}, ErrNotFound},
				{"unregistered local range", []Descriptor{unregistered}, peer, []Descriptor{r}, ErrNotFound},
				{"cuda remote", []Descriptor{l}, peer, []Descriptor{cuda}, ErrNotSupported},
			}
			for _, tc := range cases {
				req, err := p.prod.CreateRead(tc.local, tc.peer, tc.remote)
				if req != nil || !errors.Is(err, tc.want) {
					t.Errorf("%s: CreateRead = %v, %v; want %v", tc.name, req, err, tc.want)
				}
			}
			if c := p.prod.Counters(); c.Requests != 0 {
				t.Fatalf("requests left after failed CreateRead calls: %+v", c)
			}
		})
	}
}

// TestReadFaults: a READ cut after N bytes leaves exactly those N bytes in
// the local destination and fails uncertain; a lost completion leaves every
// byte and fails uncertain; a hung READ refuses Release and the initiator's
// Deregister until it ends (and, on loopback, the target's), and a resumed
// one completes.
func TestReadFaults(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			seed := testSeed(t)
			hang := NewHang()
			faults := map[uint64]Fault{
				1: {Kind: FaultFailAfter, AfterBytes: 1000},
				2: {Kind: FaultLoseAck},
				3: {Kind: FaultHang, AfterBytes: 500, Hang: hang},
			}
			p := bc.make(t, func(w WriteInfo) Fault {
				if !w.Read {
					t.Errorf("fault hook saw WriteInfo.Read = false for a READ")
				}
				return faults[w.Seq]
			})
			peer := p.connect(t)
			src := randomBytes(seed, 50_000)
			treg := register(t, p.cons, src)
			dst := filled(len(src), canary)
			lreg := register(t, p.prod, dst)

			// 1: cut after 1000 bytes.
			if err := read(t, p.prod, lreg.Descriptors, peer, treg.Descriptors); !isUncertain(err) {
				t.Fatalf("READ cut after 1000 bytes = %v, want an uncertain error", err)
			}
			if ev := p.event(t); !ev.Read || ev.Outcome == InboundRefused {
				t.Fatalf("inbound event of the cut READ %+v", ev)
			}
			if !bytes.Equal(dst[:1000], src[:1000]) || !allCanary(dst[1000:]) {
				t.Fatal("cut READ: local destination holds other bytes than the first 1000")
			}

			// 2: completion lost after every byte landed.
			if err := read(t, p.prod, lreg.Descriptors, peer, treg.Descriptors); !isUncertain(err) {
				t.Fatalf("READ with a lost completion = %v, want an uncertain error", err)
			}
			p.event(t)
			if !bytes.Equal(dst, src) {
				t.Fatal("READ with a lost completion: not every byte landed")
			}

			// 3: hang, then resume.
			for i := range dst {
				dst[i] = canary
			}
			req, err := p.prod.CreateRead(lreg.Descriptors, peer, treg.Descriptors)
			if err != nil {
				t.Fatal(err)
			}
			if st, err := p.prod.Post(req); st != StatusInProgress || err != nil {
				t.Fatalf("Post = %v, %v; want NIXL_IN_PROG", st, err)
			}
			<-hang.Reached()
			if err := p.prod.Release(req); !errors.Is(err, ErrRepostActive) {
				t.Fatalf("Release during the hang = %v, want ErrRepostActive", err)
			}
			if err := p.prod.Deregister(lreg); !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("initiator Deregister during the hang = %v, want ErrNotAllowed", err)
			}
			// On loopback the target's part lasts as long as the hang; over
			// tcp the target may already have sent every byte into the
			// socket and ended its mark, so only loopback is checked.
			if bc.name == BackendLoopback {
				if err := p.cons.Deregister(treg); !errors.Is(err, ErrNotAllowed) {
					t.Fatalf("target Deregister during the hang = %v, want ErrNotAllowed", err)
				}
			}
			hang.Resume()
			if st, err := wait(t, p.prod, req); st != StatusDone || err != nil {
				t.Fatalf("Wait after Resume = %v, %v; want NIXL_SUCCESS", st, err)
			}
			if ev := p.event(t); !ev.Read || ev.Outcome != InboundLanded {
				t.Fatalf("inbound event of the resumed READ %+v", ev)
			}
			if !bytes.Equal(dst, src) {
				t.Fatal("resumed READ: destination differs")
			}
			if err := p.prod.Release(req); err != nil {
				t.Fatal(err)
			}
			if err := p.cons.Deregister(treg); err != nil {
				t.Fatal(err)
			}
			if err := p.prod.Deregister(lreg); err != nil {
				t.Fatal(err)
			}
			p.prod.InvalidateRemoteMetadata(peer)
			mustZero(t, p.prod)
			mustZero(t, p.cons)
		})
	}
}

// TestTCPReadFrames: raw READ frames on a target's port: a valid one is
// accepted and answered with the region's bytes and the end byte; a bad key
// or a range past the region is refused without a byte of the region; a
// malformed READ header is dropped silently.
func TestTCPReadFrames(t *testing.T) {
	cons, addr, region, reg, events := tcpConsumer(t, TCPOptions{}, 256)
	copy(region, randomBytes(testSeed(t), len(region)))
	d := reg.Descriptors[0]
	seg := func(addr, n uint64, key []byte) Descriptor {
		return Descriptor{Address: addr, Length: n, MemoryKind: MemoryHost, RemoteKey: key}
	}
	valid := encodeFrame(readMagic, "raw", "consumer", []Descriptor{seg(d.Address+16, 100, d.RemoteKey)})
	cases := []struct {
		name  string
		frame []byte
		reply []byte
		event InboundOutcome // -1: none
	}{
		{"valid READ", valid, append(append([]byte{replyAccept}, region[16:116]...), replyAck), InboundLanded},
		{"unknown key", encodeFrame(readMagic, "raw", "consumer", []Descriptor{seg(d.Address, 100, []byte("guess"))}), []byte{replyRefuse}, InboundRefused},
		{"past the region", encodeFrame(readMagic, "raw", "consumer", []Descriptor{seg(d.Address+200, 100, d.RemoteKey)}), []byte{replyRefuse}, InboundRefused},
		{"another agent's name", encodeFrame(readMagic, "raw", "someone", []Descriptor{seg(d.Address, 10, d.RemoteKey)}), []byte{replyRefuse}, InboundRefused},
		{"truncated READ header", valid[:len(valid)-3], nil, -1},
		{"zero-length segment", encodeFrame(readMagic, "raw", "consumer", []Descriptor{seg(d.Address, 0, d.RemoteKey)}), nil, -1},
	}
	for _, tc := range cases {
		got := rawExchange(t, addr, tc.frame, true)
		if !bytes.Equal(got, tc.reply) {
			t.Errorf("%s: target answered %d bytes %x, want %d bytes", tc.name, len(got), got, len(tc.reply))
		}
		if tc.event >= 0 {
			if ev := <-events; !ev.Read || ev.Outcome != tc.event {
				t.Errorf("%s: inbound event %+v, want a READ with outcome %d", tc.name, ev, tc.event)
			}
		}
	}
	select {
	case ev := <-events:
		t.Fatalf("unexpected inbound event %+v", ev)
	default:
	}
	if err := cons.Deregister(reg); err != nil {
		t.Fatal(err)
	}
}
