package xfer

import (
	"context"
	"net"
	"time"
)

// Clock is where the agents read the time, to set I/O deadlines
// (TCPOptions.WriteTimeout, TCPOptions.IdleTimeout). The simulator hands a
// virtual clock together with a simulated Network whose connections read
// deadlines in the same virtual time.
type Clock interface {
	// Now is the current time.
	Now() time.Time
}

// SystemClock is the real clock (time.Now).
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// Network is the transport the tcp backend works through: real TCP sockets
// (TCPNetwork) in the engine, a simulated network in the simulator.
// Connections must honour SetDeadline/SetReadDeadline/SetWriteDeadline with
// times from the agent's Clock, and Close must unblock a pending Read or
// Write.
type Network interface {
	// Listen opens a listener on address ("127.0.0.1:0" picks a free port).
	Listen(address string) (net.Listener, error)
	// Dial connects to address; it gives up at deadline or when ctx ends.
	Dial(ctx context.Context, address string, deadline time.Time) (net.Conn, error)
}

// TCPNetwork is Network over the operating system's TCP stack.
type TCPNetwork struct{}

// Listen is net.Listen("tcp", address).
func (TCPNetwork) Listen(address string) (net.Listener, error) {
	return net.Listen("tcp", address)
}

// Dial is a net.Dialer with the given deadline.
func (TCPNetwork) Dial(ctx context.Context, address string, deadline time.Time) (net.Conn, error) {
	d := net.Dialer{Deadline: deadline}
	return d.DialContext(ctx, "tcp", address)
}
