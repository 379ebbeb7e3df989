package xfer

import (
	"fmt"
	"net"
	"net/netip"
)

// Bounds of a tcp agent address: the connection info of tcp metadata and
// TCPOptions.AdvertiseAddress.
const (
	// maxHostBytes: a DNS name is at most 253 bytes (RFC 1035, 2.3.4); an
	// IPv6 literal, zone included, is shorter in practice.
	maxHostBytes = 253
	// maxAddressBytes: "[" host "]" ":" and at most five port digits.
	maxAddressBytes = 1 + maxHostBytes + 1 + 1 + 5
	// maxPortDigits: 65535 has five.
	maxPortDigits = 5
)

// CanonicalAddress checks that addr is a tcp agent address written the one
// way an agent advertises it, so that one endpoint has exactly one
// spelling in metadata (a peer's trust check, its connection pool and
// its logs all see the same string):
//
//	host:port   port: decimal 1..65535 without leading zeros or sign
//	            host: an IP literal in its canonical form (netip's: IPv4
//	                  dotted quad, IPv6 compressed lower-case hex in
//	                  brackets, no IPv4-mapped IPv6), or a host name of
//	                  lower-case letters, digits, '-', '.', '_' that is
//	                  not all digits and dots; 1..253 bytes
//
// at most maxAddressBytes (262) bytes in all. Errors wrap ErrInvalidParam.
// ParseMetadata, LoadRemoteMetadata, CreateWriteTo and CreateReadFrom
// apply it to tcp metadata; NewTCP to its advertise address.
func CanonicalAddress(addr string) error {
	bad := func(why string) error {
		return fmt.Errorf("xfer: tcp agent address %.80q is not a canonical host:port (%s): %w", addr, why, ErrInvalidParam)
	}
	if len(addr) > maxAddressBytes {
		return bad(fmt.Sprintf("%d bytes, at most %d", len(addr), maxAddressBytes))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return bad("no host:port")
	}
	if !canonicalPort(port) {
		return bad("the port must be 1..65535 in decimal without leading zeros")
	}
	if host == "" || len(host) > maxHostBytes {
		return bad(fmt.Sprintf("the host must be 1..%d bytes", maxHostBytes))
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4In6() || a.String() != host {
			return bad("an IP literal not in its canonical form")
		}
	} else if !canonicalHostName(host) {
		return bad("a host name must be lower-case letters, digits, '-', '.' and '_', not all digits and dots")
	}
	if net.JoinHostPort(host, port) != addr {
		return bad("brackets only around an IPv6 literal")
	}
	return nil
}

// canonicalPort: 1..65535, ASCII digits, no leading zero.
func canonicalPort(p string) bool {
	if len(p) == 0 || len(p) > maxPortDigits || p[0] == '0' {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
		n = n*10 + int(p[i]-'0')
	}
	return n <= 65535
}

// canonicalHostName: lower-case letters, digits, '-', '.', '_', with at
// least one character that is neither a digit nor a dot (all digits and
// dots would be a non-canonical IP literal such as 127.000.0.1).
func canonicalHostName(h string) bool {
	named := false
	for i := 0; i < len(h); i++ {
		switch b := h[i]; {
		case b >= 'a' && b <= 'z', b == '-', b == '_':
			named = true
		case b >= '0' && b <= '9', b == '.':
		default:
			return false
		}
	}
	return named
}
