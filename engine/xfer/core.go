package xfer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Options configure an agent of either backend.
type Options struct {
	// Name is the agent's name, 1..255 bytes without NUL, unique among the
	// agents that talk to each other (the engine uses its instance id).
	Name string
	// Rand is the source of remote keys (16 bytes per region). Nil means
	// crypto/rand.
	Rand io.Reader
	// Clock sets I/O deadlines. Nil means SystemClock.
	Clock Clock
	// Faults is a test hook consulted at every Post; nil in production.
	Faults FaultHook
	// OnInbound, if set, is called once for every peer write addressed to
	// this agent, after the agent has stopped touching the target memory
	// for it (and, for a landed write, BEFORE the acknowledgement leaves).
	// Called from the agent's goroutines (on a ManualNetwork: from the
	// driver's call) without locks held; must not block for long. It may
	// call the agent's and a ManualNetwork's methods (Post, Pending, and on
	// loopback and manual agents Close, which then does not wait for the
	// hook to return).
	OnInbound func(InboundEvent)
}

// InboundEvent reports one peer write (or READ) addressed to this agent
// (the target side). Only the target sees why a transfer was refused; the
// initiator gets ErrBackend (see "How errors collapse" in the package doc).
type InboundEvent struct {
	// From is the initiating agent's name, as it claims it.
	From string
	// Bytes is the write's declared total length.
	Bytes uint64
	// Landed is how many bytes were written into registered memory: Bytes
	// for InboundLanded, 0 for InboundRefused, anything up to Bytes for
	// InboundBroken.
	Landed uint64
	// Outcome says how it ended.
	Outcome InboundOutcome
	// Reason is a human-readable cause for a refused or broken write
	// ("unknown remote key", "range outside region", "connection: EOF").
	Reason string
	// Read is true for a peer's READ of this agent's registered memory
	// (CreateRead on the peer). Then Landed counts the bytes sent from the
	// region to the reader, and InboundLanded means every byte was sent;
	// this agent's memory is never written by a READ.
	Read bool
}

// InboundOutcome is how a peer's write ended on the target.
type InboundOutcome int

const (
	// InboundLanded: every byte was written; the acknowledgement follows.
	InboundLanded InboundOutcome = iota
	// InboundRefused: refused before any byte was written (wrong agent name,
	// unknown remote key, range outside its region, agent closed).
	InboundRefused
	// InboundBroken: accepted, then cut short (connection lost, timeout,
	// the initiator's fault); Landed bytes were written.
	InboundBroken
)

// Address layout of the synthetic address space each agent issues: regions
// start at addressBase, aligned to addressAlign, with at least one
// addressAlign gap between neighbours so no range spans two regions.
const (
	addressBase  = 0x10_0000_0000
	addressAlign = 64 << 10
)

// transport is what a backend adds to the shared agent core: how to reach a
// peer and how to carry a write to it.
type transport interface {
	// connInfo goes into LocalMetadata.
	connInfo() string
	// checkPeer refuses metadata this transport cannot reach (ErrInvalidParam).
	checkPeer(p peerInfo) error
	// inline reports whether a write with this fault completes inside Post.
	inline(f Fault) bool
	// write carries one outbound write out; it returns nil once the target
	// acknowledged it, or an error wrapping a sentinel. It must stop
	// touching w.srcs before it returns, and end early when ctx ends.
	write(ctx context.Context, w *outbound) error
	// read carries one outbound READ out: the peer's w.remote ranges into
	// the local w.srcs. It returns nil once every byte is in w.srcs and the
	// target has stopped touching its regions, or an error wrapping a
	// sentinel. It must stop writing into w.srcs before it returns, and
	// end early when ctx ends.
	read(ctx context.Context, w *outbound) error
	// dropPeer forgets what the transport keeps for a peer (idle
	// connections) once its metadata is invalidated or replaced.
	dropPeer(p peerInfo)
	// close stops inbound writes and waits until none touches memory.
	close() error
}

// outbound is one post of a request, as the transport sees it. For a
// READ, srcs are the local destinations the peer's bytes are read into.
type outbound struct {
	from   string
	peer   peerInfo
	srcs   [][]byte
	remote []Descriptor
	total  uint64
	fault  Fault
	read   bool
}

// core is the agent both backends share: the tables, the request state
// machine and the target-side checks. The mutex is never held across I/O or
// a wait (CONTRACT Q-5).
type core struct {
	name      string
	backend   string
	rand      io.Reader
	clock     Clock
	faults    FaultHook
	onInbound func(InboundEvent)
	tr        transport

	// ctx is cancelled by Close: it ends every outbound write. It is made
	// at its first use (agentContext; guarded by mu): an agent whose
	// posts are all held by a ManualNetwork never needs one.
	ctx       context.Context
	cancelAll context.CancelFunc
	writers   sync.WaitGroup // outbound write goroutines
	inbounds  sync.WaitGroup // accepted peer writes not yet ended

	mu       sync.Mutex
	closed   bool
	nextID   uint64
	seq      uint64
	nextAddr uint64
	// regs are the live registrations, each holding its regions, each at
	// its idx (a slice, not a map keyed by id: an agent holds a few, and
	// regsInline holds the first of them without an allocation; issue #16).
	regs       []*Registration
	regsInline [4]*Registration
	// ones is the block the next one-region registrations are taken from
	// (RegisterMemory, nextOne), in order, each once: first onesInline,
	// in the agent's own allocation (a registration keeps its agent alive
	// anyway, Registration.owner), then blocks of onesBlock (issue #16:
	// the simulator starts agents every run, and registers a source per
	// entry and a buffer per receive). A block stays alive while one of
	// its registrations is referred to.
	ones       []oneRegion
	onesInline [oneRegionsInline]oneRegion
	onesMade   bool // ones has been set (to onesInline first)
	// byKey indexes the live registrations' regions by remote key once
	// they are more than keyScanMax (nil until then: regionByKey scans
	// regs, cheaper for a few than a map's hash, and no allocation; issue
	// #16); nRegions counts them.
	byKey    map[remoteKey]*region
	nRegions int
	peers    map[string]peerInfo // made at the first peer loaded
	// reqs are the unreleased requests, each at its idx (as regs).
	reqs       []*Request
	reqsInline [4]*Request
	inflight   int
	inbound    int
	// revocations are the revoked registrations whose done channel is
	// not yet closed (Revoke), re-checked whenever an inbound transfer
	// ends, a request is released or a carrier closes.
	revocations []*revocation
}

// remoteKey is a remote key this agent issued (remoteKeyBytes bytes), as a
// map key: an array needs no string copy per registered region.
type remoteKey [remoteKeyBytes]byte

// keyScanMax is the most live regions regionByKey finds by a scan of the
// registrations, without the map core.byKey.
const keyScanMax = 8

// regionByKey returns the registered region whose remote key is k, or nil
// (a key of another length is none of this agent's). Caller holds c.mu.
func (c *core) regionByKey(k []byte) *region {
	if len(k) != remoteKeyBytes {
		return nil
	}
	return c.regionOfKey(remoteKey(k))
}

// regionOfKey returns the registered region whose remote key is k, or nil.
// Caller holds c.mu.
func (c *core) regionOfKey(k remoteKey) *region {
	if c.byKey != nil {
		return c.byKey[k]
	}
	for _, reg := range c.regs {
		for _, r := range reg.regions {
			if r.key == k {
				return r
			}
		}
	}
	return nil
}

// addRegionKeys indexes the regions rs of a registration not yet in
// c.regs by their keys. Caller holds c.mu.
func (c *core) addRegionKeys(rs []*region) {
	c.nRegions += len(rs)
	if c.byKey == nil && c.nRegions > keyScanMax {
		c.byKey = make(map[remoteKey]*region, c.nRegions)
		for _, reg := range c.regs {
			for _, r := range reg.regions {
				c.byKey[r.key] = r
			}
		}
	}
	if c.byKey != nil {
		for _, r := range rs {
			c.byKey[r.key] = r
		}
	}
}

// dropRegionKey forgets the key of a region whose registration leaves
// c.regs. Caller holds c.mu.
func (c *core) dropRegionKey(r *region) {
	c.nRegions--
	delete(c.byKey, r.key)
}

// region is one registered buffer.
type region struct {
	regID   uint64
	buf     []byte
	base    uint64
	key     remoteKey
	users   int // unreleased requests reading it
	inbound int // peer writes landing in it
	// carriers are the inbound connections that carried a peer transfer
	// into the region (tcp; loopback has none), kept until the region is
	// deregistered or its revocation is done.
	carriers map[*carrier]struct{}
}

// carrier is one inbound connection of a transport (tcp) that may carry
// peer transfers into registered memory. It is closed once the transport
// has stopped reading from it and will never touch memory for it again.
type carrier struct {
	closed bool // guarded by core.mu
}

// revocation is one Revoke waiting for its regions to go quiet.
type revocation struct {
	regions []*region
	done    chan struct{}
}

func (r *region) contains(addr, length uint64) bool {
	return addr >= r.base && addr-r.base <= uint64(len(r.buf)) && length <= uint64(len(r.buf))-(addr-r.base)
}

func (r *region) slice(addr, length uint64) []byte {
	off := addr - r.base
	return r.buf[off : off+length : off+length]
}

func newCore(backend string, opts Options) (*core, error) {
	c := new(core)
	if err := c.init(backend, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// init sets up c, a zero core, as newCore's (a transport that holds its
// core allocates them together).
func (c *core) init(backend string, opts Options) error {
	if err := validName(opts.Name); err != nil {
		return err
	}
	// Field by field: c is zero already, and a core is large (onesInline),
	// so a whole-struct assignment would clear it again.
	c.name, c.backend = opts.Name, backend
	c.rand, c.clock, c.faults, c.onInbound = opts.Rand, opts.Clock, opts.Faults, opts.OnInbound
	c.nextAddr = addressBase
	if c.rand == nil {
		c.rand = rand.Reader
	}
	if c.clock == nil {
		c.clock = SystemClock{}
	}
	return nil
}

// agentContext returns the agent's context, making it at the first call;
// after Close it is cancelled.
func (c *core) agentContext() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		c.ctx, c.cancelAll = context.WithCancel(context.Background())
		if c.closed {
			c.cancelAll()
		}
	}
	return c.ctx
}

// Name is the agent's name as peers see it (Options.Name).
func (c *core) Name() string { return c.name }

// Backend is BackendLoopback or BackendTCP.
func (c *core) Backend() string { return c.backend }

func errClosed(op string) error {
	return fmt.Errorf("xfer: %s on a closed agent: %w", op, ErrNotAllowed)
}

// RegisterMemory implements Agent.RegisterMemory: one Descriptor per region, in
// order, with a fresh 16-byte remote key each. Errors: ErrInvalidParam (no
// regions, an empty region), ErrNotAllowed (closed).
func (c *core) RegisterMemory(regions [][]byte) (*Registration, error) {
	if len(regions) == 0 {
		return nil, fmt.Errorf("xfer: RegisterMemory of no regions: %w", ErrInvalidParam)
	}
	for i, buf := range regions {
		if len(buf) == 0 {
			return nil, fmt.Errorf("xfer: RegisterMemory region %d is empty: %w", i, ErrInvalidParam)
		}
	}
	// One allocation for the keys, the regions and their pointers each,
	// and one for all of them when there is one region, the usual case
	// (the simulator registers a buffer per receive and a source per
	// entry; issue #16).
	var (
		reg    *Registration
		keyBuf []byte
		slab   []region
		rs     []*region
	)
	if len(regions) == 1 {
		one := c.nextOne()
		reg, keyBuf, slab, rs = &one.reg, one.key[:], one.region[:], one.ptr[:]
		reg.Descriptors = one.desc[:]
	} else {
		reg = &Registration{Descriptors: make([]Descriptor, len(regions))}
		keyBuf = make([]byte, len(regions)*remoteKeyBytes)
		slab = make([]region, len(regions))
		rs = make([]*region, len(regions))
	}
	if _, err := io.ReadFull(c.rand, keyBuf); err != nil {
		return nil, fmt.Errorf("xfer: drawing a remote key: %v: %w", err, ErrBackend)
	}
	key := func(i int) []byte { return keyBuf[i*remoteKeyBytes : (i+1)*remoteKeyBytes : (i+1)*remoteKeyBytes] }
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed("RegisterMemory")
	}
	for i := range regions {
		if c.regionOfKey(remoteKey(key(i))) != nil {
			return nil, fmt.Errorf("xfer: remote key collision (broken random source): %w", ErrBackend)
		}
	}
	c.nextID++
	reg.id, reg.owner = c.nextID, c
	next := c.nextAddr
	for i, buf := range regions {
		size := uint64(len(buf))
		span := (size+addressAlign-1)/addressAlign*addressAlign + addressAlign
		if next+span < next || size > 1<<62 {
			return nil, fmt.Errorf("xfer: address space exhausted: %w", ErrInvalidParam)
		}
		r := &slab[i]
		*r = region{regID: reg.id, buf: buf, base: next, key: remoteKey(key(i))}
		next += span
		rs[i] = r
		// The descriptor's key is keyBuf's own bytes: the agent keeps
		// only its own copy (region.key), so the caller's copy is its alone.
		reg.Descriptors[i] = Descriptor{Address: r.base, Length: size, MemoryKind: MemoryHost, RemoteKey: key(i)}
	}
	c.nextAddr = next
	if c.regs == nil {
		c.regs = c.regsInline[:0]
	}
	c.addRegionKeys(rs)
	reg.regions = rs
	reg.idx = len(c.regs)
	c.regs = append(c.regs, reg)
	return reg, nil
}

// isLive reports whether reg is one of this agent's live registrations.
// Caller holds c.mu.
func (c *core) isLive(reg *Registration) bool {
	return reg.owner == c && reg.idx < len(c.regs) && c.regs[reg.idx] == reg
}

// dropReg removes the live registration reg from c.regs, moving the last
// one into its place. Caller holds c.mu.
func (c *core) dropReg(reg *Registration) {
	last := len(c.regs) - 1
	moved := c.regs[last]
	c.regs[reg.idx], moved.idx = moved, reg.idx
	c.regs[last] = nil
	c.regs = c.regs[:last]
}

// oneRegionsInline is how many one-region registrations an agent holds in
// its own allocation (core.onesInline); onesBlock how many a block of
// later ones holds (a few: a block's unused ones are memory lost).
const (
	oneRegionsInline = 2
	onesBlock        = 4
)

// nextOne takes the next one-region registration of c.ones, making a new
// block when none is left. Each is taken once and never reused, so a
// stale *Registration never aliases a later one. It holds c.mu while it
// takes one, so concurrent RegisterMemory calls take different ones.
func (c *core) nextOne() *oneRegion {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ones) == 0 {
		if !c.onesMade {
			c.ones, c.onesMade = c.onesInline[:], true
		} else {
			c.ones = make([]oneRegion, onesBlock)
		}
	}
	one := &c.ones[0]
	c.ones = c.ones[1:]
	return one
}

// oneRegion is a one-region registration in one allocation (RegisterMemory).
type oneRegion struct {
	reg    Registration
	desc   [1]Descriptor
	region [1]region
	ptr    [1]*region
	key    [remoteKeyBytes]byte
}

// Deregister implements Agent.Deregister. Errors: ErrInvalidParam (nil),
// ErrNotFound (unknown or ended), ErrNotAllowed (an unreleased request uses a
// region, or a peer's write is landing in one; the registration is kept).
func (c *core) Deregister(reg *Registration) error {
	if reg == nil {
		return fmt.Errorf("xfer: Deregister(nil): %w", ErrInvalidParam)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.isLive(reg) {
		return fmt.Errorf("xfer: Deregister of an unknown registration: %w", ErrNotFound)
	}
	for _, r := range reg.regions {
		if r.users > 0 {
			return fmt.Errorf("xfer: Deregister while %d unreleased request(s) read the region: %w", r.users, ErrNotAllowed)
		}
		if r.inbound > 0 {
			return fmt.Errorf("xfer: Deregister while %d peer write(s) land in the region: %w", r.inbound, ErrNotAllowed)
		}
	}
	for _, r := range reg.regions {
		c.dropRegionKey(r)
		r.carriers = nil
	}
	reg.regions = nil
	c.dropReg(reg)
	return nil
}

// Revoke implements Agent.Revoke (CONTRACT Q-6): the regions' keys are
// forgotten at once; done closes once nothing lands in, reads or uses them and
// every connection that carried a transfer into them has closed. Errors:
// ErrInvalidParam (nil), ErrNotFound (unknown or ended).
func (c *core) Revoke(reg *Registration) (<-chan struct{}, error) {
	if reg == nil {
		return nil, fmt.Errorf("xfer: Revoke(nil): %w", ErrInvalidParam)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.isLive(reg) {
		return nil, fmt.Errorf("xfer: Revoke of an unknown registration: %w", ErrNotFound)
	}
	rs := reg.regions
	for _, r := range rs {
		c.dropRegionKey(r) // from here every transfer naming it is refused
	}
	reg.regions = nil
	c.dropReg(reg)
	quiet := true
	for _, r := range rs {
		quiet = quiet && r.quiet()
	}
	if quiet {
		// Nothing can touch the regions: done is closed already, and
		// needs no revocation or channel of its own (issue #16).
		c.settleRevocationsLocked()
		return closedChan, nil
	}
	rv := &revocation{regions: rs, done: make(chan struct{})}
	c.revocations = append(c.revocations, rv)
	c.settleRevocationsLocked()
	return rv.done, nil
}

// quiet reports whether nothing can touch a revoked region any more: no
// peer transfer lands in it or reads it, no local request uses it, and
// every connection that carried a transfer into it has closed.
func (r *region) quiet() bool {
	if r.inbound > 0 || r.users > 0 {
		return false
	}
	for car := range r.carriers {
		if !car.closed {
			return false
		}
	}
	return true
}

// settleRevocationsLocked closes the done channel of every revocation
// whose regions are quiet. Caller holds c.mu.
func (c *core) settleRevocationsLocked() {
	kept := c.revocations[:0]
	for _, rv := range c.revocations {
		quiet := true
		for _, r := range rv.regions {
			quiet = quiet && r.quiet()
		}
		if quiet {
			close(rv.done)
			continue
		}
		kept = append(kept, rv)
	}
	for i := len(kept); i < len(c.revocations); i++ {
		c.revocations[i] = nil
	}
	c.revocations = kept
}

// carrierClosed records that a transport connection will carry nothing
// more into memory (it has closed and its reader has returned).
func (c *core) carrierClosed(car *carrier) {
	c.mu.Lock()
	car.closed = true
	c.settleRevocationsLocked()
	c.mu.Unlock()
}

// LocalMetadata implements Agent.LocalMetadata: the encoded backend, name and
// address of this agent. Error: ErrNotAllowed (closed).
func (c *core) LocalMetadata() ([]byte, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, errClosed("LocalMetadata")
	}
	return encodeMetadata(c.backend, c.name, c.tr.connInfo()), nil
}

// peerOf decodes md as the metadata of a peer this agent can reach: of its
// backend (and, for loopback, its registry). ErrInvalidParam otherwise.
func (c *core) peerOf(md []byte) (peerInfo, error) {
	p, err := decodeMetadata(md)
	if err != nil {
		return peerInfo{}, err
	}
	if p.backend != c.backend {
		return peerInfo{}, fmt.Errorf("xfer: metadata of backend %q given to a %q agent: %w", p.backend, c.backend, ErrInvalidParam)
	}
	if err := c.tr.checkPeer(p); err != nil {
		return peerInfo{}, err
	}
	return p, nil
}

// LoadRemoteMetadata implements Agent.LoadRemoteMetadata: it loads md into the
// shared peer table under the peer's name, replacing an entry of that name, and
// returns the name. Errors: ErrInvalidParam (not metadata this agent can
// reach), ErrNotAllowed (closed).
func (c *core) LoadRemoteMetadata(md []byte) (string, error) {
	p, err := c.peerOf(md)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", errClosed("LoadRemoteMetadata")
	}
	old, had := c.peers[p.name]
	if c.peers == nil {
		c.peers = map[string]peerInfo{}
	}
	c.peers[p.name] = p
	c.mu.Unlock()
	if had && old.conn != p.conn {
		c.tr.dropPeer(old)
	}
	return p.name, nil
}

// InvalidateRemoteMetadata implements Agent.InvalidateRemoteMetadata: it
// forgets peer; requests already created keep their copy. Error: ErrNotFound
// (unknown peer).
func (c *core) InvalidateRemoteMetadata(peer string) error {
	c.mu.Lock()
	p, ok := c.peers[peer]
	delete(c.peers, peer)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("xfer: peer %q: %w", peer, ErrNotFound)
	}
	c.tr.dropPeer(p)
	return nil
}

// CheckRemote applies to a peer's descriptors every check CreateWrite,
// CreateRead, CreateWriteTo and CreateReadFrom make of their remote side:
// 1..MaxSegments descriptors, each of host memory, non-empty, not wrapping
// around 2^64, with a remote key of 1..64 bytes (key and bounds against
// the region are the target's to check, when the transfer arrives). A
// caller checks a peer's descriptors with it before it commits to a
// transfer (the engine's producer: before it claims the entry, so a bad
// descriptor is a definite pre-write rejection, CONTRACT Q-2). Errors:
// ErrInvalidParam, ErrNotSupported (a memory kind other than host).
func CheckRemote(remote []Descriptor) error {
	if len(remote) == 0 || len(remote) > MaxSegments {
		return fmt.Errorf("xfer: %d remote descriptors (want 1..%d): %w", len(remote), MaxSegments, ErrInvalidParam)
	}
	for i, d := range remote {
		if err := checkRemote(i, d); err != nil {
			return err
		}
	}
	return nil
}

// checkRemote validates what CreateWrite can see of a remote descriptor; key
// and bounds are the target's to check.
func checkRemote(i int, d Descriptor) error {
	if d.MemoryKind != MemoryHost {
		return fmt.Errorf("xfer: remote descriptor %d has memory kind %q: %w", i, d.MemoryKind, ErrNotSupported)
	}
	if d.Length == 0 || d.Address+d.Length < d.Address {
		return fmt.Errorf("xfer: remote descriptor %d is empty or wraps around: %w", i, ErrInvalidParam)
	}
	if len(d.RemoteKey) == 0 || len(d.RemoteKey) > maxRemoteKeyBytes {
		return fmt.Errorf("xfer: remote descriptor %d has a %d-byte key (want 1..%d): %w", i, len(d.RemoteKey), maxRemoteKeyBytes, ErrInvalidParam)
	}
	return nil
}

// localRegion finds the registered region holding d. Caller holds c.mu.
func (c *core) localRegion(i int, d Descriptor) (*region, error) {
	if d.MemoryKind != MemoryHost {
		return nil, fmt.Errorf("xfer: local descriptor %d has memory kind %q: %w", i, d.MemoryKind, ErrNotSupported)
	}
	if d.Length == 0 || d.Address+d.Length < d.Address {
		return nil, fmt.Errorf("xfer: local descriptor %d is empty or wraps around: %w", i, ErrInvalidParam)
	}
	if len(d.RemoteKey) > 0 {
		if r := c.regionByKey(d.RemoteKey); r != nil && r.contains(d.Address, d.Length) {
			return r, nil
		}
	} else {
		for _, reg := range c.regs {
			for _, r := range reg.regions {
				if r.contains(d.Address, d.Length) {
					return r, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("xfer: local descriptor %d is not inside a registered region: %w", i, ErrNotFound)
}

// CreateWrite implements Agent.CreateWrite: a WRITE of local[i] into remote[i]
// of the loaded peer. Errors (nothing sent): ErrInvalidParam, ErrMismatch,
// ErrNotFound, ErrNotSupported, ErrNotAllowed.
func (c *core) CreateWrite(local []Descriptor, peer string, remote []Descriptor) (*Request, error) {
	return c.createTransfer("CreateWrite", false, local, peer, nil, remote)
}

// CreateRead implements Agent.CreateRead: a READ of remote[i] of the loaded
// peer into local[i]. Errors as CreateWrite.
func (c *core) CreateRead(local []Descriptor, peer string, remote []Descriptor) (*Request, error) {
	return c.createTransfer("CreateRead", true, local, peer, nil, remote)
}

// CreateWriteTo implements Agent.CreateWriteTo: CreateWrite to the peer md
// describes, decoded for this request alone; the shared peer table is neither
// read nor changed. Errors: ErrInvalidParam for md, then CreateWrite's.
func (c *core) CreateWriteTo(local []Descriptor, md []byte, remote []Descriptor) (*Request, error) {
	p, err := c.peerOf(md)
	if err != nil {
		return nil, err
	}
	return c.createTransfer("CreateWriteTo", false, local, p.name, &p, remote)
}

// CreateReadFrom implements Agent.CreateReadFrom: CreateRead from the peer md
// describes, decoded for this request alone. Errors: ErrInvalidParam for md,
// then CreateRead's.
func (c *core) CreateReadFrom(local []Descriptor, md []byte, remote []Descriptor) (*Request, error) {
	p, err := c.peerOf(md)
	if err != nil {
		return nil, err
	}
	return c.createTransfer("CreateReadFrom", true, local, p.name, &p, remote)
}

// createTransfer prepares a WRITE (local -> remote) or a READ (remote ->
// local); the checks are the same, only the direction differs. to is the
// request's own peer (CreateWriteTo, CreateReadFrom); nil means the peer
// loaded under the name peer.
func (c *core) createTransfer(op string, read bool, local []Descriptor, peer string, to *peerInfo, remote []Descriptor) (*Request, error) {
	if len(local) == 0 || len(local) > MaxSegments {
		return nil, fmt.Errorf("xfer: %s with %d descriptors (want 1..%d): %w", op, len(local), MaxSegments, ErrInvalidParam)
	}
	if len(local) != len(remote) {
		return nil, fmt.Errorf("xfer: %s with %d local and %d remote descriptors: %w", op, len(local), len(remote), ErrMismatch)
	}
	for i := range remote {
		if err := checkRemote(i, remote[i]); err != nil {
			return nil, err
		}
		if local[i].Length != remote[i].Length {
			return nil, fmt.Errorf("xfer: descriptor pair %d: local %d bytes, remote %d bytes: %w", i, local[i].Length, remote[i].Length, ErrMismatch)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed(op)
	}
	var p peerInfo
	if to != nil {
		p = *to
	} else {
		var ok bool
		if p, ok = c.peers[peer]; !ok {
			return nil, fmt.Errorf("xfer: %s to peer %q whose metadata is not loaded: %w", op, peer, ErrNotFound)
		}
	}
	r := &Request{owner: c, peer: p, done: closedChan, read: read}
	one := len(local) == 1
	if one {
		r.srcs, r.remote, r.regions = r.one.src[:0], r.one.remote[:0], r.one.region[:0]
	}
	seen := map[*region]bool{}
	for i, d := range local {
		reg, err := c.localRegion(i, d)
		if err != nil {
			return nil, err
		}
		r.srcs = append(r.srcs, reg.slice(d.Address, d.Length))
		rd := remote[i]
		if k := rd.RemoteKey; one && len(k) <= len(r.one.key) {
			rd.RemoteKey = append(r.one.key[:0:len(k)], k...)
		} else {
			rd.RemoteKey = append([]byte(nil), k...)
		}
		r.remote = append(r.remote, rd)
		r.total += d.Length
		if !seen[reg] {
			seen[reg] = true
			r.regions = append(r.regions, reg)
		}
	}
	for _, reg := range r.regions {
		reg.users++
	}
	c.nextID++
	r.id = c.nextID
	if c.reqs == nil {
		c.reqs = c.reqsInline[:0]
	}
	r.idx = len(c.reqs)
	c.reqs = append(c.reqs, r)
	return r, nil
}

// closedChan is the done channel of a request not yet posted: closed, so
// a wait on it ends at once. One for all requests, as context's closedchan:
// nothing closes or sends on it again (Post gives the request a fresh one).
var closedChan = make(chan struct{})

func init() { close(closedChan) }

// checkRequest: caller holds c.mu.
func (c *core) checkRequest(op string, r *Request) error {
	if r == nil || r.owner != c || r.released || r.idx >= len(c.reqs) || c.reqs[r.idx] != r {
		return fmt.Errorf("xfer: %s of a released, foreign or nil request: %w", op, ErrInvalidParam)
	}
	return nil
}

// Post implements Agent.Post: StatusDone if the transfer completed within the
// call, StatusInProgress if it continues. Errors: ErrInvalidParam (released,
// foreign or nil request), ErrRepostActive (still in flight), ErrNotAllowed
// (closed); any other error is an uncertain outcome (CONTRACT ).
func (c *core) Post(r *Request) (Status, error) {
	c.mu.Lock()
	if err := c.checkRequest("Post", r); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if c.closed {
		c.mu.Unlock()
		return 0, errClosed("Post")
	}
	if r.state == reqInFlight {
		c.mu.Unlock()
		return 0, fmt.Errorf("xfer: Post of a request still in flight: %w", ErrRepostActive)
	}
	r.state, r.err, r.done, r.cancel = reqInFlight, nil, nil, nil // done: made by the first Done while in flight
	c.inflight++
	c.seq++
	info := WriteInfo{Seq: c.seq, Peer: r.peer.name, Bytes: r.total, Segments: len(r.srcs), Read: r.read}
	c.writers.Add(1)
	c.mu.Unlock()

	var f Fault
	if c.faults != nil {
		f = c.faults(info)
		if f.Kind == FaultHang && f.Hang == nil {
			f = Fault{Kind: FaultFailAfter, AfterBytes: 0} // a misconfigured test fails loudly
		}
	}
	if c.tr.inline(f) {
		w := c.outbound(r, f)
		c.finish(r, c.run(c.postContext(r), &w))
		return c.Status(r)
	}
	if h, ok := c.tr.(holder); ok {
		// ManualNetwork: the driver moves it (manual.go). Nothing there
		// reads a context, so the post gets none (and no cancel). The
		// holder keeps its own copy of the outbound.
		h.hold(r, c.outbound(r, f))
		return StatusInProgress, nil
	}
	ctx := c.postContext(r)
	w := c.outbound(r, f)
	go func() { c.finish(r, c.run(ctx, &w)) }()
	return StatusInProgress, nil
}

// outbound is r's post with fault f, as the transport sees it.
func (c *core) outbound(r *Request, f Fault) outbound {
	return outbound{from: c.name, peer: r.peer, srcs: r.srcs, remote: r.remote, total: r.total, fault: f, read: r.read}
}

// postContext returns the context of r's current post, a child of the
// agent's (Close cancels it), and makes its cancel r's, which finish calls.
func (c *core) postContext(r *Request) context.Context {
	ctx, cancel := context.WithCancel(c.agentContext())
	c.mu.Lock()
	r.cancel = cancel
	c.mu.Unlock()
	return ctx
}

// run moves w through the transport: a READ or a WRITE. (A method, not a
// method value picked in Post: that would cost an allocation per post.)
func (c *core) run(ctx context.Context, w *outbound) error {
	if w.read {
		return c.tr.read(ctx, w)
	}
	return c.tr.write(ctx, w)
}

// sentinels are the errors a finished write may carry.
var sentinels = []error{ErrBackend, ErrRemoteDisconnect, ErrCanceled, ErrNotSupported, ErrInvalidParam}

// finish records the end of r's current post.
func (c *core) finish(r *Request, err error) {
	if err != nil {
		known := false
		for _, s := range sentinels {
			known = known || errors.Is(err, s)
		}
		if !known {
			err = fmt.Errorf("xfer: transfer with %q: %v: %w", r.peer.name, err, ErrBackend)
		}
	}
	c.mu.Lock()
	if err != nil {
		r.state, r.err = reqFailed, err
	} else {
		r.state = reqDone
	}
	c.inflight--
	if r.cancel != nil { // nil: a held post has no context (Post)
		r.cancel()
	}
	if r.done != nil {
		close(r.done)
	} else {
		r.done = closedChan // nobody asked for it while in flight
	}
	c.mu.Unlock()
	c.writers.Done()
}

// Status implements Agent.Status: StatusInProgress, StatusDone, or the error
// that ended the transfer (sticky until the next Post; uncertain). Errors:
// ErrNotPosted (never posted), ErrInvalidParam (released, foreign or nil).
func (c *core) Status(r *Request) (Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkRequest("Status", r); err != nil {
		return 0, err
	}
	switch r.state {
	case reqCreated:
		return 0, fmt.Errorf("xfer: Status of a request never posted: %w", ErrNotPosted)
	case reqInFlight:
		return StatusInProgress, nil
	case reqFailed:
		return 0, r.err
	}
	return StatusDone, nil
}

// Release implements Agent.Release: it frees the request handle and its hold on
// the local regions. Errors: ErrRepostActive while in flight (the handle is
// kept), ErrInvalidParam (released, foreign or nil).
func (c *core) Release(r *Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkRequest("Release", r); err != nil {
		return err
	}
	if r.state == reqInFlight {
		return fmt.Errorf("xfer: Release while the write may be in flight (handle kept): %w", ErrRepostActive)
	}
	r.released = true
	last := len(c.reqs) - 1
	moved := c.reqs[last]
	c.reqs[r.idx], moved.idx = moved, r.idx
	c.reqs[last] = nil
	c.reqs = c.reqs[:last]
	for _, reg := range r.regions {
		reg.users--
	}
	c.settleRevocationsLocked()
	return nil
}

// Counters implements Agent.Counters: a snapshot of the agent's live tables
// (registrations, regions, requests, transfers in flight either way, peers,
// revocations).
func (c *core) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := Counters{
		Registrations:   len(c.regs),
		Requests:        len(c.reqs),
		InFlight:        c.inflight,
		InboundInFlight: c.inbound,
		Peers:           len(c.peers),
		Revoked:         len(c.revocations),
	}
	for _, reg := range c.regs {
		n.Regions += len(reg.regions)
	}
	return n
}

// isClosed reports whether Close has begun.
func (c *core) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close implements Agent.Close: writes in flight fail with ErrCanceled, peers'
// writes are no longer accepted, and it returns the transport's close error
// once no goroutine of the agent touches registered memory. A second Close
// returns nil.
func (c *core) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cancelAll := c.cancelAll // nil: no context made yet (agentContext makes it cancelled)
	c.mu.Unlock()
	if cancelAll != nil {
		cancelAll()
	}
	if h, ok := c.tr.(holder); ok {
		h.abandon() // held transfers have no goroutine to see ctx end
	}
	c.writers.Wait()
	err := c.tr.close()
	c.inbounds.Wait()
	return err
}

// inboundWrite is a peer write the target accepted: the memory it may fill
// (for a peer READ: the memory it may send).
type inboundWrite struct {
	c       *core
	from    string
	dst     [][]byte
	regions []*region // one per segment (repeats allowed)
	total   uint64
	read    bool
	// one backs dst and regions of a one-segment transfer (the usual
	// one) in the inboundWrite's own allocation.
	one struct {
		dst    [1][]byte
		region [1]*region
	}
}

// beginInbound is the target-side check of a peer write or READ (read
// true): it must name this agent, and every segment must carry the key of
// the registered region that contains its whole range. On success the
// regions count a transfer in flight (Deregister is refused) until end. On
// refusal nothing is touched and the reason stays local (the initiator
// learns only ErrBackend). into, when not nil, is where the accepted write
// is kept (a transport that allocates its own transfer record keeps it
// there); otherwise it is allocated.
func (c *core) beginInbound(from, target string, segs []Descriptor, read bool, via *carrier, into *inboundWrite) (*inboundWrite, error) {
	var total uint64
	for _, s := range segs {
		total += s.Length
	}
	refuse := func(reason string) (*inboundWrite, error) {
		c.emit(InboundEvent{From: from, Bytes: total, Outcome: InboundRefused, Reason: reason, Read: read})
		return nil, fmt.Errorf("xfer: inbound transfer refused (%s): %w", reason, ErrBackend)
	}
	if target != c.name {
		return refuse("addressed to another agent")
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return refuse("agent closed")
	}
	in := into
	if in == nil {
		in = new(inboundWrite)
	}
	*in = inboundWrite{c: c, from: from, total: total, read: read}
	if len(segs) == 1 {
		in.dst, in.regions = in.one.dst[:0], in.one.region[:0]
	}
	for _, s := range segs {
		r := c.regionByKey(s.RemoteKey)
		if r == nil {
			c.mu.Unlock()
			return refuse("unknown remote key")
		}
		if s.Length == 0 || !r.contains(s.Address, s.Length) {
			c.mu.Unlock()
			return refuse("range outside its region")
		}
		in.dst = append(in.dst, r.slice(s.Address, s.Length))
		in.regions = append(in.regions, r)
	}
	for _, r := range in.regions {
		r.inbound++
		if via != nil {
			if r.carriers == nil {
				r.carriers = map[*carrier]struct{}{}
			}
			r.carriers[via] = struct{}{}
		}
	}
	c.inbound++
	c.inbounds.Add(1)
	c.mu.Unlock()
	return in, nil
}

// end releases the regions of an accepted write; err nil means every byte
// landed. The transport calls it BEFORE it acknowledges.
func (in *inboundWrite) end(landed uint64, err error) {
	c := in.c
	c.mu.Lock()
	for _, r := range in.regions {
		r.inbound--
	}
	c.inbound--
	c.settleRevocationsLocked()
	c.mu.Unlock()
	ev := InboundEvent{From: in.from, Bytes: in.total, Landed: landed, Outcome: InboundLanded, Read: in.read}
	if err != nil {
		ev.Outcome, ev.Reason = InboundBroken, err.Error()
	}
	// Done before the hook: Close waits for the memory to be left alone,
	// not for hooks, so a hook may call its own agent's Close.
	c.inbounds.Done()
	c.emit(ev)
}

func (c *core) emit(ev InboundEvent) {
	if c.onInbound != nil {
		c.onInbound(ev)
	}
}

// forRange calls fn on the bytes [from, to) of the concatenation of bufs, in
// order, one call per buffer piece.
func forRange(bufs [][]byte, from, to uint64, fn func(i int, off uint64, p []byte) error) error {
	var pos uint64
	for i, b := range bufs {
		n := uint64(len(b))
		lo, hi := max(from, pos), min(to, pos+n)
		if lo < hi {
			if err := fn(i, lo-pos, b[lo-pos:hi-pos]); err != nil {
				return err
			}
		}
		pos += n
		if pos >= to {
			break
		}
	}
	return nil
}
