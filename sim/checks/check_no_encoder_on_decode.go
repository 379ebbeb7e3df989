package checks

import "github.com/baton-dev/baton/sim/world"

// checkNoEncoderOnDecode: N-2. KV-session decode requests never touch the
// encoder or the encoder cache: every step a D node takes (a decode
// request arriving, its fetch's answer, its deadline) leaves E's table,
// its counters, the shared directory, the transfer sources, the entries'
// ground truth and every consumer's receives as they were, and no decode
// request carries an encoder reference. onDecoder records the first
// violation; this checker reports it.
func checkNoEncoderOnDecode(w *world.World) error { return asFailure(w.Nodes.N2) }
