// Package world is the deterministic world of baton's simulator: its state
// and event loop (world.go, queue.go, events.go), the seeded PRNG streams,
// faults, ledger, history and trace, the nodes' behaviour (producer E, the
// PD/P/D consumers, clients, network, disk and crashes) and the checkers
// (check_*.go). Package sim re-exports its public API; sim's package
// documentation describes the simulator.
package world
