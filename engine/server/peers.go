package server

import (
	"container/list"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/engine/consumer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
)

// Control connections to producers (a consumer's TransferEncoderCache and
// loan returns, D's Abort(kv_session) to P). Every connection a client
// dials is tracked, so that a call knows which connections may have
// carried its request:
//
//   - the call's request headers were never queued on a transport: the
//     connection was refused or never established and nothing was sent, a
//     definite outcome (CONTRACT Q-2). gRPC hands a call a transport only
//     once it has read the server's HTTP/2 preface (grpc-go's
//     NewHTTP2Client blocks until a SETTINGS frame arrived), and writes the
//     request only after its headers; the client's stats handler
//     (sendWatch) sees the headers queued (stats.OutHeader), so a port that
//     accepts and never speaks gRPC (another service on a trusted host,
//     the consumer's own transfer agent, attack A5), one that answers
//     garbage or trickles bytes slower than a preface (attack F6) is
//     refused, not uncertain. Whether the peer wrote bytes is no measure of
//     it: garbage is bytes;
//   - otherwise an uncertain outcome's quarantine waits until each of them
//     has closed (part of the proof of Q-6). On the tcp receive path the
//     consumer closes them itself: it retires the client (retire), which
//     is closed once no other call uses it; with the registration revoked
//     nothing the producer still sends can land, so closing is what makes
//     "every connection that carried the transfer has closed" true. Where
//     nothing is revoked (cuda_ipc) the client is pinned (pin) and only
//     the producer closing it, its process ending or keepalive finding it
//     dead (a hung producer) ends the quarantine.
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

// The cache of producer clients is bounded (attack A6: with a host or
// prefix trust entry, every distinct address a forged reference named got
// a client of its own that was never closed, and one whose connection was
// refused redialled it forever):
//
//   - at most max clients are cached, least recently used evicted first;
//   - a client whose connection was refused or never established (a Q-2
//     refusal) is closed at once, so nothing redials a refused address;
//   - a client unused for idle, or whose channel failed to reconnect, is
//     closed by a sweep every idle/2 while anything is cached;
//   - a client leaves the cache at once but is closed only when no call
//     uses it and no pin holds it. An uncertain tcp transfer retires its
//     client (it leaves the cache; a call of another request in flight on
//     it is never cut, since closing a gRPC client fails its calls with
//     UNAVAILABLE, another uncertain outcome); an uncertain cuda_ipc
//     transfer, whose buffer no revocation guards, pins its client until
//     every connection that may have carried it has closed by itself, so
//     neither eviction nor the sweep fakes that proof (CONTRACT Q-6).
const (
	// peerCacheMax bounds the cached producer clients (a deployment has a
	// handful of producers; forged references name any number).
	peerCacheMax = 64
	// peerIdleClose closes a producer client unused this long.
	peerIdleClose = time.Minute
)

// producerClients caches one control client per producer endpoint.
type producerClients struct {
	creds credentials.TransportCredentials // TLS when the engine dials peers over TLS (SE-1); nil: plaintext
	// max, idle and now are peerCacheMax, peerIdleClose and time.Now when
	// zero (tests set them).
	max  int
	idle time.Duration
	now  func() time.Time

	mu     sync.Mutex
	conns  map[string]*producerConn   // the cache, by address
	lru    list.List                  // cached clients, most recently used first
	all    map[*producerConn]struct{} // every client not yet closed, cached or not
	timer  *time.Timer                // the idle sweep, armed while anything is cached
	closed bool                       // close ran: no sweep any more
}

// producerConn is the client of one endpoint and its tracked connections.
type producerConn struct {
	addr string
	cc   *grpc.ClientConn
	// elem, users and lastUsed are guarded by producerClients.mu.
	elem     *list.Element // its place in the cache; nil once it left
	users    int           // calls using it, and pins (producerClients.pin)
	lastUsed time.Time

	mu   sync.Mutex
	live map[*trackedConn]struct{}
	seq  uint64 // connections dialled so far
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
		c.spoke.Store(true)
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

func (p *producerClients) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *producerClients) capacity() int {
	if p.max > 0 {
		return p.max
	}
	return peerCacheMax
}

func (p *producerClients) idleAfter() time.Duration {
	if p.idle > 0 {
		return p.idle
	}
	return peerIdleClose
}

// get returns the client of addr, in use by the caller until it calls put
// (once per get); it dials nothing itself. The least recently used client
// leaves the cache when it is over capacity.
func (p *producerClients) get(addr string) (*producerConn, error) {
	p.mu.Lock()
	if c, ok := p.conns[addr]; ok {
		c.users++
		c.lastUsed = p.clock()
		p.lru.MoveToFront(c.elem)
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
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
		grpc.WithStatsHandler(sendWatch{}),
	)
	if err != nil {
		return nil, err
	}
	pc.cc = c
	p.mu.Lock()
	if other, ok := p.conns[addr]; ok { // another call cached one meanwhile
		other.users++
		other.lastUsed = p.clock()
		p.lru.MoveToFront(other.elem)
		p.mu.Unlock()
		_ = c.Close()
		return other, nil
	}
	if p.conns == nil {
		p.conns, p.all = map[string]*producerConn{}, map[*producerConn]struct{}{}
	}
	pc.users, pc.lastUsed = 1, p.clock()
	pc.elem = p.lru.PushFront(pc)
	p.conns[addr] = pc
	p.all[pc] = struct{}{}
	var done []*producerConn
	for p.lru.Len() > p.capacity() {
		done = p.leaveLocked(p.lru.Back().Value.(*producerConn), done)
	}
	if p.timer == nil && !p.closed {
		p.timer = time.AfterFunc(p.idleAfter()/2, p.tick)
	}
	p.mu.Unlock()
	closeClients(done)
	return pc, nil
}

// put ends a use that get (or hold, or pin) began; a client that left the
// cache is closed with its last use.
func (p *producerClients) put(c *producerConn) {
	p.mu.Lock()
	c.users--
	c.lastUsed = p.clock()
	var done []*producerConn
	if c.elem == nil && c.users == 0 {
		done = p.closingLocked(c, done)
	}
	p.mu.Unlock()
	closeClients(done)
}

// hold begins another use of a client the caller already uses (a
// background call on its behalf); end it with put.
func (p *producerClients) hold(c *producerConn) {
	p.mu.Lock()
	c.users++
	p.mu.Unlock()
}

// pin keeps c open until every proof channel is closed: the carriers of a
// cuda_ipc transfer whose outcome is uncertain, which the quarantine waits
// for (Q-6; a tcp receive retires its client instead, unless the Q-6
// mutant handoff.Mutants.KeepCarrierOpen pins it). Neither eviction nor the idle
// sweep closes a pinned client, so only the producer or keepalive ends
// those connections.
func (p *producerClients) pin(c *producerConn, proofs []<-chan struct{}) {
	if consumer.AllClosed(proofs) {
		return
	}
	p.hold(c)
	go func() {
		for _, ch := range proofs {
			<-ch
		}
		p.put(c)
	}()
}

// retire takes a client out of the cache, closed once no call uses it
// (the calls in flight on it end as they would have); the next call dials
// afresh. Two uses: a client whose connection was refused or never
// established, so nothing redials the address; and a client whose
// connections may have carried a tcp transfer with an uncertain outcome,
// so they close and, with the registration revoked, the quarantine ends
// (CONTRACT Q-6) although the producer lives and keeps them healthy.
func (p *producerClients) retire(c *producerConn) {
	p.mu.Lock()
	done := p.leaveLocked(c, nil)
	p.mu.Unlock()
	closeClients(done)
}

// leaveLocked takes c out of the cache and appends it to done when nothing
// uses it (it is closed then). Call with p.mu held.
func (p *producerClients) leaveLocked(c *producerConn, done []*producerConn) []*producerConn {
	if c.elem != nil {
		p.lru.Remove(c.elem)
		c.elem = nil
		if p.conns[c.addr] == c {
			delete(p.conns, c.addr)
		}
	}
	if c.users == 0 {
		done = p.closingLocked(c, done)
	}
	return done
}

// closingLocked appends c to done unless it was closed already. Call with
// p.mu held.
func (p *producerClients) closingLocked(c *producerConn, done []*producerConn) []*producerConn {
	if _, open := p.all[c]; open {
		delete(p.all, c)
		done = append(done, c)
	}
	return done
}

// closeClients closes clients outside the lock.
func closeClients(cs []*producerConn) {
	for _, c := range cs {
		_ = c.cc.Close()
	}
}

// sweep closes the cached clients nobody uses that have been idle for
// idle, or whose channel failed to (re)connect and would redial forever.
func (p *producerClients) sweep() {
	p.mu.Lock()
	now := p.clock()
	var done []*producerConn
	for e := p.lru.Back(); e != nil; {
		c := e.Value.(*producerConn)
		e = e.Prev()
		if c.users == 0 && (now.Sub(c.lastUsed) >= p.idleAfter() || c.cc.GetState() == connectivity.TransientFailure) {
			done = p.leaveLocked(c, done)
		}
	}
	p.mu.Unlock()
	closeClients(done)
}

// tick is the idle sweep's timer: it sweeps, and runs again while anything
// is cached.
func (p *producerClients) tick() {
	p.sweep()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.lru.Len() == 0 {
		p.timer = nil
		return
	}
	p.timer.Reset(p.idleAfter() / 2)
}

// size is the number of cached clients; open the number not yet closed,
// cached or not (tests, observables).
func (p *producerClients) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *producerClients) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all)
}

// close closes every client, in use or pinned or not (the drain), and
// stops the sweep.
func (p *producerClients) close() {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	var done []*producerConn
	for c := range p.all {
		done = append(done, c)
	}
	for e := p.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*producerConn).elem = nil
	}
	p.conns, p.all = nil, nil
	p.lru.Init()
	p.mu.Unlock()
	closeClients(done)
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

// carriers closes the window: the closed channels of the connections the
// peer has spoken on that were open or established during the call, which
// may have carried the request (Q-6 waits for them). Whether a request was
// sent at all is not read here (garbage is bytes too): callTransfer
// decides Q-2 by sendWatch.
func (w callWindow) carriers() (open []<-chan struct{}) {
	c := w.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	for tc := range w.at {
		if tc.spoke.Load() {
			open = append(open, tc.closed) // closed already or not: waiting on a closed channel is free
		}
	}
	for tc := range c.live {
		if tc.seq > w.seq && tc.spoke.Load() {
			open = append(open, tc.closed)
		}
	}
	return open
}

// sendWatch is the producer clients' stats handler: it tells a call whether
// its request headers were queued on a transport, i.e. whether the request
// may have been sent or certainly was not. grpc-go reports
// stats.OutHeader once the headers are queued for a transport that read
// the server's preface, before the call can return; nothing of a request
// is written before its headers. A call that ends without it never reached
// a ready connection: refused, never established, or a peer that does not
// speak HTTP/2 (garbage, a trickle, silence; attacks A5 and F6).
type sendWatch struct{}

// sendWatchKey is the context key of the flag a call watches (watchSend).
type sendWatchKey struct{}

// watchSend returns ctx carrying a flag that sendWatch sets once the call
// made on ctx has queued its request headers on a transport.
func watchSend(ctx context.Context) (context.Context, *atomic.Bool) {
	sent := new(atomic.Bool)
	return context.WithValue(ctx, sendWatchKey{}, sent), sent
}

func (sendWatch) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (sendWatch) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.OutHeader); ok && h.Client {
		if sent, ok := ctx.Value(sendWatchKey{}).(*atomic.Bool); ok {
			sent.Store(true)
		}
	}
}

func (sendWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (sendWatch) HandleConn(context.Context, stats.ConnStats) {}
