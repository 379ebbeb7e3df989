package checks

import (
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/nodes"
	"github.com/baton-dev/baton/sim/world"
)

// TestNodeCheckersCatch: each new checker fails on the state it rules out.
func TestNodeCheckersCatch(t *testing.T) {
	mk := func() *world.World {
		s := world.QuietSettings()
		s.Topology, s.Decoders, s.KVSessionTTLMs, s.DecodeTimeoutMs = world.TopologyEPPD, 1, 100, 100
		w := world.NewQuietWorld(1, s, world.Options{})
		w.StartNodes()
		return w
	}
	t.Run("attached twice", func(t *testing.T) {
		w := mk()
		s := &world.KvSession{Num: 1, Id: strings.Repeat("a", 32), State: world.KvFetched, Served: 1, DecodedBy: []int{0, 0}, Pinc: 1}
		w.Nodes.Touched = append(w.Nodes.Touched, s)
		if msg := errText(checkKVSessions(w)); !strings.Contains(msg, "attached more than once") {
			t.Errorf("checkKVSessions = %q", msg)
		}
	})
	t.Run("released after it was attached", func(t *testing.T) {
		w := mk()
		s := &world.KvSession{Num: 1, Id: strings.Repeat("f", 32), State: world.KvFetched, Served: 1, Aborted: 1, Pinc: 1}
		w.Nodes.Touched = append(w.Nodes.Touched, s)
		if msg := errText(checkKVSessions(w)); !strings.Contains(msg, "answered ABORTED") {
			t.Errorf("checkKVSessions = %q", msg)
		}
	})
	t.Run("leaked at the end", func(t *testing.T) {
		w := mk()
		w.Nodes.Sessions = append(w.Nodes.Sessions, &world.KvSession{Num: 1, Id: strings.Repeat("b", 32), State: world.KvLive, Pinc: w.Cons[0].Inc})
		if msg := errText(checkKVSessionsEnd(w)); !strings.Contains(msg, "leaked") {
			t.Errorf("checkKVSessionsEnd = %q", msg)
		}
	})
	t.Run("L-2 and H-3 ran", func(t *testing.T) {
		for kind, rule := range map[world.PrepKind]string{world.PrepMissing: "L-2", world.PrepBadHash: "H-3"} {
			w := mk()
			w.Nodes.Decided = append(w.Nodes.Decided, &world.DecodeReq{Num: 1, Kind: kind, Ran: true, SessionID: strings.Repeat("c", 32)})
			if msg := errText(checkDecodePreparation(w)); !strings.HasPrefix(msg, rule) {
				t.Errorf("checkDecodePreparation(%s) = %q, want %s", world.PrepNames[kind], msg, rule)
			}
		}
	})
	t.Run("D refuses with the core's rules", func(t *testing.T) {
		w := mk()
		s := &world.KvSession{Id: strings.Repeat("d", 32)}
		err := nodes.CheckDecodeRequest(w, &world.DecodeReq{Session: s, SessionID: s.Id, Prep: &world.DecodePrep{SessionID: s.Id, Hashes: []string{"XYZ"}}})
		if rule, code := handoff.Classify(err); rule != "H-3" || code != handoff.CodeInvalidArgument {
			t.Errorf("malformed hash: %v (%s, %d), want H-3 INVALID_ARGUMENT", err, rule, code)
		}
		err = nodes.CheckDecodeRequest(w, &world.DecodeReq{Session: s, SessionID: s.Id})
		if _, code := handoff.Classify(err); code != handoff.CodeInvalidArgument || !strings.Contains(err.Error(), "L-2") {
			t.Errorf("no preparation: %v, want L-2 INVALID_ARGUMENT", err)
		}
		if err := nodes.CheckDecodeRequest(w, &world.DecodeReq{Session: s, SessionID: s.Id, Prep: &world.DecodePrep{SessionID: s.Id, Hashes: []string{world.ContentHash(strings.Repeat("0", 32))}}}); err != nil {
			t.Errorf("P's own preparation refused: %v", err)
		}
	})
	t.Run("N-2 encoder touched", func(t *testing.T) {
		w := mk()
		before := w.EncoderSnapshot()
		world.Must(w.Sd.Disk.Proc("x").MkdirAll("/x", 0o700)) // any disk operation
		w.CheckEncoderUntouched(before, world.Event{Kind: world.EvKVFetchReply})
		if msg := errText(checkNoEncoderOnDecode(w)); !strings.Contains(msg, "changed the encoder side") {
			t.Errorf("checkNoEncoderOnDecode = %q", msg)
		}
	})
	t.Run("crashed instance served", func(t *testing.T) {
		w := mk()
		rec := w.Ledger.Add(strings.Repeat("e", 32), 0, 1)
		w.Nodes.Lost = append(w.Nodes.Lost, world.LostEntry{Rec: rec})
		rec.Consumptions = append(rec.Consumptions, "r1")
		if msg := errText(checkCrashLost(w)); !strings.Contains(msg, "served after the crash") {
			t.Errorf("checkCrashLost = %q", msg)
		}
	})
}
