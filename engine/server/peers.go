package server

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Control connections to producers (a consumer's TransferEncoderCache and
// loan returns, D's Abort(kv_session) to P). Every connection a client
// dials is tracked, so that a call knows which connections may have
// carried its request:
//
//   - none that the producer ever spoke on (sent a byte) was open or
//     established during the call: the connection was refused or never
//     established and nothing was sent, a definite outcome (CONTRACT Q-2).
//     A connection the peer never wrote a byte on never carried a request:
//     gRPC sends nothing on a transport before it has read the server's
//     preface (grpc-go's NewHTTP2Client blocks until then), so a port that
//     accepts and never speaks gRPC (another service on a trusted host,
//     the consumer's own transfer agent, attack A5) is refused, not
//     uncertain;
//   - otherwise an uncertain outcome's quarantine waits until each of them
//     has closed (part of the proof of Q-6): the producer closed it, its
//     process ended, or keepalive found it dead (a hung producer).
const (
	// peerKeepaliveTime: a control connection idle this long is pinged;
	// peerKeepaliveTimeout later without an answer it is closed.
	peerKeepaliveTime    = 10 * time.Second
	peerKeepaliveTimeout = 5 * time.Second
	// peerMaxBackoff bounds the reconnect backoff, so a producer that
	// came back is reached again within about a second.
	peerMaxBackoff = time.Second
	// peerDialTimeout bounds one dial.
	peerDialTimeout = 3 * time.Second
)

// peerKeepaliveEnforcement lets peers ping the engine's server as often as
// peerKeepaliveTime, idle or not (gRPC's default refuses pings more often
// than every 5 minutes).
var peerKeepaliveEnforcement = keepalive.EnforcementPolicy{MinTime: peerKeepaliveTime / 2, PermitWithoutStream: true}

// producerClients caches one control client per producer endpoint.
type producerClients struct {
	creds credentials.TransportCredentials // TLS when the engine dials peers over TLS (SE-1); nil: plaintext
	mu    sync.Mutex
	conns map[string]*producerConn
}

// producerConn is the client of one endpoint and its tracked connections.
type producerConn struct {
	addr string
	cc   *grpc.ClientConn
	mu   sync.Mutex
	live map[*trackedConn]struct{}
	seq  uint64 // connections dialled so far
	// spokeSeq is the highest seq of a connection the peer has written a
	// byte on (0: none), open or closed since.
	spokeSeq uint64
}

// trackedConn is one dialled control connection.
type trackedConn struct {
	net.Conn
	owner  *producerConn
	seq    uint64
	once   sync.Once
	closed chan struct{}
	spoke  atomic.Bool // the peer has written at least one byte on it
}

// Read reads from the connection and notes the first byte the peer wrote.
func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.spoke.Load() {
		c.owner.mu.Lock()
		c.spoke.Store(true)
		c.owner.spokeSeq = max(c.owner.spokeSeq, c.seq)
		c.owner.mu.Unlock()
	}
	return n, err
}

// Close closes the connection and marks it closed.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.owner.mu.Lock()
		delete(c.owner.live, c)
		c.owner.mu.Unlock()
		close(c.closed)
	})
	return err
}

// track wraps a dialled connection so the calls around it know whether it
// may have carried them (callWindow).
func (c *producerConn) track(conn net.Conn) *trackedConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	tc := &trackedConn{Conn: conn, owner: c, seq: c.seq, closed: make(chan struct{})}
	c.live[tc] = struct{}{}
	return tc
}

func (p *producerClients) get(addr string) (*producerConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	pc := &producerConn{addr: addr, live: map[*trackedConn]struct{}{}}
	dial := func(ctx context.Context, target string) (net.Conn, error) {
		d := net.Dialer{Timeout: peerDialTimeout}
		conn, err := d.DialContext(ctx, "tcp", target)
		if err != nil {
			return nil, err
		}
		return pc.track(conn), nil
	}
	cp := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: peerDialTimeout}
	cp.Backoff.BaseDelay, cp.Backoff.MaxDelay = 100*time.Millisecond, peerMaxBackoff
	creds := p.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	c, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(dial),
		grpc.WithConnectParams(cp),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: peerKeepaliveTime, Timeout: peerKeepaliveTimeout, PermitWithoutStream: true}),
	)
	if err != nil {
		return nil, err
	}
	pc.cc = c
	if p.conns == nil {
		p.conns = map[string]*producerConn{}
	}
	p.conns[addr] = pc
	return pc, nil
}

func (p *producerClients) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.cc.Close()
	}
	p.conns = nil
}

// fresh makes a channel that failed to connect try again at once: a
// producer that came back is reached by the next call, not after the
// reconnect backoff. It waits (at most peerDialTimeout) for that attempt
// to end: READY, or failed again (the call then fails fast, nothing sent).
func (c *producerConn) fresh(ctx context.Context) {
	if c.cc.GetState() != connectivity.TransientFailure {
		return
	}
	c.cc.ResetConnectBackoff()
	wctx, cancel := context.WithTimeout(ctx, peerDialTimeout)
	defer cancel()
	tried := false
	for {
		s := c.cc.GetState()
		switch {
		case s == connectivity.Ready, s == connectivity.TransientFailure && tried, s == connectivity.Shutdown:
			return
		case s == connectivity.Connecting || s == connectivity.Idle:
			tried = true
			c.cc.Connect()
		}
		if !c.cc.WaitForStateChange(wctx, s) {
			return
		}
	}
}

// client is the endpoint's Control client.
func (c *producerConn) client() pb.ControlClient { return pb.NewControlClient(c.cc) }

// callWindow is what a call knows of the connections around it.
type callWindow struct {
	at   map[*trackedConn]struct{} // open when the call began
	seq  uint64                    // connections dialled before it
	conn *producerConn
}

// begin opens a call's window.
func (c *producerConn) begin() callWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := make(map[*trackedConn]struct{}, len(c.live))
	for tc := range c.live {
		at[tc] = struct{}{}
	}
	return callWindow{at: at, seq: c.seq, conn: c}
}

// carriers closes the window: sent reports whether any connection the
// peer has spoken on was open or established during the call (else
// nothing can have been sent, Q-2); open are the closed channels of those,
// which may have carried the request.
func (w callWindow) carriers() (sent bool, open []<-chan struct{}) {
	c := w.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	sent = c.spokeSeq > w.seq // one dialled during the call spoke (it may have closed since)
	for tc := range w.at {
		if tc.spoke.Load() {
			sent = true
			open = append(open, tc.closed) // closed already or not: waiting on a closed channel is free
		}
	}
	for tc := range c.live {
		if tc.seq > w.seq && tc.spoke.Load() {
			open = append(open, tc.closed)
		}
	}
	return sent, open
}
