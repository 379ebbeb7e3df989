// Package handoff is THE lifecycle core of the encoder handoff: the
// producer's table of published outputs (ProducerTable), the consumer's
// receives (ConsumerReceives) and the engine's health (Health), plus the
// reference format (Reference) and the one table mapping rejections to rule
// IDs and gRPC codes (Classify). It is pure: standard library only, no
// goroutines, no clock (time arrives as arguments in ms), no I/O and no
// randomness of its own, so the reference engine and the simulator drive the
// same code (ARCHITECTURE.md "The core").
//
// The driver loop of a producer (engine/server is the real one):
//
//	id := newRandomID()                      // 128 random bits (SU-5)
//	err := table.Reserve(id, payloadBytes)   // L-5 before anything is written
//	write storage under a temp name, fsync, rename into place
//	table.CommitPublish(id, nowMs+table.TTL(ttlMs))
//	send EncoderReady; on failure: Release (C-7)
//	...
//	switch table.Release(id) {              // Abort(encoder_cache), SU-3
//	case ReleaseRemove:
//	    won, err := storage.Remove(id)       // races a consumer's claim by rename
//	    answer := table.RemovalDone(id, won) // ABORTED or ALREADY_FINISHED
//	case ReleaseWait:                        // another removal of id is in flight
//	    wait until it ended (RemovalDone or RemovalFailed), then Release(id) again
//	}
//	for _, id := range table.Expire(nowMs) { remove; RemovalDone }  // X-2
//	for _, id := range table.Drain() { remove; RemovalDone }        // S-2
//
// Where a decision has effects outside the tables, the core returns it as
// data and the driver carries it out (decide.go): the end of a consumer's
// transfer (ConsumerReceives.EndTransfer, EndCopy: release or quarantine
// the buffers, the Health change, the reply; ), a producer's
// transfer that failed past the claim (ProducerTable.FailTransfer: free or
// quarantine the source, the Health change, the answer; ), and a
// failed cleanup (Health.CleanupFailed, X-1). The deliberately broken
// decisions the conformance mutants and the simulator's mutants make are
// switches of Mutants, so both run the same broken decision:
//
//	d, err := receives.EndTransfer(TransferEnded{ReceiveID: id, StatusOK: ..., BeforeWrite: ...}, mutants)
//	if err != nil { a driver bug: log it (engine) or panic (simulator) }
//	switch d.Buffers {
//	case QuarantineBuffers: keep and revoke the buffers, health.Fail(d.Health...) // BEFORE replying
//	case ReleaseBuffers:    deregister and free them
//	}
//	answer according to d.Reply
//
// Invariants (CheckInvariants, called by tests and after every simulator step):
//
//  1. A published output leaves the table exactly once: Published ==
//     Consumed + Released + Expired + live entries (SU-1).
//  2. Held bytes equal the sum of live entries and never pass the quota (L-5);
//     the same holds for the consumer's in-flight bytes.
//  3. No terminal entry stays in the table.
//  4. Quarantine shrinks only by EndQuarantine, once the backend proved no
//     write can land (Q-6, EndsOnProof); while non-zero, no new receive is
//     admitted.
package handoff
