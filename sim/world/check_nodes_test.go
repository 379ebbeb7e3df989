package world

import (
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
)

// TestNodeCheckersCatch: each new checker fails on the state it rules out.
func TestNodeCheckersCatch(t *testing.T) {
	mk := func() *World {
		s := quietSettings()
		s.Topology, s.Decoders, s.KVSessionTTLMs, s.DecodeTimeoutMs = TopologyEPPD, 1, 100, 100
		w := newQuietWorld(1, s, Options{})
		w.startNodes()
		return w
	}
	t.Run("attached twice", func(t *testing.T) {
		w := mk()
		s := &kvSession{num: 1, id: strings.Repeat("a", 32), state: kvFetched, served: 1, decodedBy: []int{0, 0}, pinc: 1}
		w.nodes.touched = append(w.nodes.touched, s)
		if msg := errText(checkKVSessions(w)); !strings.Contains(msg, "attached more than once") {
			t.Errorf("checkKVSessions = %q", msg)
		}
	})
	t.Run("released after it was attached", func(t *testing.T) {
		w := mk()
		s := &kvSession{num: 1, id: strings.Repeat("f", 32), state: kvFetched, served: 1, aborted: 1, pinc: 1}
		w.nodes.touched = append(w.nodes.touched, s)
		if msg := errText(checkKVSessions(w)); !strings.Contains(msg, "answered ABORTED") {
			t.Errorf("checkKVSessions = %q", msg)
		}
	})
	t.Run("leaked at the end", func(t *testing.T) {
		w := mk()
		w.nodes.sessions = append(w.nodes.sessions, &kvSession{num: 1, id: strings.Repeat("b", 32), state: kvLive, pinc: w.cons[0].inc})
		if msg := errText(checkKVSessionsEnd(w)); !strings.Contains(msg, "leaked") {
			t.Errorf("checkKVSessionsEnd = %q", msg)
		}
	})
	t.Run("L-2 and H-3 ran", func(t *testing.T) {
		for kind, rule := range map[prepKind]string{prepMissing: "L-2", prepBadHash: "H-3"} {
			w := mk()
			w.nodes.decided = append(w.nodes.decided, &decodeReq{num: 1, kind: kind, ran: true, sessionID: strings.Repeat("c", 32)})
			if msg := errText(checkDecodePreparation(w)); !strings.HasPrefix(msg, rule) {
				t.Errorf("checkDecodePreparation(%s) = %q, want %s", prepNames[kind], msg, rule)
			}
		}
	})
	t.Run("D refuses with the core's rules", func(t *testing.T) {
		w := mk()
		s := &kvSession{id: strings.Repeat("d", 32)}
		err := w.checkDecodeRequest(&decodeReq{session: s, sessionID: s.id, prep: &decodePrep{sessionID: s.id, hashes: []string{"XYZ"}}})
		if rule, code := handoff.Classify(err); rule != "H-3" || code != handoff.CodeInvalidArgument {
			t.Errorf("malformed hash: %v (%s, %d), want H-3 INVALID_ARGUMENT", err, rule, code)
		}
		err = w.checkDecodeRequest(&decodeReq{session: s, sessionID: s.id})
		if _, code := handoff.Classify(err); code != handoff.CodeInvalidArgument || !strings.Contains(err.Error(), "L-2") {
			t.Errorf("no preparation: %v, want L-2 INVALID_ARGUMENT", err)
		}
		if err := w.checkDecodeRequest(&decodeReq{session: s, sessionID: s.id, prep: &decodePrep{sessionID: s.id, hashes: []string{contentHash(strings.Repeat("0", 32))}}}); err != nil {
			t.Errorf("P's own preparation refused: %v", err)
		}
	})
	t.Run("N-2 encoder touched", func(t *testing.T) {
		w := mk()
		before := w.encoderSnapshot()
		must(w.sd.disk.Proc("x").MkdirAll("/x", 0o700)) // any disk operation
		w.checkEncoderUntouched(before, event{kind: evKVFetchReply})
		if msg := errText(checkNoEncoderOnDecode(w)); !strings.Contains(msg, "changed the encoder side") {
			t.Errorf("checkNoEncoderOnDecode = %q", msg)
		}
	})
	t.Run("crashed instance served", func(t *testing.T) {
		w := mk()
		rec := w.ledger.add(strings.Repeat("e", 32), 0, 1)
		w.nodes.lost = append(w.nodes.lost, lostEntry{rec: rec})
		rec.consumptions = append(rec.consumptions, "r1")
		if msg := errText(checkCrashLost(w)); !strings.Contains(msg, "served after the crash") {
			t.Errorf("checkCrashLost = %q", msg)
		}
	})
}
