package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
)

// TestTrustList: exact host:port entries, host entries and prefixes match
// what they name and nothing else; malformed entries are refused whole.
func TestTrustList(t *testing.T) {
	p, err := parseTrustList([]string{"127.0.0.1:7101", "e0.Internal", "10.1.0.0/16", "[::1]:7102", " localhost:7103 "})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host string
		port uint32
		want bool
	}{
		{"127.0.0.1", 7101, true},
		{"127.0.0.1", 7102, false}, // loopback is not trusted by itself
		{"localhost", 7101, true},
		{"127.0.0.1", 7103, true},
		{"E0.internal", 1, true},
		{"e1.internal", 7101, false},
		{"10.1.200.3", 9, true},
		{"10.2.0.1", 9, false},
		{"::1", 7102, true},
		{"::1", 7101, false},
		{"127.0.0.1", 0, false},
		{"127.0.0.1", 70000, false},
		{"", 7101, false},
	} {
		if got := p.allows(c.host, c.port); got != c.want {
			t.Errorf("allows(%q, %d) = %t; want %t", c.host, c.port, got, c.want)
		}
	}
	if _, err := p.endpoint("producer endpoint", "127.0.0.1", 9); !errors.Is(err, handoff.ErrUntrustedPeer) || !strings.Contains(err.Error(), "SE-3") {
		t.Errorf("endpoint of an untrusted peer = %v; want ErrUntrustedPeer naming SE-3", err)
	}
	if addr, err := p.address("agent", "localhost:7101"); err != nil || addr != "127.0.0.1:7101" {
		t.Errorf("address(localhost:7101) = %q, %v", addr, err)
	}
	// Only the canonical spelling of a trusted address is trusted (the
	// attack run's A3 and A7 padded the port with ~1 KiB of zeros).
	for _, spelling := range []string{"127.0.0.1:07101", "127.0.0.1:" + strings.Repeat("0", 1000) + "7101", "127.0.0.1:+7101", "127.0.0.1: 7101", strings.Repeat("a", 260) + ".internal:7101"} {
		if addr, err := p.address("agent", spelling); !errors.Is(err, handoff.ErrUntrustedPeer) || !strings.Contains(err.Error(), "SE-3") {
			t.Errorf("address(%.40q) = %q, %v; want ErrUntrustedPeer naming SE-3", spelling, addr, err)
		}
	}
	if q, err := parseTrustList([]string{"127.0.0.1:07101"}); err != nil || !q.allows("127.0.0.1", 7101) {
		t.Errorf("trust entry 127.0.0.1:07101 = %v; want it to trust port 7101", err)
	}
	var none *peerTrust
	if none.allows("127.0.0.1", 7101) {
		t.Error("a nil list trusts a peer")
	}
	for _, bad := range []string{"127.0.0.1:0", "127.0.0.1:http", ":7101", "10.0.0.0/33", "1::2::3", "not/a/prefix"} {
		q, _ := parseTrustList([]string{"127.0.0.1:1"})
		if err := q.add([]string{"10.9.9.9", bad}); err == nil {
			t.Errorf("trust entry %q accepted; want an error", bad)
		} else if q.allows("10.9.9.9", 1) {
			t.Errorf("a list with malformed entry %q added its other entries", bad)
		}
	}
}

// FuzzTrustList: any list either parses or is refused; a parsed list
// never panics on any peer and never trusts port 0.
func FuzzTrustList(f *testing.F) {
	for _, s := range []string{"127.0.0.1:7101", "h:1,h2", "10.0.0.0/8", "[::1]:9", "::1", "a:b:c", ""} {
		f.Add(s, "127.0.0.1", uint32(7101))
	}
	f.Fuzz(func(t *testing.T, list, host string, port uint32) {
		p, err := parseTrustList(strings.Split(list, ","))
		if err != nil {
			return
		}
		if p.allows(host, 0) {
			t.Fatalf("list %q trusts %q port 0", list, host)
		}
		_ = p.allows(host, port)
		_, _ = p.address("peer", host)
	})
}
