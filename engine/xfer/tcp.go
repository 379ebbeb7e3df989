package xfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TCPOptions configure a tcp agent.
type TCPOptions struct {
	Options
	// ListenAddress is where the agent accepts peers' writes
	// ("127.0.0.1:0" when empty: a free loopback port).
	ListenAddress string
	// AdvertiseAddress is the "host:port" peers dial, put in LocalMetadata.
	// Empty means the listener's own address; set it when listening on a
	// wildcard address.
	AdvertiseAddress string
	// Network is the transport; nil means TCPNetwork (real sockets).
	Network Network
	// WriteTimeout bounds one outbound write from dial to acknowledgement,
	// measured on Clock; past it the write fails with ErrBackend. Zero
	// means 30 s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long the target waits for the next header or
	// the next chunk (1 MiB) of a body before it drops the connection (the
	// write then ends InboundBroken and its regions may be deregistered).
	// Zero means 10 s.
	IdleTimeout time.Duration
}

const (
	defaultWriteTimeout = 30 * time.Second
	defaultIdleTimeout  = 10 * time.Second
	// bodyChunkBytes: the target refreshes its read deadline every chunk.
	bodyChunkBytes = 1 << 20
	// acceptBackoff: pause after a temporary Accept failure (EMFILE).
	acceptBackoff = 10 * time.Millisecond
	// maxIdlePerPeer: outbound connections kept open per peer after a clean
	// write, so the next write skips the dial and TCP's warm-up.
	maxIdlePerPeer = 4
	// maxIdleTotal: outbound connections kept open across all peers; past
	// it the longest-kept one is closed, so the pool stays bounded however
	// many peers (names and addresses) the agent's callers write to.
	maxIdleTotal = 64
)

// NewTCP starts a tcp agent listening on opts.ListenAddress. A write reuses
// an idle connection to the peer or dials one, sends the frame (see
// tcp_wire.go), streams the bytes straight from the source memory and
// completes on the target's acknowledgement, which the target sends only
// after every byte is in its registered memory (package doc, "Backends").
// A READ sends a READ frame on such a connection; the target streams the
// ranges back from its registered memory and the bytes are read straight
// into the local destinations.
// Post always answers StatusInProgress. Errors: ErrInvalidParam (bad name,
// an advertise address not in its canonical form, CanonicalAddress),
// ErrBackend wrapping the listen error.
func NewTCP(opts TCPOptions) (Agent, error) {
	c, err := newCore(BackendTCP, opts.Options)
	if err != nil {
		return nil, err
	}
	t := &tcpTransport{
		c:            c,
		network:      opts.Network,
		writeTimeout: opts.WriteTimeout,
		idleTimeout:  opts.IdleTimeout,
		conns:        map[net.Conn]struct{}{},
		idle:         map[string][]idleConn{},
	}
	if t.network == nil {
		t.network = TCPNetwork{}
	}
	if t.writeTimeout <= 0 {
		t.writeTimeout = defaultWriteTimeout
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = defaultIdleTimeout
	}
	addr := opts.ListenAddress
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := t.network.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("xfer: tcp agent listen on %q: %v: %w", addr, err, ErrBackend)
	}
	t.ln = ln
	t.advertise = opts.AdvertiseAddress
	if t.advertise == "" {
		t.advertise = ln.Addr().String()
	}
	if err := CanonicalAddress(t.advertise); err != nil {
		ln.Close()
		return nil, fmt.Errorf("xfer: advertise address (peers refuse metadata with any other): %w", err)
	}
	c.tr = t
	t.handlers.Add(1)
	go t.accept()
	return c, nil
}

type tcpTransport struct {
	c            *core
	network      Network
	ln           net.Listener
	advertise    string
	writeTimeout time.Duration
	idleTimeout  time.Duration

	handlers sync.WaitGroup // the accept loop and one per inbound connection
	mu       sync.Mutex
	closing  bool
	conns    map[net.Conn]struct{} // inbound connections being served
	idle     map[string][]idleConn // outbound connections kept for reuse, by poolKey
	idleN    int                   // connections in idle, at most maxIdleTotal
	idleSeq  uint64                // orders idle connections by when they were kept
}

// idleConn is a kept outbound connection and when it was kept.
type idleConn struct {
	conn net.Conn
	seq  uint64
}

func (t *tcpTransport) connInfo() string { return t.advertise }

func (t *tcpTransport) checkPeer(p peerInfo) error { return CanonicalAddress(p.conn) }

func (t *tcpTransport) inline(Fault) bool { return false }

// classify maps an I/O failure of an outbound write to its sentinel.
func classify(ctx context.Context, peer, stage string, err error) error {
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("xfer: write to %q cancelled while %s: %w", peer, stage, ErrCanceled)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("xfer: write to %q timed out while %s: %w", peer, stage, ErrBackend)
	}
	return fmt.Errorf("xfer: write to %q broke while %s: %w", peer, stage, ErrRemoteDisconnect)
}

// poolKey names a peer's idle connections: its name and address, so a
// peer that moved (new metadata) never gets a connection to its old place.
func poolKey(p peerInfo) string { return p.name + "\x00" + p.conn }

// takeIdle pops an idle connection to p, or returns nil.
func (t *tcpTransport) takeIdle(key string) net.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.idle[key]
	if len(conns) == 0 {
		return nil
	}
	c := conns[len(conns)-1]
	if len(conns) == 1 {
		delete(t.idle, key)
	} else {
		t.idle[key] = conns[:len(conns)-1]
	}
	t.idleN--
	return c.conn
}

// putIdle keeps a connection whose last write completed cleanly, or closes
// it when the peer's pool is full or the agent is closing. When the agent
// already keeps maxIdleTotal connections, the longest-kept one is closed
// to make room.
func (t *tcpTransport) putIdle(key string, c net.Conn) {
	if c.SetDeadline(time.Time{}) == nil {
		t.mu.Lock()
		if !t.closing && len(t.idle[key]) < maxIdlePerPeer {
			var evicted net.Conn
			if t.idleN >= maxIdleTotal {
				evicted = t.evictOldestLocked()
			}
			t.idleSeq++
			t.idle[key] = append(t.idle[key], idleConn{conn: c, seq: t.idleSeq})
			t.idleN++
			t.mu.Unlock()
			if evicted != nil {
				evicted.Close()
			}
			return
		}
		t.mu.Unlock()
	}
	c.Close()
}

// evictOldestLocked removes the longest-kept idle connection from the pool
// and returns it for the caller to close (without t.mu). Caller holds t.mu;
// the pool is not empty.
func (t *tcpTransport) evictOldestLocked() net.Conn {
	var oldKey string
	oldIdx := -1
	var oldSeq uint64
	for key, conns := range t.idle {
		for i, ic := range conns {
			if oldIdx < 0 || ic.seq < oldSeq {
				oldKey, oldIdx, oldSeq = key, i, ic.seq
			}
		}
	}
	if oldIdx < 0 {
		return nil
	}
	conns := t.idle[oldKey]
	c := conns[oldIdx].conn
	if len(conns) == 1 {
		delete(t.idle, oldKey)
	} else {
		t.idle[oldKey] = append(conns[:oldIdx:oldIdx], conns[oldIdx+1:]...)
	}
	t.idleN--
	return c
}

func (t *tcpTransport) dropPeer(p peerInfo) {
	t.mu.Lock()
	conns := t.idle[poolKey(p)]
	delete(t.idle, poolKey(p))
	t.idleN -= len(conns)
	t.mu.Unlock()
	for _, c := range conns {
		c.conn.Close()
	}
}

// errStale marks a reused connection that failed before the target accepted
// the header: no body byte was sent on it, so nothing can have landed and a
// fresh connection may carry the same write.
var errStale = errors.New("stale pooled connection")

// offer sends the header on conn and waits for the target's acceptance.
func (t *tcpTransport) offer(ctx context.Context, conn net.Conn, w *outbound, deadline time.Time, reused bool) error {
	magic := frameMagic
	if w.read {
		magic = readMagic
	}
	peer := w.peer.name
	fail := func(stage string, err error) error {
		var ne net.Error
		if reused && ctx.Err() == nil && !(errors.As(err, &ne) && ne.Timeout()) {
			return errStale
		}
		return classify(ctx, peer, stage, err)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return fail("connecting", err)
	}
	if _, err := conn.Write(encodeFrame(magic, w.from, peer, w.remote)); err != nil {
		return fail("sending the header", err)
	}
	var reply [1]byte
	if _, err := io.ReadFull(conn, reply[:]); err != nil {
		return fail("waiting for acceptance", err)
	}
	if reply[0] != replyAccept {
		return fmt.Errorf("xfer: write to %q failed in the target: %w", peer, ErrBackend)
	}
	return nil
}

// open takes an idle connection to w's peer (or dials one) and has the
// target accept w's header on it. A stale pooled connection is replaced
// by a fresh one once (nothing can have moved on it). stop detaches the
// connection from ctx; it reports false if ctx already closed it.
func (t *tcpTransport) open(ctx context.Context, w *outbound, deadline time.Time) (conn net.Conn, stop func() bool, err error) {
	key := poolKey(w.peer)
	for {
		c, reused := t.takeIdle(key), true
		if c == nil {
			var err error
			if c, err = t.network.Dial(ctx, w.peer.conn, deadline); err != nil {
				return nil, nil, classify(ctx, w.peer.name, "connecting", err)
			}
			reused = false
		}
		stopC := context.AfterFunc(ctx, func() { c.Close() })
		err := t.offer(ctx, c, w, deadline, reused)
		if err == nil {
			return c, stopC, nil
		}
		stopC()
		c.Close()
		if err != errStale {
			return nil, nil, err
		}
	}
}

// write carries out a WRITE: after the target accepted the header it
// streams the local sources and completes on the target's acknowledgement,
// sent only once every byte is in its registered memory.
func (t *tcpTransport) write(ctx context.Context, w *outbound) error {
	return t.move(ctx, w, direction{
		verb: "write to", moving: "sending bytes", ending: "waiting for the acknowledgement", end: "acknowledgement",
		chunk: func(conn net.Conn, p []byte) error { _, err := conn.Write(p); return err },
	})
}

// read carries out a READ: after the target accepted the header it streams
// the remote ranges back; they are read straight into the local
// destinations (w.srcs), and the READ completes on the target's trailing
// replyAck. Past TCPOptions.WriteTimeout it fails with ErrBackend. Once it
// returns, nothing writes into w.srcs any more: on failure the connection
// is closed, never kept with unread bytes.
func (t *tcpTransport) read(ctx context.Context, w *outbound) error {
	return t.move(ctx, w, direction{
		verb: "read from", moving: "receiving bytes", ending: "waiting for the end of the read", end: "end of read",
		chunk: func(conn net.Conn, p []byte) error { _, err := io.ReadFull(conn, p); return noEOF(err) },
	})
}

// direction is what differs between a WRITE and a READ on the initiator.
type direction struct {
	verb, moving, ending, end string
	// chunk moves one contiguous piece of the local memory over conn.
	chunk func(conn net.Conn, p []byte) error
}

// move opens (or reuses) a connection to the target, moves w's bytes in
// direction d with the fault hook applied, and waits for the target's
// closing byte; a connection is pooled again only after a clean end.
func (t *tcpTransport) move(ctx context.Context, w *outbound, d direction) error {
	peer, key := w.peer.name, poolKey(w.peer)
	deadline := t.c.clock.Now().Add(t.writeTimeout)
	conn, stop, err := t.open(ctx, w, deadline)
	if err != nil {
		return err
	}
	keep := false
	defer func() {
		if stop() && keep {
			t.putIdle(key, conn)
		} else {
			conn.Close()
		}
	}()
	span := func(from, to uint64) error {
		return forRange(w.srcs, from, to, func(_ int, _ uint64, p []byte) error { return d.chunk(conn, p) })
	}
	limit := w.fault.limit(w.total)
	if err := span(0, limit); err != nil {
		return classify(ctx, peer, d.moving, err)
	}
	switch w.fault.Kind {
	case FaultFailAfter:
		return fmt.Errorf("xfer: %s %q cut after %d of %d bytes: %w", d.verb, peer, limit, w.total, ErrRemoteDisconnect)
	case FaultHang:
		h := w.fault.Hang
		h.markReached()
		select {
		case <-h.release:
			if h.cancel {
				return fmt.Errorf("xfer: %s %q cancelled: %w", d.verb, peer, ErrCanceled)
			}
		case <-ctx.Done():
			return fmt.Errorf("xfer: %s %q cancelled by Close: %w", d.verb, peer, ErrCanceled)
		}
		if err := span(limit, w.total); err != nil {
			return classify(ctx, peer, d.moving, err)
		}
	}
	var reply [1]byte
	if _, err := io.ReadFull(conn, reply[:]); err != nil {
		return classify(ctx, peer, d.ending, err)
	}
	if reply[0] != replyAck {
		return fmt.Errorf("xfer: %s %q: bad %s: %w", d.verb, peer, d.end, ErrBackend)
	}
	if w.fault.Kind == FaultLoseAck {
		return fmt.Errorf("xfer: %s %q: %s lost: %w", d.verb, peer, d.end, ErrRemoteDisconnect)
	}
	keep = true
	return nil
}

// accept runs until the listener closes.
func (t *tcpTransport) accept() {
	defer t.handlers.Done()
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			t.mu.Lock()
			closing := t.closing
			t.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) || !isTemporary(err) {
				return
			}
			// Out of file descriptors and the like: back off, then retry.
			// A pause, not a synchronisation, so the real clock is fine.
			time.Sleep(acceptBackoff)
			continue
		}
		t.mu.Lock()
		if t.closing {
			t.mu.Unlock()
			conn.Close()
			return
		}
		t.conns[conn] = struct{}{}
		t.handlers.Add(1)
		t.mu.Unlock()
		go t.serve(conn)
	}
}

// isTemporary reports accept errors worth retrying (out of descriptors).
func isTemporary(err error) bool {
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}

// serve handles the frames of one inbound connection. The connection is
// a carrier (Revoke): once serve returns, nothing more it carries can
// touch registered memory.
func (t *tcpTransport) serve(conn net.Conn) {
	car := &carrier{}
	defer func() {
		t.mu.Lock()
		delete(t.conns, conn)
		t.mu.Unlock()
		conn.Close()
		t.c.carrierClosed(car)
		t.handlers.Done()
	}()
	br := bufio.NewReaderSize(conn, 16<<10)
	for {
		if conn.SetReadDeadline(t.c.clock.Now().Add(t.idleTimeout)) != nil {
			return
		}
		from, target, segs, read, err := readHeader(br)
		if err != nil {
			return // clean end, I/O error or malformed: close without writing a byte
		}
		in, err := t.c.beginInbound(from, target, segs, read, car, nil)
		if err != nil {
			_ = conn.SetWriteDeadline(t.c.clock.Now().Add(t.idleTimeout))
			_, _ = conn.Write([]byte{replyRefuse})
			return
		}
		if err := t.reply(conn, replyAccept); err != nil {
			in.end(0, fmt.Errorf("connection: %v", err))
			return
		}
		if read {
			sent, err := t.sendBodies(conn, in.dst)
			if err != nil {
				in.end(sent, fmt.Errorf("connection: %v", err))
				return
			}
			in.end(sent, nil) // BEFORE the end byte: the reader's Done implies Deregister works here
			if t.reply(conn, replyAck) != nil {
				return
			}
			continue
		}
		landed, err := t.readBodies(br, conn, in.dst)
		if err != nil {
			in.end(landed, fmt.Errorf("connection: %v", err))
			return
		}
		in.end(landed, nil) // BEFORE the acknowledgement: the initiator's Done implies Deregister works here
		if t.reply(conn, replyAck) != nil {
			return
		}
	}
}

func (t *tcpTransport) reply(conn net.Conn, b byte) error {
	if err := conn.SetWriteDeadline(t.c.clock.Now().Add(t.idleTimeout)); err != nil {
		return err
	}
	_, err := conn.Write([]byte{b})
	return err
}

// readBodies reads the segments' bytes straight into registered memory, in
// chunks, refreshing the idle deadline per chunk. It never writes past a
// segment: each read targets exactly the next unfilled part of dst.
func (t *tcpTransport) readBodies(br *bufio.Reader, conn net.Conn, dst [][]byte) (uint64, error) {
	var landed uint64
	for _, d := range dst {
		for off := 0; off < len(d); {
			end := min(off+bodyChunkBytes, len(d))
			if err := conn.SetReadDeadline(t.c.clock.Now().Add(t.idleTimeout)); err != nil {
				return landed, err
			}
			n, err := io.ReadFull(br, d[off:end])
			landed += uint64(n)
			if err != nil {
				return landed, noEOF(err)
			}
			off = end
		}
	}
	return landed, nil
}

// sendBodies writes the segments' bytes straight from registered memory to
// a reader, in chunks, refreshing the idle deadline per chunk.
func (t *tcpTransport) sendBodies(conn net.Conn, src [][]byte) (uint64, error) {
	var sent uint64
	for _, d := range src {
		for off := 0; off < len(d); {
			end := min(off+bodyChunkBytes, len(d))
			if err := conn.SetWriteDeadline(t.c.clock.Now().Add(t.idleTimeout)); err != nil {
				return sent, err
			}
			n, err := conn.Write(d[off:end])
			sent += uint64(n)
			if err != nil {
				return sent, err
			}
			off = end
		}
	}
	return sent, nil
}

func (t *tcpTransport) close() error {
	t.mu.Lock()
	t.closing = true
	conns := make([]net.Conn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	for _, idle := range t.idle {
		for _, ic := range idle {
			conns = append(conns, ic.conn)
		}
	}
	t.idle = map[string][]idleConn{}
	t.idleN = 0
	t.mu.Unlock()
	err := t.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	t.handlers.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("xfer: closing the tcp listener: %v: %w", err, ErrBackend)
	}
	return nil
}
