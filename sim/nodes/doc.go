// Package nodes is the behaviour of the simulator's nodes, as functions
// over *world.World that the world runs through the handler table and
// hooks of a world.Behaviour (Behaviour; package sim installs it). The
// world holds the nodes' state and primitives (cutting a link is
// World.Partition); what a node does with them lives here.
//
// So far the network partition fault (partition.go: when a consumer's link
// to E is cut, and which messages that drops), the producer's crash and
// restart (producer_crash.go), a consumer's (consumer_crash.go), the P
// and D nodes of E+P+D (prefill_decode.go), the producer's collector,
// Shutdown and drain ticks (producer_life.go), E's request handling
// (producer.go: publishes, releases, removals, the transfer backend's
// producer side, a wrong-role consume; E's look at claimed entries and its
// stop), the PD consumers' request
// handling (consumer.go: a consume's admission, the shared-directory
// claim, the transfer receive and how it ends, a client's cancel), the
// slow fsync of the shared-directory publish (fsync.go) and the clients'
// starts, cancels and handling of the answers to their publish, consume
// and release calls and of their calls' deadlines (client.go), the nodes'
// use of the transfer backend's xfer agents (transport.go: E's source
// registrations, its WRITEs posted and completed, the network's delivery,
// a crashed E's agent closed) and of their quarantines (quarantine.go: a
// consumer's control connections and the carrier it retires, E's source
// quarantine until its WRITE ends), their admission of a presented
// reference and the record of what it got (reference.go), and their media
// behaviour (media.go: E's L-3 decision and content hashes, a consumer's
// prefill and prefix cache) have moved here. The nodes' state and the
// primitives these call (the clients' calls, the transfer network, the
// shared disk and its Claim, Write and Remove, how a reference looks in
// each form, the media pool, the Q-6 proof's end of a consumer's
// quarantine, checked at every step) are still sim/world's (issue #16
// item 4).
package nodes
