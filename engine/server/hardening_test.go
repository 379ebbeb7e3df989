package server

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fullFS is the real disk whose temp-file writes fail with ENOSPC while full is set.
type fullFS struct {
	shareddir.OSFS
	full atomic.Bool
}

func (f *fullFS) OpenFile(name string, flag int, perm fs.FileMode) (shareddir.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil || flag&os.O_CREATE == 0 || !f.full.Load() {
		return file, err
	}
	return enospcFile{file}, nil
}

type enospcFile struct{ shareddir.File }

func (enospcFile) Write([]byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: "tmp", Err: syscall.ENOSPC}
}

// TestENOSPCIsResourceExhausted: a publish that finds the shared directory
// out of space answers RESOURCE_EXHAUSTED (L-5, retryable), publishes
// nothing, and leaves Health READY with a cache_dir check naming ENOSPC;
// the next publish that fits clears it.
func TestENOSPCIsResourceExhausted(t *testing.T) {
	fsys := &fullFS{}
	dir := t.TempDir()
	srv, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir, FS: fsys})
	ctx := context.Background()
	fsys.full.Store(true)
	res, err := producer.Generate(ctx, mediaPublish(imageItem(t, "basn6a08.png")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Code() != codes.ResourceExhausted || !strings.Contains(res.Status.Message(), "ENOSPC") || res.EncoderReady() != nil {
		t.Errorf("publish on a full disk = %v; want RESOURCE_EXHAUSTED naming ENOSPC and no EncoderReady", res.Status)
	}
	h, _ := producer.Health(ctx)
	if h.GetState() != pb.HealthState_HEALTH_STATE_READY || !hasCheck(h, handoff.CheckCacheDir, "ENOSPC") {
		t.Errorf("Health on a full disk = %v %v; want READY with a cache_dir check naming ENOSPC", h.GetState(), h.GetChecks())
	}
	if obs := srv.Engine.Observables(); obs["encoder.exports.entries"] != 0 || obs["encoder.exports.bytes"] != 0 {
		t.Errorf("after a failed publish exports = %g entries, %g bytes; want nothing published", obs["encoder.exports.entries"], obs["encoder.exports.bytes"])
	}
	if left, _ := os.ReadDir(dir + "/" + srv.Engine.InstanceID()); len(left) != 2 { // the key file and the instance's lock only
		names := []string{}
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("the instance directory holds %v after the failed publish; want only the key and the lock", names)
	}
	fsys.full.Store(false)
	if res, _ := producer.Generate(ctx, mediaPublish(imageItem(t, "basn6a08.png"))); res.Code() != codes.OK {
		t.Errorf("publish once space is back = %v; want OK", res.Status)
	}
	if h, _ := producer.Health(ctx); hasCheck(h, handoff.CheckCacheDir, "") {
		t.Errorf("Health after a publish fitted still has the cache_dir check: %v", h.GetChecks())
	}
}

func hasCheck(h *pb.HealthResponse, name, contains string) bool {
	for _, c := range h.GetChecks() {
		if c.GetName() == name && strings.Contains(c.GetMessage(), contains) {
			return true
		}
	}
	return false
}

// TestRejectionLogsAreRateLimited: a flood of bad references logs at most
// logBurst lines per rule at once and logPerSecond more a second; the
// next line after a pause reports how many were dropped; the metrics
// count every one.
func TestRejectionLogsAreRateLimited(t *testing.T) {
	srv, consumer, logs := startLoggedEngine(t, Config{Role: RolePD, CacheDir: t.TempDir()})
	clock := time.Unix(1_000_000, 0)
	var clockMu sync.Mutex
	srv.Engine.logLimit.setClock(func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock })
	ctx := context.Background()
	bad := &pb.EncoderCacheRef{Backend: BackendSharedDir, ProducerInstanceId: "3f2a7c1e-0b4d-4e8f-9a6b-5c7d8e9f0a1b", OpaqueState: []byte("not json")}
	const flood = 400
	before := logs.size()
	for range flood {
		res, err := consumer.Generate(ctx, consumeReq(bad))
		if err != nil || res.Code() != codes.InvalidArgument {
			t.Fatalf("malformed reference = %v %v", res.Status, err)
		}
	}
	count := func() (n int) {
		for _, l := range logs.records(t) {
			if l["msg"] == "request rejected" && l["rule"] == "SU-4" {
				n++
			}
		}
		return n
	}
	if n := count(); n != logBurst {
		t.Errorf("%d rejections at one instant logged %d lines; want the burst, %d", flood, n, logBurst)
	}
	if grown := logs.size() - before; grown > logBurst*2048 {
		t.Errorf("the flood wrote %d log bytes; want at most %d (logBurst lines of at most 2 KiB)", grown, logBurst*2048)
	}
	clockMu.Lock()
	clock = clock.Add(time.Second)
	clockMu.Unlock()
	if _, err := consumer.Generate(ctx, consumeReq(bad)); err != nil {
		t.Fatal(err)
	}
	lines := logs.records(t)
	last := lines[len(lines)-1]
	if got, want := fmt.Sprint(last["suppressed"]), fmt.Sprint(flood-logBurst); last["rule"] != "SU-4" || got != want {
		t.Errorf("first line after a second: rule %v suppressed %v; want SU-4 and %s", last["rule"], last["suppressed"], want)
	}
	if n := count(); n != logBurst+1 {
		t.Errorf("after one more rejection %d lines; want %d", n, logBurst+1)
	}
	if n := metricValue(t, srv, `baton_rejections_total{code="InvalidArgument",rule="SU-4"}`); n != flood+1 {
		t.Errorf("baton_rejections_total for SU-4 = %v; want %d (every rejection counted)", n, flood+1)
	}
}

// metricValue scrapes one sample of srv's metrics.
func metricValue(t *testing.T, srv *Server, sample string) float64 {
	t.Helper()
	mfs, err := srv.Engine.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	name, labels, _ := strings.Cut(sample, "{")
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var parts []string
			for _, lp := range m.GetLabel() {
				parts = append(parts, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			if strings.Join(parts, ",")+"}" == labels {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// TestRuleLabels: every rejection is logged with the rule that decided it:
// a failure after the claim is Q-3 on the producer and Q-1 on the consumer
// (not "none", not Q-4), a reference whose tag the producer refuses is
// SU-5 on the consumer (not SU-2).
func TestRuleLabels(t *testing.T) {
	_, producer, prodLogs := startLoggedEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP, TestHooks: true})
	_, consumer, consLogs := startLoggedEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}, TestHooks: true})
	ctx := context.Background()
	rejected := func(b *lockedBuffer, method string) []string {
		var rules []string
		for _, l := range b.records(t) {
			if (l["msg"] == "request rejected" || l["msg"] == "request failed") && strings.HasSuffix(fmt.Sprint(l["method"]), method) {
				rules = append(rules, fmt.Sprint(l["rule"]))
			}
		}
		return rules
	}
	// A forged tag: the producer answers SU-5 before writing.
	pub, err := producer.Generate(ctx, mediaPublish(imageItem(t, "basn6a08.png")))
	if err != nil || pub.Code() != codes.OK {
		t.Fatalf("publish: %v %v", pub.Status, err)
	}
	ref := pub.EncoderReady().GetRef()
	forged := proto.Clone(ref).(*pb.EncoderCacheRef)
	at := bytes.Index(forged.OpaqueState, []byte(`"tag":"`)) + len(`"tag":"`)
	forged.OpaqueState[at] = "01"[boolInt(forged.OpaqueState[at] == '0')] // one hex digit of the tag changed
	res, _ := consumer.Generate(ctx, consumeReq(forged))
	if res.Code() != codes.InvalidArgument || !strings.Contains(res.Status.Message(), "SU-5") {
		t.Errorf("consume with a forged tag = %v; want INVALID_ARGUMENT naming SU-5", res.Status)
	}
	if got := rejected(consLogs, "/Generate"); len(got) != 1 || got[0] != "SU-5" {
		t.Errorf("consumer logged the forged tag with rules %v; want [SU-5] (not SU-2)", got)
	}
	// A WRITE failing after the claim.
	req := consumeReq(ref)
	req.Extra, _ = structpb.NewStruct(map[string]any{"baton.transfer_fail": true})
	res, _ = consumer.Generate(ctx, req)
	if res.Code() != codes.Unavailable {
		t.Errorf("consume whose WRITE failed after the claim = %v; want UNAVAILABLE", res.Status)
	}
	if got := rejected(prodLogs, "/TransferEncoderCache"); len(got) != 2 || got[0] != "SU-5" || got[1] != "Q-3" {
		t.Errorf("producer logged its transfers with rules %v; want [SU-5 Q-3] (Q-3, not none)", got)
	}
	if got := rejected(consLogs, "/Generate"); len(got) != 2 || got[1] != "Q-1" {
		t.Errorf("consumer logged its consumes with rules %v; want the uncertain one as Q-1 (not Q-4)", got)
	}
	// A handoff on the quarantined consumer is Q-4.
	res, _ = consumer.Generate(ctx, consumeReq(ref))
	if res.Code() != codes.Unavailable || !strings.Contains(res.Status.Message(), "Q-4") {
		t.Errorf("handoff on a quarantined consumer = %v; want UNAVAILABLE naming Q-4", res.Status)
	}
}
