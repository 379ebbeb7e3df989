// Package executor is the reference engine's step scheduler for the
// in-engine encoder -> decoder handoff (CONTRACT section 2, "Inside one
// engine"; rules C-1..C-3, C-6, R-1, R-2).
//
// Like engine/handoff it is pure: plain structs, no goroutines, no clock, no
// I/O, no randomness. The engine's driver (engine/server, executor.go) and
// the simulator (sim/executorworld/world.go) feed it events and carry out the actions it
// returns, so what the simulator finds is true of the engine.
//
// # Requests
//
// A request with encoder inputs goes
//
//	ENCODER_INIT -> PENDING (its batch's encoder step runs)
//	  -> PUBLISHED (a view of the batch's packed output, ready event fired)
//	  -> CONTEXT (the first context step consumes the view once and computes
//	     the cross-attention KV once for this admission, R-1)
//	  -> GENERATION -> terminal (finished, cancelled or failed).
//
// Preempt sends a request in GENERATION back to ENCODER_INIT as a new
// admission: its encoder output was dropped after consumption, so the
// recompute runs the encoder again. Pause-and-resume keeps the token
// ids generated so far and re-absorbs them; a full reset regenerates them.
// The core records which; the driver does the decoding.
//
// # Batches and packed storage
//
// Schedule takes up to Config.MaxBatchRequests requests in ENCODER_INIT, in
// submission order, into one batch (RunEncoder). Its output is one packed
// storage; EncoderDone scatters a view to every member still PENDING, and
// advances the item offset past EVERY original member, cancelled or not, so
// a late completion never shifts a sibling's slice (C-2). The storage is
// freed (FreeStorage) when its last view goes: consumed, released, or its
// request ended (C-3). EncoderFailed ends every pending member with one
// terminal failure (C-6). Cancel before Submit allocates nothing (C-1); a
// cancelled request in PENDING leaves its batch running and is ignored by
// the completion (C-2).
//
// # Driver loop
//
//	ex := executor.New(cfg)
//	ex.Submit(id, items, now)                  // a request arrives
//	for _, a := range ex.Schedule() { ... }    // RunEncoder{Batch, Members, Items}
//	actions := ex.EncoderDone(batch)           // Ready{Request, View}..., FreeStorage
//	view, actions, err := ex.Consume(id)       // first context step
//	actions = ex.Release(id)                   // idempotent: drops the view once
//	actions = ex.Finish(id) / ex.Cancel(id)    // terminal; drops any view (C-3)
//
// Actions must be carried out in the order returned. FreeStorage comes
// AFTER the last view of the storage was dropped, never before.
//
// # Invariants (CheckInvariants)
//
//  1. A storage's live view count equals the number of requests whose view
//     points at it; a freed storage has no views.
//  2. Only PUBLISHED requests hold views (consumption drops it).
//  3. A terminal request holds no view and is in no queue.
//  4. Each admission consumed its output at most once.
//  5. A pending batch's members were all PENDING when it formed; members
//     that left since are terminal.
package executor
