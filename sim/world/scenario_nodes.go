package world

import (
	"fmt"
	"strings"
)

// partition is the scenario command `partition pd=N ms=MS`: consumer pd's
// link to E is cut for MS virtual ms from now (partition.go).
func (sc *Scenario) partition(b *strings.Builder, args map[string]string, num func(string, int64) (int64, error), consumer func() (int, error)) error {
	pd, err := consumer()
	if err != nil {
		return err
	}
	ms, err := num("ms", -1)
	if err != nil || ms < 1 {
		return fmt.Errorf("partition needs ms=N (N >= 1)")
	}
	sc.W.note = ""
	sc.W.Partition(pd, ms)
	fmt.Fprintf(b, "%s\n", sc.W.note)
	return nil
}

// scenarioNodeArgs reads the scenario's `new` arguments of the nodes:
// topology=e+pd|e+p+d, decoders=N (default 1 in E+P+D), kv-ttl=MS
// (default 60000) and decode-timeout=MS (default 500).
func scenarioNodeArgs(s *Settings, args map[string]string, num func(string, int64) (int64, error)) error {
	t, ok := args["topology"]
	if !ok {
		return nil
	}
	s.Topology = t
	d, err := num("decoders", 1)
	if err != nil {
		return err
	}
	s.Decoders = int(d)
	if s.KVSessionTTLMs, err = num("kv-ttl", 60000); err != nil {
		return err
	}
	s.DecodeTimeoutMs, err = num("decode-timeout", 500)
	return err
}

// scriptNodes makes a scenario's clients wait for `decode` after their
// PrefillReady (scenario.go's newWorld).
func (w *World) scriptNodes() { w.Nodes.Scripted = true }

// describeNodes prints the KV sessions of an E+P+D scenario (nothing otherwise).
func (sc *Scenario) describeNodes(b *strings.Builder) {
	w := sc.W
	if !w.Set.eppd() {
		return
	}
	for _, s := range w.Nodes.Sessions {
		state := KvStateNames[s.State]
		if s.State == KvLive && !s.Live(w) {
			state = "gone with its P process"
		}
		fmt.Fprintf(b, "KV session %s on P%d (entry %s): %s; decoded by D%v\n", Short(s.Id), s.P, Short(s.Entry), state, s.DecodedBy)
	}
}

// decode is the scenario command `decode h=N [d=N] [prep=ok|missing|bad-hash]`:
// client h sends a decode request for the KV session of its PrefillReady
// to D node d (default 0), with P's decode preparation, none, or one with
// a malformed content hash.
func (sc *Scenario) decode(b *strings.Builder, args map[string]string, num func(string, int64) (int64, error), clientArg func() (*Client, error)) error {
	w := sc.W
	if !w.Set.eppd() {
		return fmt.Errorf("decode needs topology=e+p+d")
	}
	c, err := clientArg()
	if err != nil {
		return err
	}
	cd := w.Nodes.Decodes[c.Idx]
	if cd == nil {
		return fmt.Errorf("client %d has no PrefillReady (claim on a P first)", c.Idx)
	}
	d, err := num("d", 0)
	if err != nil || d < 0 || int(d) >= len(w.Nodes.Decoders) {
		return fmt.Errorf("d=%s: no such decode node", args["d"])
	}
	kinds := map[string]PrepKind{"": PrepOK, "ok": PrepOK, "missing": PrepMissing, "bad-hash": PrepBadHash}
	kind, ok := kinds[args["prep"]]
	if !ok {
		return fmt.Errorf("prep=%s: want ok, missing or bad-hash", args["prep"])
	}
	c.Done = false
	w.behaviour.Decode(w, c, cd, kind, int(d))
	fmt.Fprintf(b, "client %d: decode of KV session %s sent to D%d (preparation %s)\n", c.Idx, Short(cd.Session.Id), d, PrepNames[kind])
	return nil
}

// nodeKindByName is kindByName for the node event kinds.
func nodeKindByName(name string) (eventKind, bool) {
	for k := evNodeFirst; k < evNodeEnd; k++ {
		if nodeEventName(k) == name {
			return k, true
		}
	}
	return 0, false
}
