// Package world is the deterministic world of baton's simulator: its state
// and event loop (world.go, queue.go, events.go), the seeded PRNG streams,
// faults, ledger, history and trace, and most of the nodes' behaviour
// (producer E's and the PD consumers' request handling, the clients, the
// network and the disk; the partition fault's, the crashes and restarts,
// the P and D nodes' of E+P+D and E's collector, Shutdown and drain ticks
// are sim/nodes'). Package sim re-exports
// its public API; sim's package documentation describes the simulator.
//
// The loop runs the checkers and the node behaviour it is given and cannot
// import them: packages sim/checks and sim/nodes import this one, and
// package sim installs theirs with SetChecks and SetBehaviour before any
// world is built (Checks, Checker, Behaviour). The state the
// checkers carry between steps lives here (judged.go), and so do the few
// checks a node makes at the moment something happens (observe.go).
package world
