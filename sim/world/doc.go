// Package world is the deterministic world of baton's simulator: its state
// and event loop (world.go, queue.go, events.go), the seeded PRNG streams,
// faults, ledger, history and trace, the state of every node (producer.go's
// producerNode, consumer.go's ConsumerNode, the clients, the transfer
// network, the shared disk) and the primitives the nodes act through: the
// clients' calls, the network and the transfer network with its agents,
// the disk, how a reference looks in each form, the media pool and what
// was published and answered. The nodes' event handlers are
// sim/nodes': producer E's and the PD consumers' request handling, the
// clients' starts, cancels and answers, the partition fault, the crashes
// and restarts, the P and D nodes of E+P+D, E's collector, Shutdown and
// drain ticks and the slow fsync, and so is what the nodes do with their
// xfer agents and quarantines, their admission of references and their
// media behaviour. The world's own loop keeps only the end of
// the safety phase (heal), the end checks and, after each step, the end of
// the consumer quarantines whose Q-6 proof came. Package sim re-exports
// its public API; sim's package documentation describes the simulator.
//
// The loop runs the checkers and the node behaviour it is given and cannot
// import them: packages sim/checks and sim/nodes import this one, and
// package sim installs theirs with SetChecks and SetBehaviour before any
// world is built (Checks, Checker, Behaviour). The state the
// checkers carry between steps lives here (judged.go), and so do the few
// checks a node makes at the moment something happens (observe.go).
package world
