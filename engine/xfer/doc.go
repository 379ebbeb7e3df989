// Package xfer is baton's transfer agent with NIXL's model (NVIDIA
// Inference Xfer Library): each engine process runs one Agent; a consumer
// registers receive buffers and hands their descriptors and its agent
// metadata to a producer inside TransferEncoderCache (WIRE.md); the
// producer's agent WRITEs its source buffers into them and the RPC returns
// OK only after the write completed, i.e. after the consumer's agent
// acknowledged that every byte is in its memory. The other direction, a
// READ (CreateRead), pulls a peer's registered memory into local registered
// memory: E+P+D's decode engine reads the prefill engine's KV session that
// way. Two backends implement it:
// BackendLoopback (agents of one process, found by name in a Registry) and
// BackendTCP (real sockets between processes).
//
// # Lifecycle
//
// Consumer (target):
//
//	reg, _ := consumer.RegisterMemory([][]byte{buf})   // reg.Descriptors[0]: address, length, "host", remote key
//	md, _ := consumer.LocalMetadata()                   // -> TransferEncoderCacheRequest.consumer_agent
//	... call the producer (no lock held, CONTRACT Q-5) ...
//	OK                                 -> use buf, then consumer.Deregister(reg)
//	any code + before-write trailer    -> consumer.Deregister(reg) 
//	anything else                      -> quarantine buf: done, _ := consumer.Revoke(reg)
//	                                      refuses every later write at once; free or reuse buf
//	                                      only after <-done: no write in flight, every connection
//	                                      that carried one closed
//
// Producer (initiator), with metadata a request carries:
//
//	_, err := xfer.ParseMetadata(md)                    // ErrInvalidParam: answer before-write
//	err = xfer.CheckRemote(targets)                     // likewise; then decide whether to write at all
//	req, err := producer.CreateWriteTo(srcDescs, md, targets) // md for this request alone
//	st, err := producer.Post(req)                       // from here on, errors are uncertain
//	st, err = xfer.Wait(ctx, producer, req)             // or poll producer.Status(req)
//	producer.Release(req)                               // ErrRepostActive while in flight: quarantine
//	producer.Deregister(srcReg)                         // ErrNotAllowed while a request uses it
//
// # Peers: per request, or loaded by name
//
// CreateWriteTo and CreateReadFrom take the peer's metadata itself: the
// request keeps its own copy of the peer, nothing is added to the agent's
// table, and the peer is gone with the request (Release). Metadata that
// arrives in a request (a consumer_agent, a KV session's agent) takes this
// path, for two reasons the attack run showed: a table keyed by name grows
// by one entry per distinct name a client invents, for ever (A3, A7); and
// a client that loads metadata pairing another caller's agent name with a
// different address between that caller's load and its CreateWrite
// redirects the caller's WRITE (A4). LoadRemoteMetadata, CreateWrite and
// CreateRead are NIXL's own shape (one table of remote agents by name):
// for peers the caller configured and manages itself (it invalidates them).
//
// Metadata is canonical: a tcp agent's address has exactly one spelling
// (CanonicalAddress: no leading zeros in the port, canonical IP literals,
// lower-case names, at most 262 bytes), so one endpoint cannot hide behind
// many spellings from a trust check or a connection pool.
//
// READ (E+P+D: D pulls P's KV session; P only registers and describes it):
//
//	srcReg, _ := p.RegisterMemory([][]byte{kv})         // descriptor + p.LocalMetadata() -> the KV session ref
//	dstReg, _ := d.RegisterMemory([][]byte{buf})
//	req, _ := d.CreateReadFrom(dstReg.Descriptors, pMetadata, []Descriptor{kvDesc})
//	st, err := d.Post(req); st, err = xfer.Wait(ctx, d, req)
//	d.Release(req); d.Deregister(dstReg)                // after a failed READ: discard buf's bytes
//	p.Deregister(srcReg)                                // ErrNotAllowed while a READ is being served from it
//
// A READ never writes the target's memory, so its uncertainty stays with the
// initiator: after an error from Post, Status or Wait the local
// destinations hold none, some or all of the bytes. Once Status no longer
// answers StatusInProgress the agent writes no more into them (loopback and
// tcp end every write into local memory before the request finishes; a
// NIXL binding has the completion of the READ's work requests), so the
// initiator may release the request, deregister and reuse the buffers
// without a quarantine; while a READ is still in flight Release answers
// ErrRepostActive as for a write.
//
// # Mapping to NIXL (a cgo binding implements Agent like this)
//
// Method by method, with nixlAgent (C++, nixl.h) and the C API (nixl_capi.h):
//
//	NewTCP / NewLoopback      nixlAgent(name, cfg) + createBackend("UCX"|…)   nixl_capi_create_agent, nixl_capi_create_backend
//	RegisterMemory            registerMem(nixl_reg_dlist_t{DRAM_SEG})        nixl_capi_register_mem
//	Deregister                deregisterMem(same dlist)                      nixl_capi_deregister_mem
//	LocalMetadata             getLocalMD                                     nixl_capi_get_local_md
//	LoadRemoteMetadata        loadRemoteMD (returns the agent name)          nixl_capi_load_remote_md
//	InvalidateRemoteMetadata  invalidateRemoteMD                             nixl_capi_invalidate_remote_md
//	CreateWrite               createXferReq(NIXL_WRITE, local, remote, peer) nixl_capi_create_xfer_req
//	CreateRead                createXferReq(NIXL_READ, local, remote, peer)  nixl_capi_create_xfer_req (NIXL_READ)
//	CreateWriteTo/ReadFrom    loadRemoteMD + createXferReq; invalidateRemoteMD once the name's last request is released
//	Post                      postXferReq                                    nixl_capi_post_xfer_req
//	Status                    getXferStatus                                  nixl_capi_get_xfer_status
//	Release                   releaseXferReq                                 nixl_capi_release_xfer_req
//	Close                     ~nixlAgent                                     nixl_capi_destroy_agent
//	Request.Done, Wait        (no NIXL call: a goroutine polling getXferStatus with backoff)
//	Counters                  (no NIXL call: the binding's own handle tables)
//
// Descriptor is one entry of a nixl_xfer_dlist_t (addr, len, devId) plus
// the fields of WIRE.md's MemoryRegion. RemoteKey is backend-defined bytes:
// loopback and tcp issue a 16-byte random key per region and the target
// checks it; a NIXL binding carries the region's rkey in the metadata blob
// (getLocalMD after registerMem) and may leave RemoteKey empty or put the
// serialized section there. Address is a synthetic address for loopback and
// tcp (never a Go pointer, so a peer can only name memory through the
// agent's own table); for NIXL it is the virtual address.
//
// Where NIXL does not promise a rule this package enforces, the binding keeps
// the same bookkeeping in Go: deregisterMem is not documented to check for
// live transfers, so the binding counts, per region, the requests created
// over it and refuses Deregister (ErrNotAllowed) as this package does. With one-sided
// RDMA a target cannot see writes landing, so a binding reports
// InboundInFlight as 0 and cannot refuse a consumer's Deregister during a
// remote write; the consumer's rule (never deregister on an uncertain
// outcome, Q-1) is what protects that memory, here as there. NIXL keeps
// one remote agent per name, so a binding's CreateWriteTo and
// CreateReadFrom load md only while no unreleased request of that name
// was created from other metadata, and otherwise refuse with ErrNotAllowed
// (nothing sent: a definite, pre-write outcome); they invalidate the name
// once its last request is released. Either way a request never reaches
// an agent its own metadata does not describe, and nothing outlives it.
//
// releaseXferReq on an active transfer asks the backend to abort and returns
// NIXL_ERR_REPOST_ACTIVE when it cannot; loopback and tcp never abort a write
// already under way (bytes may be on the wire), so Release of an in-flight
// request is always ErrRepostActive and the handle stays valid.
//
// # How errors collapse
//
// Every error wraps one sentinel named after a nixl_status_t value
// (errors.go). NIXL's C API folds them further: nixl_capi maps every
// nixl_status_t other than NIXL_SUCCESS and NIXL_IN_PROG to
// NIXL_CAPI_ERROR_BACKEND, keeping only its own argument checks
// (INVALID_PARAM) and a not-loaded-metadata NOT_FOUND apart. So callers
// decide ONLY on:
//
//  1. nil versus non-nil error, and StatusDone versus StatusInProgress;
//  2. WHICH CALL failed: an error from LoadRemoteMetadata or CreateWrite
//     means nothing was sent and no request exists; an error from Post,
//     Status or Wait after Post means the outcome is uncertain: none, some
//     or all bytes may have landed (CONTRACT ), whatever the
//     sentinel; an error from Release or Deregister means the handle or the
//     registration is kept and still valid.
//
// The finer sentinels are for logs, metrics and tests. In particular a write
// the target refuses (unknown remote key, range outside the region, wrong
// agent) reaches the initiator as plain ErrBackend, and a broken connection
// as ErrRemoteDisconnect; only the target learns the reason
// (Options.OnInbound). A producer therefore never maps a post-Post failure
// to INVALID_ARGUMENT, and validates (ParseMetadata, CheckRemote)
// before it commits to a transfer.
//
// # Backends
//
// loopback copies inside Post (StatusDone) from the source into the target
// agent's registered memory, after the target's key and bounds checks (a
// READ copies the other way, after the same checks).
//
// tcp: the target listens on a port (TCPOptions.ListenAddress); its metadata
// carries its name and "host:port". A write takes an idle connection to the
// peer or dials one, sends a header (target name, initiator name, per
// segment: remote key, address, length), waits for the target to accept it
// (key and bounds checked against its table, regions marked in flight),
// streams the bytes straight from registered memory into the target's
// registered memory, and completes on the target's one-byte
// acknowledgement, which the target sends after every byte is in its memory
// and its regions are no longer marked. After a clean write the connection
// is kept (at most 4 per peer, by name and address, and 64 in all, the
// longest-kept closed first) so the next write skips the dial and TCP's
// warm-up. A kept connection the peer has meanwhile closed fails before the
// target's acceptance, when no body byte has been sent, so nothing can have
// landed and the write is retried once on a fresh connection: a stale
// connection never turns a clean write into an uncertain one. A refusal, or
// a broken or silent connection after acceptance (TCPOptions.WriteTimeout on
// the initiator, TCPOptions.IdleTimeout on the target), fails the write. A
// READ uses the same connections and the same header under the magic
// "BXR1": after accepting it (key and bounds checked, regions marked in
// flight) the target streams the ranges from its registered memory, ends
// its mark, and sends one end byte; the initiator reads the bytes straight
// into its registered destinations and completes on that byte. The
// network and the clock are injected (Network, Clock) so the simulator can
// run the same code over a simulated network in virtual time.
//
// manual (ManualNetwork, NewManual; manual.go) is loopback for a
// single-goroutine simulator: Post has the target accept (or refuse) the
// transfer and returns StatusInProgress without a goroutine; the network's
// owner later Delivers it (the bytes land, faults applied), Cuts it, and
// Completes it (Status answers). An accepted transfer holds the target's
// regions in flight until it is delivered or cut, so Revoke waits for it.
//
// cuda_ipc (cuda_ipc.go) is no Agent: the producer lends one device
// allocation per entry by its CUDA IPC handle (IPCLoan, in
// TransferEncoderCacheResponse.tensor_layout) and the consumer copies out
// of it device-to-device through an IPCDevice (OpenCUDADevice; FakeIPC in
// tests), then gives the loan back.
//
// # Faults (tests)
//
// Options.Faults makes a write fail after some bytes landed (FaultFailAfter),
// hang in flight until the test cancels or resumes it (FaultHang), or lose
// the acknowledgement after all bytes landed (FaultLoseAck, the uncertain
// outcome of Q-1).
package xfer
