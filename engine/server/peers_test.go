package server

import (
	"io"
	"net"
	"testing"
)

// TestCallWindowCountsConnectionsThePeerSpokeOn: a call may have been
// carried only by a connection the producer wrote at least one byte on
// (gRPC sends nothing before it has read the server's preface): one it
// never spoke on, open or closed, leaves the outcome definite (Q-2, attack
// A5: a port that accepts and never speaks gRPC); one it spoke on, even if
// closed since, makes it uncertain and is waited for.
func TestCallWindowCountsConnectionsThePeerSpokeOn(t *testing.T) {
	type conn struct {
		before, speaks, closes bool
	}
	for _, c := range []struct {
		name      string
		conns     []conn
		sent      bool
		carriers  int
		stillOpen int
	}{
		{"none", nil, false, 0, 0},
		{"dialled during the call, silent, closed", []conn{{closes: true}}, false, 0, 0},
		{"dialled during the call, silent, open", []conn{{}}, false, 0, 0},
		{"dialled during the call, spoke, closed", []conn{{speaks: true, closes: true}}, true, 0, 0},
		{"dialled during the call, spoke, open", []conn{{speaks: true}}, true, 1, 1},
		{"open before, silent", []conn{{before: true}}, false, 0, 0},
		{"open before, spoke, closed during the call", []conn{{before: true, speaks: true, closes: true}}, true, 1, 0},
		{"open before, spoke", []conn{{before: true, speaks: true}}, true, 1, 1},
		{"one silent, one that spoke", []conn{{before: true}, {speaks: true}}, true, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pc := &producerConn{live: map[*trackedConn]struct{}{}}
			var tracked []*trackedConn
			var peers []net.Conn
			dial := func() {
				client, server := net.Pipe()
				t.Cleanup(func() { client.Close(); server.Close() })
				tracked, peers = append(tracked, pc.track(client)), append(peers, server)
			}
			for _, x := range c.conns {
				if x.before {
					dial()
				}
			}
			w := pc.begin()
			for _, x := range c.conns {
				if !x.before {
					dial()
				}
			}
			for i, x := range c.conns {
				if x.speaks {
					go peers[i].Write([]byte{0})
					if _, err := io.ReadFull(tracked[i], make([]byte, 1)); err != nil {
						t.Fatal(err)
					}
				}
				if x.closes {
					tracked[i].Close()
				}
			}
			sent, carriers := w.carriers()
			open := 0
			for _, ch := range carriers {
				select {
				case <-ch:
				default:
					open++
				}
			}
			if sent != c.sent || len(carriers) != c.carriers || open != c.stillOpen {
				t.Errorf("carriers() = sent %v, %d carriers (%d open); want sent %v, %d carriers (%d open)", sent, len(carriers), open, c.sent, c.carriers, c.stillOpen)
			}
		})
	}
}
