package server

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/baton-dev/baton/engine/handoff"
)

// Trusted peers (CONTRACT SE-3): no request makes the engine connect
// anywhere outside the peers its operator configured. A consumer (PD, P)
// dials only the producer control endpoints in Config.TrustedProducers; D
// dials only the P control endpoints and P transfer agents listed there
// too; a tcp producer WRITEs only into consumer transfer agents listed in
// Config.TrustedConsumers. With no list the engine trusts no peer: every
// reference, KV session or transfer that would make it dial is refused
// with FAILED_PRECONDITION before any connection. Loopback is not trusted
// by itself: any local process may bind a loopback port.
//
// An entry is one of
//
//	host:port    exactly that endpoint ("127.0.0.1:7101", "[::1]:7101", "e0.internal:7101")
//	host         any port of that host ("10.0.0.5", "e0.internal")
//	address/bits any port of any address in the prefix ("10.0.0.0/24")
//
// Hosts are compared as written after normalising IP literals and
// "localhost" (= 127.0.0.1); names are never resolved, so a name in a
// reference matches only a name in the list. Prefer host:port on a host
// shared with other users: a host or prefix entry lets anyone who can bind
// a port there be dialled.
type peerTrust struct {
	mu    sync.RWMutex
	exact map[string]bool // normalised host:port
	hosts map[string]bool // normalised host
	nets  []netip.Prefix
	list  []string // the entries as given, for messages
}

// parseTrustList parses trust entries (SE-3). Errors name the bad entry.
func parseTrustList(entries []string) (*peerTrust, error) {
	p := &peerTrust{exact: map[string]bool{}, hosts: map[string]bool{}}
	return p, p.add(entries)
}

// add adds entries to the list; on a malformed entry it adds none.
func (p *peerTrust) add(entries []string) error {
	exact, hosts := map[string]bool{}, map[string]bool{}
	var nets []netip.Prefix
	var list []string
	for _, raw := range entries {
		e := strings.TrimSpace(raw)
		switch {
		case e == "":
			continue
		case strings.Contains(e, "/"):
			pre, err := netip.ParsePrefix(e)
			if err != nil {
				return fmt.Errorf("server: trusted peer %q: not an address prefix: %v", raw, err)
			}
			nets = append(nets, pre.Masked())
		default:
			if host, port, err := net.SplitHostPort(e); err == nil {
				n, perr := strconv.ParseUint(port, 10, 16)
				if perr != nil || n == 0 || host == "" {
					return fmt.Errorf("server: trusted peer %q: want host:port with a port 1..65535", raw)
				}
				exact[normalHost(host)+":"+strconv.FormatUint(n, 10)] = true // "07101" is port 7101
			} else {
				bare := strings.Trim(e, "[]")
				if strings.Contains(bare, ":") {
					if _, err := netip.ParseAddr(bare); err != nil {
						return fmt.Errorf("server: trusted peer %q: want host, host:port or address/bits", raw)
					}
				}
				hosts[normalHost(bare)] = true
			}
		}
		list = append(list, e)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range exact {
		p.exact[k] = true
	}
	for k := range hosts {
		p.hosts[k] = true
	}
	p.nets = append(p.nets, nets...)
	p.list = append(p.list, list...)
	return nil
}

// normalHost writes an IP literal in its canonical form, "localhost" as
// 127.0.0.1 and a name in lower case.
func normalHost(h string) string {
	if strings.EqualFold(h, "localhost") {
		return "127.0.0.1"
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return strings.ToLower(h)
}

// allows reports whether host:port is a trusted peer.
func (p *peerTrust) allows(host string, port uint32) bool {
	if p == nil || port == 0 || port > 65535 || host == "" {
		return false
	}
	h := normalHost(host)
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.exact[h+":"+strconv.Itoa(int(port))] || p.hosts[h] {
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		for _, n := range p.nets {
			if n.Contains(a) {
				return true
			}
		}
	}
	return false
}

// endpoint checks host:port against the list and returns the address to
// dial, or ErrUntrustedPeer (SE-3, FAILED_PRECONDITION) naming what, before
// any connection is made.
func (p *peerTrust) endpoint(what, host string, port uint32) (string, error) {
	if !p.allows(host, port) {
		return "", fmt.Errorf("%w: SE-3 %s %.60q:%d is not among this engine's configured peers (%s)", handoff.ErrUntrustedPeer, what, host, port, p.describe())
	}
	return net.JoinHostPort(normalHost(host), strconv.Itoa(int(port))), nil
}

// maxPeerAddressBytes bounds a "host:port" a request names: a 253-byte DNS
// name or a bracketed IPv6 literal, a colon and five digits (xfer's bound
// on agent addresses).
const maxPeerAddressBytes = 262

// address is endpoint for a "host:port" string (a transfer agent's address
// in its metadata). Only the canonical spelling of a port is trusted:
// decimal without leading zeros or sign, so one trusted endpoint cannot be
// named in unboundedly many spellings (the attack run's A3 and A7 padded
// the port with ~1 KiB of zeros); anything else, or an address over
// maxPeerAddressBytes, is ErrUntrustedPeer (SE-3, FAILED_PRECONDITION)
// before any connection.
func (p *peerTrust) address(what, hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	n, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil || strconv.FormatUint(n, 10) != port || len(hostport) > maxPeerAddressBytes {
		return "", fmt.Errorf("%w: SE-3 %s %.60q is not a canonical host:port", handoff.ErrUntrustedPeer, what, hostport)
	}
	return p.endpoint(what, host, uint32(n))
}

// describe names the list in messages (at most a few entries).
func (p *peerTrust) describe() string {
	if p == nil {
		return "none configured"
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	switch {
	case len(p.list) == 0:
		return "none configured"
	case len(p.list) > 4:
		return strings.Join(p.list[:4], ", ") + ", ..."
	}
	return strings.Join(p.list, ", ")
}

// TrustPeers adds trusted producer endpoints (a consumer's and D's
// Config.TrustedProducers) and trusted consumer agents (a producer's
// Config.TrustedConsumers) to a running engine, in the entry syntax of
// trust.go (CONTRACT SE-3). It exists for engines embedded in one process
// whose peers' addresses are known only once they run (tests, the
// in-process target); `baton serve` takes the lists as flags. Errors: a
// malformed entry (nothing is added from that list then).
func (e *Engine) TrustPeers(producers, consumers []string) error {
	if err := e.trustedProducers.add(producers); err != nil {
		return err
	}
	return e.trustedConsumers.add(consumers)
}
