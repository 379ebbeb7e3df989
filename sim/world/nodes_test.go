package world

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// runWorld runs seed and returns its world, for tests that look inside.
func runWorld(t *testing.T, seed uint64) *World {
	t.Helper()
	w := NewWorld(seed, DrawSettings(seed), Options{})
	w.Start()
	w.Loop()
	if w.Fail != nil {
		t.Fatalf("seed %d: %s\n  replay: baton sim --seed %d", seed, w.Fail.Msg, seed)
	}
	return w
}

// TestNodeFaultsFireAndAreSurvived: over seeds 1..800 every node fault
// site fires and every run passes; the E+P+D runs decode from KV sessions,
// refuse the decode requests D must refuse (L-2, H-3, a replay), and free
// every session (attached, released, expired or drained); partitions fail
// WRITEs; producer crashes restart E and lose the dead instance's entries.
func TestNodeFaultsFireAndAreSurvived(t *testing.T) {
	fired := map[Site]int{}
	var eppd, decoded, expired, released, drained, refusedPrep, refusedReplay, lost int
	restarts := map[string]int{}
	for seed := uint64(1); seed <= 800; seed++ {
		w := runWorld(t, seed)
		for s, n := range w.Faults.Fired() {
			fired[s] += n
		}
		if w.Set.eppd() {
			eppd++
		}
		for _, s := range w.Nodes.Sessions {
			switch s.State {
			case KvFetched:
				decoded += len(s.DecodedBy)
			case KvExpired:
				expired++
			case KvReleased:
				released++
			case KvDrained:
				drained++
			case KvLive:
				if s.Live(w) {
					t.Fatalf("seed %d: KV session %s still live at the end", seed, Short(s.Id))
				}
			}
		}
		for _, r := range w.Nodes.Reqs {
			switch {
			case r.Kind != PrepOK && r.Arrived:
				if r.Ran || r.Res != ResDecodeRefused {
					t.Fatalf("seed %d: decode %d with preparation %s: ran %v answer %s", seed, r.Num, PrepNames[r.Kind], r.Ran, ResNames[r.Res])
				}
				refusedPrep++
			case r.Kind == PrepOK && r.Done && r.Res == ResDecodeRefused && len(r.Session.DecodedBy) == 1:
				refusedReplay++
			}
		}
		restarts[w.Set.Backend] += w.Nodes.ProdRestarts
		lost += len(w.Nodes.Lost)
	}
	for _, s := range nodeSites {
		if fired[s] == 0 {
			t.Errorf("fault site %s never fired in seeds 1..800", s)
		}
	}
	if eppd == 0 || decoded == 0 || expired == 0 || released == 0 || drained == 0 || refusedPrep == 0 || refusedReplay == 0 {
		t.Errorf("E+P+D: %d runs, %d decoded, %d expired, %d released, %d drained sessions; %d refused preparations, %d refused replays: want each > 0",
			eppd, decoded, expired, released, drained, refusedPrep, refusedReplay)
	}
	if restarts[BackendSharedDir] == 0 || restarts[BackendTransfer] == 0 || lost == 0 {
		t.Errorf("producer restarts %v, entries lost with a crash %d: want restarts on both backends and lost entries", restarts, lost)
	}
	t.Logf("fired %v; E+P+D runs %d: decoded %d, expired %d, released %d, drained %d; refused %d + %d replays; producer restarts %v (lost %d entries)",
		fired, eppd, decoded, expired, released, drained, refusedPrep, refusedReplay, restarts, lost)
}

// TestPartitionFailsWritesAndQuarantines: a partition of a transfer run
// loses messages and fails WRITEs, and the consumer quarantines what it
// cannot know while the run still passes.
func TestPartitionFailsWritesAndQuarantines(t *testing.T) {
	var cutWrites, quarantined int
	for seed := uint64(1); seed <= 400; seed++ {
		s := DrawSettings(seed)
		if s.Backend != BackendTransfer || !hasSite(s, SitePartition) {
			continue
		}
		var tr bytes.Buffer
		r := Run(seed, s, Options{Trace: &tr})
		if r.Verdict != Passed {
			t.Fatalf("seed %d: %v %s", seed, r.Verdict, r.Failure)
		}
		cutWrites += strings.Count(tr.String(), "failed: link cut")
		if r.Fired[SitePartition] > 0 {
			quarantined += strings.Count(tr.String(), "quarantined")
		}
	}
	if cutWrites == 0 || quarantined == 0 {
		t.Errorf("WRITEs failed by a partition %d, quarantines in partitioned runs %d: want both > 0", cutWrites, quarantined)
	}
}

func hasSite(s Settings, site Site) bool {
	for _, x := range s.Faults {
		if x == site {
			return true
		}
	}
	return false
}

// TestSlowFsyncCommitsAfterRename: a slow write keeps the entry reserved
// (not claimable) until the rename; the TTL counts from before the write.
func TestSlowFsyncCommitsAfterRename(t *testing.T) {
	for seed := uint64(1); seed <= 400; seed++ {
		var tr bytes.Buffer
		r := Run(seed, DrawSettings(seed), Options{Trace: &tr})
		if r.Verdict != Passed {
			t.Fatalf("seed %d: %v %s", seed, r.Verdict, r.Failure)
		}
		if r.Fired[SiteSlowFsync] > 0 && strings.Contains(tr.String(), "renamed into place") {
			return
		}
	}
	t.Fatal("no slow write renamed into place in seeds 1..400")
}

// TestNodeSeedsDeterministic: E+P+D, partition and producer-crash seeds
// give byte-identical traces twice, under GOMAXPROCS 1 and 2.
func TestNodeSeedsDeterministic(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var seeds []uint64
	want := map[string]bool{}
	for seed := uint64(1); seed <= 400 && len(want) < 3; seed++ {
		s, r := DrawSettings(seed), RunSeed(seed, Options{})
		for _, k := range []string{"eppd", "partition", "crash"} {
			hit := (k == "eppd" && s.eppd()) || (k == "partition" && r.Fired[SitePartition] > 0) || (k == "crash" && r.Fired[SiteProducerCrash] > 0)
			if hit && !want[k] {
				want[k] = true
				seeds = append(seeds, seed)
			}
		}
	}
	if len(want) < 3 {
		t.Fatalf("found only %v in seeds 1..400", want)
	}
	for _, seed := range seeds {
		runtime.GOMAXPROCS(1)
		a, b := traceOf(t, seed, MutantNone), traceOf(t, seed, MutantNone)
		runtime.GOMAXPROCS(2)
		c := traceOf(t, seed, MutantNone)
		if !bytes.Equal(a, b) || !bytes.Equal(a, c) {
			t.Errorf("seed %d: traces differ", seed)
		}
	}
}

// TestNodeSettingsValidate: a bad topology or negative node times are refused.
func TestNodeSettingsValidate(t *testing.T) {
	for _, edit := range []func(*Settings){
		func(s *Settings) { s.Topology = "e+x" },
		func(s *Settings) { s.Topology, s.Decoders = TopologyEPPD, 0 },
		func(s *Settings) { s.FsyncMsMax = -1 },
	} {
		s := DrawSettings(7)
		edit(&s)
		if err := s.Validate(); !errors.Is(err, ErrBadSettings) {
			t.Errorf("Validate = %v, want ErrBadSettings", err)
		}
	}
}

// TestConsumerCrashAfterClaimLeavesOrphan: a consumer that dies inside
// shareddir.Claim after its rename won, before reading, leaves the claimed
// file as an orphan that E collects (CollectOrphans, or Close at its
// shutdown), and the run passes (the entry counts as consumed: SU-1 holds).
func TestConsumerCrashAfterClaimLeavesOrphan(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		s := DrawSettings(seed)
		if s.Backend != BackendSharedDir || !hasSite(s, SiteConsumerCrash) {
			continue
		}
		var tr bytes.Buffer
		r := Run(seed, s, Options{Trace: &tr})
		if r.Verdict != Passed {
			t.Fatalf("seed %d: %v %s", seed, r.Verdict, r.Failure)
		}
		if strings.Contains(tr.String(), `the claimed file is an orphan`) {
			t.Logf("seed %d", seed)
			return
		}
	}
	t.Fatal("no consumer died inside its Claim after the rename in seeds 1..2000")
}

// TestProducerCrashInWrite: a crash in the middle of a slow shared-directory
// write, before its fsync (the real Dir.Write killed in its File.Sync),
// loses the temp file or leaves it as an orphan that the restarted
// instance's SweepDeadInstances removes; the run passes.
func TestProducerCrashInWrite(t *testing.T) {
	seen := map[string]bool{}
	for seed := uint64(1); seed <= 3000 && len(seen) < 2; seed++ {
		s := DrawSettings(seed)
		if s.Backend != BackendSharedDir || !hasSite(s, SiteProducerCrash) || !hasSite(s, SiteSlowFsync) {
			continue
		}
		var tr bytes.Buffer
		r := Run(seed, s, Options{Trace: &tr})
		if r.Verdict != Passed {
			t.Fatalf("seed %d: %v %s", seed, r.Verdict, r.Failure)
		}
		for _, l := range strings.Split(tr.String(), "\n") {
			if !strings.Contains(l, `"producer-crash"`) {
				continue
			}
			if strings.Contains(l, "lost") {
				seen["lost"] = true
			}
			if strings.Contains(l, "left as an orphan") && strings.Contains(tr.String(), "/.tmp-") && strings.Contains(tr.String(), "sweep removed ") {
				seen["orphan"] = true
			}
		}
	}
	if !seen["lost"] || !seen["orphan"] {
		t.Errorf("crashes in a write seen: %v, want a lost temp file and a recovered orphan", seen)
	}
}

// TestSlowFsyncRaces: over seeds 1..3000, a slow shared-directory write is
// raced by each of the client's cancellation (the entry is then released
// after its commit, C-7), the producer's drain (which waits for it, S-2)
// and its own TTL (it is committed already expired, X-2), and every such
// run passes.
func TestSlowFsyncRaces(t *testing.T) {
	cancelled, draining, expired := 0, 0, 0
	for seed := uint64(1); seed <= 3000; seed++ {
		s := DrawSettings(seed)
		if !hasSite(s, SiteSlowFsync) || s.Backend != BackendSharedDir {
			continue
		}
		w := NewWorld(seed, s, Options{})
		w.Start()
		for w.Fail == nil {
			ev, ok := w.Q.Pop()
			if !ok {
				t.Fatalf("seed %d: queue ran empty", seed)
			}
			w.Now = ev.Tick
			w.Steps++
			if e := EncodeDoneOf(ev); ev.Kind == EvEncodeDone && e.Resumed && !w.Nodes.ProdDown && w.Prod.Table.State(e.Entry) != 0 {
				c := w.Clients[e.Client]
				if c.StreamCancelled(e.Rpc) {
					cancelled++
				}
				if w.Prod.Health.Draining() {
					draining++
				}
				if e.StartedMs+w.Prod.Table.TTL(c.Plan.TTLMs) <= w.Now {
					expired++
				}
			}
			done := w.Dispatch(ev)
			w.CheckStep()
			if done && w.Fail == nil {
				w.checkEnd()
				break
			}
		}
		if w.Fail != nil {
			t.Fatalf("seed %d: %s", seed, w.Fail.Msg)
		}
	}
	if cancelled == 0 || draining == 0 || expired == 0 {
		t.Errorf("slow writes raced by a cancel %d, a drain %d, their TTL %d times: want each > 0", cancelled, draining, expired)
	}
}
