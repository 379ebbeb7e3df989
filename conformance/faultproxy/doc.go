// Package faultproxy is baton's black-box gRPC fault proxy: a transparent
// man-in-the-middle that a producer advertises as its control address
// (`baton serve --advertise-control`), so that the Faults level can make a
// consumer's TransferEncoderCache (or any other) call fail in the ways a real
// network does and check what the consumer decides (CONTRACT Q-1..Q-5, C-4).
//
// # Passthrough
//
// The proxy serves every method through a grpc.UnknownServiceHandler and a
// pass-through codec: request and reply frames travel as opaque bytes (no
// proto decoding), so any service, unary or streaming, goes through unchanged.
// Incoming metadata is forwarded upstream (minus transport-reserved keys:
// pseudo-headers, "grpc-*", "content-type", "user-agent", "te"); the
// upstream's headers, trailers (custom ones such as
// "baton-transfer-rejected: before-write", CONTRACT Q-2, included) and final
// status (code, message, details) come back unchanged. The caller's deadline
// travels upstream as grpc-timeout; its content-subtype is kept.
//
// # Faults
//
// A Plan maps a full method name ("/openengine.v1.Control/TransferEncoderCache")
// to a Rule that picks one Step (a Fault plus, for FaultDelay, a delay) for
// each call, by the call's 0-based index among the calls of that method since
// the plan was set: a fixed Sequence first, then seeded random Chances. The
// decision is a pure function of (Plan.Seed, method, index), see Plan.Decide,
// so the same seed gives the same decisions whatever the interleaving of
// methods. Every decision and its upstream outcome is recorded (Proxy.Calls).
//
// Fault semantics, as the caller sees them:
//
//   - FaultNone: transparent passthrough; the caller's cancellation reaches
//     the upstream.
//   - FaultDropRequest: never forwarded; the proxy holds the call until the
//     caller's deadline passes (DEADLINE_EXCEEDED) or it cancels.
//   - FaultDropReply: forwarded; the upstream runs to completion (its outcome
//     is recorded), then the reply is discarded and the call held until the
//     caller's deadline passes: the "lost reply after the request took
//     effect" of CONTRACT Q-1.
//   - FaultDelay: forwarded; the reply (headers, messages, trailers, status)
//     is held for Step.Delay after the upstream starts answering, then
//     delivered if the caller still waits.
//   - FaultCutConnection: forwarded; once the upstream completed, the proxy
//     closes the caller's TCP connection, so the caller sees UNAVAILABLE.
//     Every other call multiplexed on that connection fails with it.
//   - FaultUnavailable: never forwarded; answered at once with UNAVAILABLE.
//
// For the faults that act on the reply (DropReply, Delay, CutConnection) the
// upstream call is detached from the caller's cancellation but keeps its
// deadline, so a caller that gives up does not undo the request upstream,
// just as on a real network where the reply, not the request, is lost.
//
// The proxy imports only grpc-go, protobuf and the standard library: it knows
// nothing of the engine, which is what lets it test any implementation.
package faultproxy
