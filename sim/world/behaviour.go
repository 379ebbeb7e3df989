package world

// Behaviour is the node behaviour a world runs that package sim/nodes
// holds (it imports this package, so the world cannot import it): the
// handlers of the event kinds it owns and the hooks the world's send and
// arrival paths call. Package sim installs nodes.Behaviour() with
// SetBehaviour.
type Behaviour struct {
	// Handlers handle the node events of the kinds they are set for
	// (those >= the first node event kind); the others are the world's.
	Handlers [256]func(w *World, ev Event)
	// DropsSend runs before a message is sent while a link may be cut;
	// true means it is lost (a partition).
	DropsSend func(w *World, ev *Event) bool
	// DropsArrival runs before a message's handler while a link is cut;
	// true means it was consumed there (lost, or a WRITE failed instead
	// of landing).
	DropsArrival func(w *World, ev Event) bool
	// StaleProducerEvent runs before an event's handler while E is down or
	// has restarted; true means the event belonged to a dead producer
	// process and was dropped.
	StaleProducerEvent func(w *World, ev Event) bool
}

// installedBehaviour is the behaviour a world built now gets.
var installedBehaviour *Behaviour

// SetBehaviour sets the node behaviour every world built afterwards runs.
// Package sim calls it once, at its initialization, with nodes.Behaviour();
// a world built before any call panics.
func SetBehaviour(b *Behaviour) { installedBehaviour = b }
