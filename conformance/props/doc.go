// Package props holds baton's rapid state-machine properties of the encoder
// handoff, written against conformance/target.Target only (ARCHITECTURE.md:
// props never imports an engine or the simulator), so the same property
// runs against the in-process reference engine, a gRPC target (`baton fuzz
// --config target.yaml`) and any other adapter.
//
// One check is one sequence of actions, drawn and shrunk by rapid
// (pgregory.net/rapid):
//
//	publish        Generate(encoder.publish, one fixture image) on the producer
//	consume        Generate(encoder.consume=ref) of a live reference on the consumer
//	replay         consume of a spent (consumed or released) reference: SU-2
//	release        Abort(encoder_cache=ref): ABORTED the first time, then ALREADY_FINISHED (SU-3)
//	releaseTwice   two Aborts of one reference in a row (SU-3)
//	malformed      a corrupted copy of a reference, consumed and released: SU-4,
//	               L-1; the original still works afterwards
//	cancel         a publish or consume cancelled before submission (C-1) or in
//	               flight (an uncertain outcome the model allows both ways)
//	shutdown       Shutdown of the producer or the consumer (S-1, S-2), only when
//	               Config.Shutdown is set (each check then needs a fresh target)
//
// A model (model.go) holds the expected table: each reference's state
// (live, consumed, released, or unknown after an uncertain outcome), the
// answer each image gave, and which roles shut down. After every action
// the invariants run: Health READY, and, when the profile
// declares observables, the producer's encoder.exports.entries within what
// the model allows, no quarantine and no receive in flight on
// the consumer. At the end of a check every reference is released and the
// producer's table must return to where it started (nothing leaked).
//
// Failures name the rule and read like the suite's: `Consume(ref=3f2a..)
// = code OK, 12 tokens; want INVALID_ARGUMENT before any token (SU-2)`.
// rapid shrinks a failing sequence, writes a fail file under
// testdata/rapid/<test>/ and replays every kept fail file first; Run
// (outside `go test`) prints the command that reproduces a failure.
package props
