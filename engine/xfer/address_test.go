package xfer

import (
	"errors"
	"strings"
	"testing"
)

// TestMetadataCanonicalAddress: tcp metadata carries its address written
// the one way NewTCP advertises it: a port of 1..65535 without leading
// zeros, an IP literal in its canonical form, a lower-case host name,
// bounded lengths. Anything else is malformed metadata (ErrInvalidParam
// from ParseMetadata and LoadRemoteMetadata, nothing loaded), so one
// endpoint cannot be named in many spellings (the attack run's A3 and A7:
// ~1 KiB of leading zeros in the port of a trusted address).
func TestMetadataCanonicalAddress(t *testing.T) {
	a, err := NewTCP(TCPOptions{Options: Options{Name: "loader"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7202", true},
		{"[::1]:7202", true},
		{"[fe80::1%eth0]:7202", true},
		{"e0.internal:65535", true},
		{"pipe:1", true},
		{"127.0.0.1:07202", false},
		{"127.0.0.1:" + strings.Repeat("0", 1010) + "7202", false},
		{"127.0.0.1:0", false},
		{"127.0.0.1:65536", false},
		{"127.0.0.1:+7202", false},
		{"127.0.0.1:7202 ", false},
		{"127.0.0.1:http", false},
		{"127.0.0.1:", false},
		{":7202", false},
		{"127.0.0.1", false},
		{"127.000.0.1:7202", false},
		{"[0:0::1]:7202", false},
		{"[::FFFF:127.0.0.1]:7202", false},
		{"[::ffff:127.0.0.1]:7202", false},
		{"[127.0.0.1]:7202", false},
		{"::1:7202", false},
		{"E0.internal:7202", false},
		{"e0 internal:7202", false},
		{"e0.internal\x00:7202", false},
		{strings.Repeat("a", maxHostBytes+1) + ":7202", false},
	} {
		md := encodeMetadata(BackendTCP, "peer", c.addr)
		_, perr := ParseMetadata(md)
		peer, lerr := a.LoadRemoteMetadata(md)
		if c.ok {
			if perr != nil || lerr != nil || peer != "peer" {
				t.Errorf("address %.40q: ParseMetadata %v, LoadRemoteMetadata %q, %v; want accepted", c.addr, perr, peer, lerr)
			}
			_ = a.InvalidateRemoteMetadata("peer")
			continue
		}
		if !errors.Is(perr, ErrInvalidParam) || !errors.Is(lerr, ErrInvalidParam) || peer != "" {
			t.Errorf("address %.40q: ParseMetadata %v, LoadRemoteMetadata %q, %v; want ErrInvalidParam", c.addr, perr, peer, lerr)
		}
		if err := CanonicalAddress(c.addr); !errors.Is(err, ErrInvalidParam) {
			t.Errorf("CanonicalAddress(%.40q) = %v; want ErrInvalidParam", c.addr, err)
		}
	}
	if n := a.Counters().Peers; n != 0 {
		t.Errorf("%d peers loaded from refused metadata", n)
	}
	for _, adv := range []string{"127.0.0.1:07202", "Host.internal:80", "10.0.0.1"} {
		if b, err := NewTCP(TCPOptions{Options: Options{Name: "adv"}, AdvertiseAddress: adv}); !errors.Is(err, ErrInvalidParam) {
			if b != nil {
				b.Close()
			}
			t.Errorf("NewTCP advertising %q = %v; want ErrInvalidParam (peers would refuse its metadata)", adv, err)
		}
	}
}
