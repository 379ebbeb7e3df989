package xfer

import (
	"errors"
	"testing"
)

// TestLoadRemoteMetadataMalformed: bytes that are not metadata of the
// loading agent's backend are ErrInvalidParam and load nothing.
func TestLoadRemoteMetadataMalformed(t *testing.T) {
	reg := NewRegistry()
	lb, err := NewLoopback(reg, Options{Name: "lb"})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	tc, err := NewTCP(TCPOptions{Options: Options{Name: "tcp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	other, err := NewLoopback(NewRegistry(), Options{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	good, _ := tc.LocalMetadata()
	otherMD, _ := other.LocalMetadata()
	lbMD, _ := lb.LocalMetadata()
	with := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }

	cases := []struct {
		name  string
		agent Agent
		md    []byte
	}{
		{"nil", tc, nil},
		{"empty", tc, []byte{}},
		{"bad magic", tc, with(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"bad version", tc, with(func(b []byte) []byte { b[4] = 9; return b })},
		{"unknown backend", tc, with(func(b []byte) []byte { b[5] = 7; return b })},
		{"zero name length", tc, with(func(b []byte) []byte { b[6] = 0; return b })},
		{"name past the end", tc, with(func(b []byte) []byte { b[6] = 255; return b })},
		{"truncated", tc, good[:len(good)-1]},
		{"trailing byte", tc, append(append([]byte(nil), good...), 0)},
		{"magic only", tc, []byte("BXMD")},
		{"tcp address not host:port", tc, encodeMetadata(BackendTCP, "x", "no-port")},
		{"empty connection info", tc, encodeMetadata(BackendTCP, "x", "")},
		{"tcp metadata into loopback", lb, good},
		{"loopback metadata into tcp", tc, lbMD},
		{"another registry", lb, otherMD},
	}
	for _, c := range cases {
		peer, err := c.agent.LoadRemoteMetadata(c.md)
		if !errors.Is(err, ErrInvalidParam) || peer != "" {
			t.Errorf("%s: LoadRemoteMetadata = %q, %v; want ErrInvalidParam", c.name, peer, err)
		}
	}
	if lb.Counters().Peers != 0 || tc.Counters().Peers != 0 {
		t.Fatal("malformed metadata loaded a peer")
	}
	// Reloading replaces, and identical reloads are idempotent.
	for range 2 {
		if peer, err := tc.LoadRemoteMetadata(good); err != nil || peer != "tcp" {
			t.Fatalf("LoadRemoteMetadata(own metadata) = %q, %v", peer, err)
		}
	}
	if n := tc.Counters().Peers; n != 1 {
		t.Fatalf("%d peers after loading the same metadata twice", n)
	}
	if err := tc.InvalidateRemoteMetadata("nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("InvalidateRemoteMetadata(unknown) = %v, want ErrNotFound", err)
	}
}

// TestAgentConstructionErrors: bad names, duplicate loopback names and a nil
// registry are ErrInvalidParam.
func TestAgentConstructionErrors(t *testing.T) {
	reg := NewRegistry()
	a, err := NewLoopback(reg, Options{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'n'
	}
	for _, tc := range []struct {
		name string
		make func() (Agent, error)
	}{
		{"empty name", func() (Agent, error) { return NewLoopback(reg, Options{}) }},
		{"256-byte name", func() (Agent, error) { return NewLoopback(reg, Options{Name: string(long)}) }},
		{"NUL in name", func() (Agent, error) { return NewTCP(TCPOptions{Options: Options{Name: "a\x00b"}}) }},
		{"duplicate loopback name", func() (Agent, error) { return NewLoopback(reg, Options{Name: "a"}) }},
		{"nil registry", func() (Agent, error) { return NewLoopback(nil, Options{Name: "b"}) }},
	} {
		if ag, err := tc.make(); !errors.Is(err, ErrInvalidParam) {
			if ag != nil {
				ag.Close()
			}
			t.Errorf("%s: err = %v, want ErrInvalidParam", tc.name, err)
		}
	}
	if _, err := NewTCP(TCPOptions{Options: Options{Name: "x"}, ListenAddress: "256.0.0.1:0"}); !errors.Is(err, ErrBackend) {
		t.Errorf("NewTCP on an unusable address = %v, want ErrBackend", err)
	}
	// The name is free again once its agent closes.
	a.Close()
	b, err := NewLoopback(reg, Options{Name: "a"})
	if err != nil {
		t.Fatalf("NewLoopback after the old agent closed = %v", err)
	}
	b.Close()
}

// TestHandleMisuse: nil, foreign and released handles are refused without
// touching anything.
func TestHandleMisuse(t *testing.T) {
	reg := NewRegistry()
	a, _ := NewLoopback(reg, Options{Name: "a"})
	b, _ := NewLoopback(reg, Options{Name: "b"})
	defer a.Close()
	defer b.Close()
	md, _ := b.LocalMetadata()
	peer, _ := a.LoadRemoteMetadata(md)
	breg := register(t, b, make([]byte, 10))
	areg := register(t, a, make([]byte, 10))
	req, err := a.CreateWrite(areg.Descriptors, peer, breg.Descriptors)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Post(req); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("Post of a foreign request = %v", err)
	}
	if err := b.Release(req); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("Release of a foreign request = %v", err)
	}
	if _, err := a.Status(nil); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("Status(nil) = %v", err)
	}
	if err := a.Deregister(nil); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("Deregister(nil) = %v", err)
	}
	if err := b.Deregister(areg); !errors.Is(err, ErrNotFound) {
		t.Errorf("Deregister of a foreign registration = %v", err)
	}
	if err := a.Deregister(areg); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("Deregister with an unreleased (never posted) request = %v, want ErrNotAllowed", err)
	}
	if err := a.Release(req); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Post(req); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("Post of a released request = %v", err)
	}
	if _, err := a.Status(req); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("Status of a released request = %v", err)
	}
	if _, err := a.RegisterMemory(nil); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("RegisterMemory(nil) = %v", err)
	}
	if _, err := a.RegisterMemory([][]byte{{1}, {}}); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("RegisterMemory with an empty region = %v", err)
	}
	if n := a.Counters().Registrations; n != 1 {
		t.Errorf("%d registrations after a failed RegisterMemory, want 1", n)
	}
}

// TestDescriptorSub: Sub stays inside its descriptor.
func TestDescriptorSub(t *testing.T) {
	d := Descriptor{Address: 1000, Length: 100, MemoryKind: MemoryHost, RemoteKey: []byte{1, 2}}
	for _, tc := range []struct {
		off, n uint64
		ok     bool
	}{
		{0, 100, true}, {99, 1, true}, {50, 50, true},
		{0, 0, false}, {100, 1, false}, {50, 51, false}, {^uint64(0), 2, false}, {1, ^uint64(0), false},
	} {
		s, err := d.Sub(tc.off, tc.n)
		if tc.ok != (err == nil) {
			t.Errorf("Sub(%d, %d) = %v, want ok=%v", tc.off, tc.n, err, tc.ok)
			continue
		}
		if err != nil && !errors.Is(err, ErrInvalidParam) {
			t.Errorf("Sub(%d, %d) = %v, want ErrInvalidParam", tc.off, tc.n, err)
		}
		if err == nil && (s.Address != 1000+tc.off || s.Length != tc.n || string(s.RemoteKey) != "\x01\x02") {
			t.Errorf("Sub(%d, %d) = %+v", tc.off, tc.n, s)
		}
	}
}

// TestCheckMetadataAgreesWithParse: CheckMetadata accepts what
// ParseMetadata accepts and refuses the rest with ParseMetadata's very
// error: well-formed metadata of both backends, every malformed shape
// (each byte of good metadata changed, each truncation, a trailing byte)
// and FuzzDecodeMetadata's seeds (its corpus under testdata/fuzz runs the
// same comparison).
func TestCheckMetadataAgreesWithParse(t *testing.T) {
	good := [][]byte{
		encodeMetadata(BackendTCP, "consumer", "127.0.0.1:7400"),
		encodeMetadata(BackendTCP, "c", "[::1]:7400"),
		encodeMetadata(BackendLoopback, "p", "reg-1"),
	}
	mds := [][]byte{nil, {}, []byte("BXMD"), []byte("BXMD\x01\x02\x00"), []byte("BXMD\x01\x09\x01a\x00\x01b"),
		encodeMetadata(BackendTCP, "c", "127.0.0.1:07400"), encodeMetadata(BackendTCP, "x", "no-port"),
		encodeMetadata(BackendTCP, "x", "")}
	for _, g := range good {
		mds = append(mds, g, append(append([]byte(nil), g...), 0))
		for i := range g {
			mds = append(mds, g[:i])
			for _, v := range []byte{0, 1, 2, 9, 255, g[i] + 1} {
				b := append([]byte(nil), g...)
				b[i] = v
				mds = append(mds, b)
			}
		}
	}
	accepted := 0
	for _, md := range mds {
		_, perr := ParseMetadata(md)
		cerr := CheckMetadata(md)
		if (perr == nil) != (cerr == nil) || (perr != nil && perr.Error() != cerr.Error()) {
			t.Fatalf("CheckMetadata(%q) = %v; ParseMetadata's error %v", md, cerr, perr)
		}
		if perr != nil && !errors.Is(cerr, ErrInvalidParam) {
			t.Fatalf("CheckMetadata(%q) = %v does not wrap ErrInvalidParam", md, cerr)
		}
		if perr == nil {
			accepted++
		}
	}
	if accepted < len(good) {
		t.Fatalf("only %d of the inputs accepted", accepted)
	}
}
