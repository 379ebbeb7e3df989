// Package nodes is the behaviour of the simulator's nodes, as functions
// over *world.World that the world runs through the handler table and
// hooks of a world.Behaviour (Behaviour; package sim installs it). The
// world holds the nodes' state and primitives (cutting a link is
// World.Partition); what a node does with them lives here.
//
// So far only the network partition fault has moved here (partition.go:
// when a consumer's link to E is cut, and which messages that drops); the
// producer, the consumers, the clients, the rest of the network, the disk
// and the crashes are still sim/world's (issue #16 item 4).
package nodes
