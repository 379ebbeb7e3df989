package world

// Behaviour is the node behaviour a world runs that package sim/nodes
// holds (it imports this package, so the world cannot import it): the
// handlers of the event kinds it owns and the hooks the world's send and
// arrival paths call. Package sim installs nodes.Behaviour() with
// SetBehaviour.
type Behaviour struct {
	// Handlers handle the events of the kinds they are set for, instead
	// of the world's own handlers (after the arrival hooks, for the kinds
	// below the node kinds); every node event kind must have one.
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

	// The P and D nodes of E+P+D (sim/nodes' prefill_decode.go), called
	// where the world's own nodes meet them: StartEPPD builds the D nodes
	// at the start; PrefillReady runs as P sends a consume answer OK (P
	// holds a KV session now); DecodeAnswer takes client c's consume
	// answer res in E+P+D and reports whether it handled it (the client
	// decodes next); Decode sends c's decode request with preparation kind
	// to D node d (the scenario command decode); DrainEPPD begins P's and
	// D's drain at the shutdown phase; DrainKVSessions releases what P
	// node p still holds once its requests ended.
	StartEPPD       func(w *World)
	PrefillReady    func(w *World, ev *Event)
	DecodeAnswer    func(w *World, c *Client, res int64) bool
	Decode          func(w *World, c *Client, cd *ClientDecode, kind PrepKind, d int)
	DrainEPPD       func(w *World)
	DrainKVSessions func(w *World, p int)

	// ConsumerCancelled is consumer c's handling of a cancel of client h's
	// call rpc (sim/nodes' consumer.go; C-4), which the Driver's cancel
	// fault calls too.
	ConsumerCancelled func(w *World, c *ConsumerNode, h int32, rpc int64)
}

// installedBehaviour is the behaviour a world built now gets.
var installedBehaviour *Behaviour

// SetBehaviour sets the node behaviour every world built afterwards runs.
// Package sim calls it once, at its initialization, with nodes.Behaviour();
// a world built before any call panics.
func SetBehaviour(b *Behaviour) { installedBehaviour = b }

// RunNow runs ev's handler from the installed behaviour at once, outside
// the queue: a crash or restart a script, the driver or a claim decides.
func (w *World) RunNow(ev Event) { w.behaviour.Handlers[ev.Kind](w, ev) }
