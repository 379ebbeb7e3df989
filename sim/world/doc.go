// Package world is the deterministic world of baton's simulator: its state
// and event loop (world.go, queue.go, events.go), the seeded PRNG streams,
// faults, ledger, history and trace, the state of every node (producer.go's
// producerNode, consumer.go's consumerNode, the clients, the transport,
// the shared disk) and the behaviour still here: the PD consumers' request
// handling, the clients' starts and cancels, the network and the disk.
// Producer E's request handling, the partition fault, the crashes and
// restarts, the P and D nodes of E+P+D, E's collector, Shutdown and drain
// ticks, the slow fsync and the clients' answer handling are sim/nodes'.
// Package sim re-exports
// its public API; sim's package documentation describes the simulator.
//
// The loop runs the checkers and the node behaviour it is given and cannot
// import them: packages sim/checks and sim/nodes import this one, and
// package sim installs theirs with SetChecks and SetBehaviour before any
// world is built (Checks, Checker, Behaviour). The state the
// checkers carry between steps lives here (judged.go), and so do the few
// checks a node makes at the moment something happens (observe.go).
package world
