package xfer

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestWriteHappyPath: register, metadata, write whole regions and a
// sub-range, status, repost, release, deregister, on both backends; the
// bytes land exactly where the descriptors say and the tables end empty.
func TestWriteHappyPath(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			seed := testSeed(t)
			p := bc.make(t, nil)
			peer := p.connect(t)
			dstA, dstB := filled(100_000, canary), filled(3000, canary)
			creg := register(t, p.cons, dstA, dstB)
			srcA, srcB := randomBytes(seed, len(dstA)), randomBytes(seed+1, len(dstB))
			preg := register(t, p.prod, srcA, srcB)

			req, err := p.prod.CreateWrite(preg.Descriptors, peer, creg.Descriptors)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.prod.Status(req); !errors.Is(err, ErrNotPosted) {
				t.Fatalf("Status before Post = %v, want ErrNotPosted", err)
			}
			for round := range 2 { // a finished request may be posted again
				st, err := p.prod.Post(req)
				if err != nil || (st != StatusDone && st != StatusInProgress) {
					t.Fatalf("round %d: Post = %v, %v", round, st, err)
				}
				if st, err := wait(t, p.prod, req); st != StatusDone || err != nil {
					t.Fatalf("round %d: Wait = %v, %v; want NIXL_SUCCESS", round, st, err)
				}
				if ev := p.event(t); ev.Outcome != InboundLanded || ev.Landed != uint64(len(dstA)+len(dstB)) || ev.From != "producer" {
					t.Fatalf("round %d: inbound event %+v, want landed %d bytes", round, ev, len(dstA)+len(dstB))
				}
			}
			if !bytes.Equal(dstA, srcA) || !bytes.Equal(dstB, srcB) {
				t.Fatal("destination differs from source after a completed write")
			}
			if err := p.prod.Release(req); err != nil {
				t.Fatal(err)
			}

			// A sub-range into a sub-range: only those bytes change.
			for i := range dstA {
				dstA[i] = canary
			}
			local, _ := preg.Descriptors[1].Sub(100, 500)
			remote, _ := creg.Descriptors[0].Sub(70_000, 500)
			if err := write(t, p.prod, []Descriptor{local}, peer, []Descriptor{remote}); err != nil {
				t.Fatalf("sub-range write = %v", err)
			}
			p.event(t)
			if !bytes.Equal(dstA[70_000:70_500], srcB[100:600]) || !allCanary(dstA[:70_000]) || !allCanary(dstA[70_500:]) {
				t.Fatal("sub-range write touched bytes outside its descriptor")
			}

			for _, a := range []struct {
				agent Agent
				reg   *Registration
			}{{p.prod, preg}, {p.cons, creg}} {
				if err := a.agent.Deregister(a.reg); err != nil {
					t.Fatalf("%s.Deregister = %v", a.agent.Name(), err)
				}
				if err := a.agent.Deregister(a.reg); !errors.Is(err, ErrNotFound) {
					t.Fatalf("second Deregister = %v, want ErrNotFound", err)
				}
			}
			if err := p.prod.InvalidateRemoteMetadata(peer); err != nil {
				t.Fatal(err)
			}
			mustZero(t, p.prod)
			mustZero(t, p.cons)
		})
	}
}

// TestCreateWriteRejections: every definite pre-write rejection of
// CreateWrite, with its sentinel; none creates a request or sends a byte.
func TestCreateWriteRejections(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			p := bc.make(t, nil)
			peer := p.connect(t)
			dst := filled(4096, canary)
			creg := register(t, p.cons, dst)
			src := make([]byte, 4096)
			preg := register(t, p.prod, src)
			l, r := preg.Descriptors[0], creg.Descriptors[0]
			half, _ := l.Sub(0, 2048)
			cuda := r
			cuda.MemoryKind = MemoryCUDA
			wrap := r
			wrap.Address = ^uint64(0) - 10
			longKey := r
			longKey.RemoteKey = make([]byte, maxRemoteKeyBytes+1)
			noKey := r
			noKey.RemoteKey = nil
			unregistered := l
			unregistered.RemoteKey = nil
			unregistered.Address = l.Address + l.Length + 1
			foreignKey := l
			foreignKey.RemoteKey = r.RemoteKey // the consumer's key is not ours
			many := make([]Descriptor, MaxSegments+1)
			for i := range many {
				many[i], _ = l.Sub(uint64(i%4), 1)
			}
			cases := []struct {
				name          string
				local, remote []Descriptor
				peer          string
				want          error
			}{
				{"no descriptors", nil, nil, peer, ErrInvalidParam},
				{"count mismatch", []Descriptor{l}, []Descriptor{r, r}, peer, ErrMismatch},
				{"length mismatch", []Descriptor{half}, []Descriptor{r}, peer, ErrMismatch},
				{"unknown peer", []Descriptor{l}, []Descriptor{r}, "nobody", ErrNotFound},
				{"local range not registered", []Descriptor{unregistered}, []Descriptor{r}, peer, ErrNotFound},
				{"local key of another agent", []Descriptor{foreignKey}, []Descriptor{r}, peer, ErrNotFound},
				{"remote cuda memory", []Descriptor{l}, []Descriptor{cuda}, peer, ErrNotSupported},
				{"remote range wraps", []Descriptor{l}, []Descriptor{wrap}, peer, ErrInvalidParam},
				{"remote key too long", []Descriptor{l}, []Descriptor{longKey}, peer, ErrInvalidParam},
				{"remote key missing", []Descriptor{l}, []Descriptor{noKey}, peer, ErrInvalidParam},
				{"too many segments", many, many, peer, ErrInvalidParam},
			}
			for _, tc := range cases {
				req, err := p.prod.CreateWrite(tc.local, tc.peer, tc.remote)
				if !errors.Is(err, tc.want) || req != nil {
					t.Errorf("%s: CreateWrite = %v, %v; want %v", tc.name, req, err, tc.want)
				}
			}
			if n := p.prod.Counters().Requests; n != 0 {
				t.Fatalf("%d requests exist after rejected CreateWrites", n)
			}
			if !allCanary(dst) || p.cons.Counters().InboundInFlight != 0 || len(p.events) != 0 {
				t.Fatal("a rejected CreateWrite reached the consumer")
			}
		})
	}
}

// TestTargetRefusesBadRemote: a wrong remote key or a range outside the
// registered region is refused by the target before any byte is written;
// the producer sees only an uncertain ErrBackend (never "bad key"), the
// consumer's memory is untouched, and its next valid write succeeds.
func TestTargetRefusesBadRemote(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			seed := testSeed(t)
			p := bc.make(t, nil)
			peer := p.connect(t)
			dstA, dstB := filled(8192, canary), filled(8192, canary)
			creg := register(t, p.cons, dstA, dstB)
			src := randomBytes(seed, 8192+5)
			preg := register(t, p.prod, src)
			a, b := creg.Descriptors[0], creg.Descriptors[1]
			long := preg.Descriptors[0]
			l, _ := long.Sub(0, 8192)
			l16, _ := l.Sub(0, 16)
			mutate := func(f func(d *Descriptor)) Descriptor {
				d := a
				d.RemoteKey = append([]byte(nil), a.RemoteKey...)
				f(&d)
				return d
			}
			cases := []struct {
				name   string
				local  Descriptor
				remote Descriptor
				reason string
			}{
				{"wrong key", l, mutate(func(d *Descriptor) { d.RemoteKey[0] ^= 1 }), "unknown remote key"},
				{"short key", l, mutate(func(d *Descriptor) { d.RemoteKey = d.RemoteKey[:8] }), "unknown remote key"},
				{"past the end", l16, mutate(func(d *Descriptor) { d.Address += d.Length - 8; d.Length = 16 }), "range outside its region"},
				{"before the start", l16, mutate(func(d *Descriptor) { d.Address -= 8; d.Length = 16 }), "range outside its region"},
				{"into the next region", l16, mutate(func(d *Descriptor) { d.Address = b.Address; d.Length = 16 }), "range outside its region"},
				{"longer than the region", long, mutate(func(d *Descriptor) { d.Length += 5 }), "range outside its region"},
			}
			for _, tc := range cases {
				if tc.local.Length != tc.remote.Length {
					t.Fatalf("%s: test bug: lengths %d and %d", tc.name, tc.local.Length, tc.remote.Length)
				}
				err := write(t, p.prod, []Descriptor{tc.local}, peer, []Descriptor{tc.remote})
				if !errors.Is(err, ErrBackend) {
					t.Errorf("%s: write = %v, want ErrBackend", tc.name, err)
				}
				for _, leak := range []string{"key", "region", "bounds"} {
					if err != nil && strings.Contains(err.Error(), leak) {
						t.Errorf("%s: initiator error %q names the target's reason (%q)", tc.name, err, leak)
					}
				}
				if ev := p.event(t); ev.Outcome != InboundRefused || ev.Landed != 0 || ev.Reason != tc.reason {
					t.Errorf("%s: inbound event %+v, want refused: %s", tc.name, ev, tc.reason)
				}
				if !allCanary(dstA) || !allCanary(dstB) {
					t.Fatalf("%s: a refused write changed the consumer's memory", tc.name)
				}
			}
			if err := write(t, p.prod, []Descriptor{l}, peer, []Descriptor{a}); err != nil {
				t.Fatalf("valid write after refusals = %v", err)
			}
			if p.event(t).Outcome != InboundLanded || !bytes.Equal(dstA, src[:8192]) {
				t.Fatal("valid write after refusals did not land")
			}
		})
	}
}
