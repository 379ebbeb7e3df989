// Package world is the deterministic world of baton's simulator: its state
// and event loop (world.go, queue.go, events.go), the seeded PRNG streams,
// faults, ledger, history and trace, and the nodes' behaviour (producer E,
// the PD/P/D consumers, clients, network, disk and crashes). Package sim
// re-exports its public API; sim's package documentation describes the
// simulator.
//
// The loop runs the checkers it is given and cannot import them: package
// sim/checks imports this one, and package sim installs its lists with
// SetChecks before any world is built (Checks, Checker). The state the
// checkers carry between steps lives here (judged.go), and so do the few
// checks a node makes at the moment something happens (observe.go).
package world
