// Package sim is baton's deterministic, fault-injecting simulator of the
// encoder -> consumer handoff (ARCHITECTURE.md "The simulator is VOPR-shaped").
//
// One seed decides everything: it seeds one PCG generator per subsystem
// (settings, workload, entry ids, network, faults, disk, processes), so a
// run's settings, its interleaving and every fault are a function of the seed
// alone. Time is a virtual clock in ms ticks; the world is an event queue
// ordered by (tick, sequence) and stepped in one goroutine.
//
// The world holds one producer E (a handoff.ProducerTable, a handoff.Health
// and a store: the shared directory or sources registered with its xfer
// agent), 1..3 PD consumers (handoff.ConsumerReceives, handoff.Health,
// an xfer agent and a pool of receive buffers) and one client per handoff that
// publishes, consumes, replays, releases (once or twice), cancels and shuts
// the producer down. The nodes drive the SAME lifecycle core the reference
// engine drives, in the same order: Reserve -> write -> CommitPublish ->
// send; Release -> remove -> RemovalDone; Expire/Drain -> remove ->
// RemovalDone; ClaimForTransfer -> WRITE -> TransferDone | FailTransfer;
// Preflight -> Registered -> Requested -> EndTransfer. Where the core
// decides (EndTransfer, FailTransfer, CleanupFailed, with the broken
// decisions as handoff.Mutants switches), both drivers only carry the
// decision out.
//
// A client holds the reference its publish returned (its form: sealed);
// a few clients first probe with an altered copy, as the conformance
// harness does: a forged tag (SU-5), padded past 64 KiB (L-1), relabelled
// to an unlisted backend (N-1), or the consume sent to E (L-4). The core
// decides a presented reference in the contract's precedence
// (handoff.AdmitConsume on a consumer, handoff.AdmitTransfer on the
// producer, the functions the engine calls too), with
// handoff.Reference.Verify for any tag that is not the sealed one.
//
// The shared directory is not a model: the producer and the consumers run
// the real engine/cache/shareddir code (StartProducer at each start,
// Dir.Write, Claim, Dir.Remove, Dir.Exists, Dir.Collect, Close) over sim/simfs, an in-memory,
// deterministic disk with one view per process (a crash frees its flock),
// atomic one-winner renames and Sync/SyncDir durability (shared_disk.go).
// The world injects its faults into those real calls through simfs's hook
// (ENOSPC on the entry's write, EIO on a release's rename, a crash inside
// Write's fsync or inside Claim after its rename, a file vanishing), and
// the hook may land E's pending removal of an entry between a consumer
// Claim's open and its rename. So SU-1's claim-by-rename race is checked on
// the engine's code; TestSimFindsPlantedClaimBug plants a bug in Claim
// itself (shareddir.PlantClaimBugForTest) and the simulator finds it.
//
// Nor is the transfer backend (transport.go): E and each consumer
// incarnation run a real engine/xfer agent on an xfer.ManualNetwork, whose
// transfers move only when the world steps them. E registers each source,
// validates the consumer's agent metadata and descriptors
// (xfer.ParseMetadata, xfer.CheckRemote) before its claim, then
// CreateWriteTo, Post; at the ticks the world draws the network Delivers
// the WRITE into the consumer's registered buffer (or Cuts it: a
// partition) and Completes it, and E reads Status, Releases the request and
// Deregisters the source; after a failure past the claim the core
// (handoff.FailTransfer) frees it when the WRITE request has ended, or
// quarantines it until it ends (the producer's deadline passed first;
// A consumer registers each receive buffer, Deregisters it on a
// known outcome and Revokes it on an uncertain one: a WRITE its
// agent accepted before still lands, later ones are refused. Quarantines
// end by proof, as in the engine (quarantine.go, Q-6): a consumer's once
// the revocation's done channel is closed and the E process its request
// went to is gone (crashed or stopped: the control connection that
// carried the transfer closed; looked at after every step, without
// blocking), E's source once its WRITE request ended and was released;
// the core decides (handoff.EndsOnProof, Health.QuarantineEnded), the
// buffer or source is freed and Health recovers once nothing is
// quarantined. check_proof.go checks that a quarantine ends only with its
// proof, and that one whose proof came has ended by the end of a
// converged run.
// The landing check reads the bytes xfer put in the buffer; crashes Close
// the agents, so a WRITE to a dead incarnation fails.
//
// Faults are BUGGIFY-style: each Site is enabled for a run with probability
// 0.25 and then fires at each hit with probability 0.25. They stay within what
// the contract must survive (lost, delayed, duplicated messages; a reply lost
// after its request took effect; slow or failing WRITEs; encoder failure;
// ENOSPC; vanishing files; slow or failing removals; consumer crash and
// restart; late cancellation; Shutdown at a random time; a transfer reply
// replaced by a plain INVALID_ARGUMENT without the before-write trailer).
//
// Drawn from a stream of their own (nodes_settings.go), so a seed's other
// draws stay as they were: a network partition that cuts a consumer off
// from E for a window (partition.go), a slow fsync on the shared-directory
// publish path (sim/nodes/fsync.go), a producer crash at a random time or in such a
// write before its fsync, with a restart under a new instance id and
// recovery of what the dead instance left (producer_crash.go), and the
// E+P+D topology for
// one seed in four: the consumers are P nodes whose consume answer is
// PrefillReady with a KV session, and the client then decodes on a D node
// that never touches the encoder cache (prefill_decode.go; checkers
// check_kv_sessions.go, check_decode_preparation.go,
// check_no_encoder_on_decode.go, check_crash_lost.go).
//
// A run has two phases: safety (faults on, clients start) and liveness
// (faults healed): every handoff must end consumed exactly once, released,
// expired, quarantined or cancelled, then every node drains within the tick
// budget. Checkers (one per check_*.go file) run after every step; the
// core's CheckInvariants too; the answer checks (check_answers.go) judge
// each logged decision once: what a rejected or unsealed reference took
// (SU-4, SU-5), how a receive ended (Q-1, Q-2, C-4), the producer's answer
// after its claim, what an unpublished publish still holds (C-6),
// probe answers, fresh entry ids (SU-6) and expiry collection. At the end, check_history.go checks the
// client-visible publish, consume and release operations (call and return
// ticks, unknown outcomes allowed) for linearizability per reference with
// porcupine (history.go); a failing history can be written as porcupine's
// HTML visualization (WriteHistory).
//
// Media (media.go): each publish carries items from a small fixed pool of
// tiny images (pixel-equal twins in other encodings or bit depths, alpha
// and alpha-0 variants, shared uuids, omitted hashes, rare video or audio);
// the producer hashes them with the engine's contenthash.ContentHash, the consumer
// answers from a prefix cache keyed by lm.DefaultPrefixKey, and the answer
// is a stand-in function of the pixels and the prompt. Checkers: L-3 at
// admission, H-4 and H-1 at publication, B-2 per answer, H-2 and H-5 at the
// end of a converged run.
//
// Verdicts and exit codes: Passed (0), Correctness (1), Liveness (2),
// Crash (a panic inside the world; `baton sim` exits 5 on it, 3 being its
// bad-flags code). Every run can write a JSONL trace whose
// first line holds the seed and the settings; Replay re-runs it.
//
// Mutants: Mutant names a broken decision, injected through a hook in this
// package's driver or, for a decision the core makes, through the core's
// handoff.Mutants switch that the real engine's test hooks set too
// (Mutant.decisions); tests assert the checkers catch each.
//
// Sweeps (explore.go, issue #17): Sweep runs a seed range on goroutines in
// memory independent of its length, a Shard's contiguous block of it when
// the range is split over machines (shard.go), counts its coverage (every
// fault site by lifecycle point, and the sometimes states a long sweep must
// reach: coverage.go), runs one passing seed in 100 twice comparing the
// traces byte for byte, and hands each failing run to the seed store
// (store.go), which keeps per commit failing seeds before passing ones and
// faster-failing before slower.
//
// Two hand-driven uses of the same world: Scenario runs the datadriven
// lifecycle scripts of testdata/scenarios (publish, claim, deliver,
// drop-reply, align, crash, cancel, stabilize, expect; scenario_test.go,
// -rewrite regenerates them), and Driver answers one client call at a time
// for conformance/target/simtarget, the simulator behind the Target
// interface that conformance/props runs its property against.
//
// Layout: this package is the simulator's public API and its wiring; the
// world itself (its state and event loop, and the primitives the nodes
// act through) is package sim/world, the checkers are package sim/checks and
// the node behaviour that left the world is package sim/nodes (the
// partition fault, the producer's and the consumers' crash and restart,
// the P and D nodes of E+P+D, the producer's collector, Shutdown and drain
// ticks, E's and the PD consumers' request handling and the clients'
// starts, cancels and answers); sim installs both in every world
// (wire.go).
// Every exported name here is an alias of or a thin wrapper over world's
// (api.go). The check_*.go files named above are sim/checks';
// producer_crash.go is sim/nodes', partition.go, prefill_decode.go,
// transport.go, quarantine.go and media.go both packages' (sim/nodes: the
// behaviour; sim/world: the state and the primitives the nodes act
// through); the other files are sim/world's.
package sim
