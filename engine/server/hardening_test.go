package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	"google.golang.org/grpc/status"
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

// failures collects what a check found wrong (a hardening check returns
// them, so TestHardeningHooksBreakTheirChecks can expect them).
type failures []string

func (f *failures) add(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

// expectNoFailures reports every failure of a check of the contract's
// engine.
func expectNoFailures(t *testing.T, f failures) {
	t.Helper()
	for _, msg := range f {
		t.Error(msg)
	}
}

// TestENOSPCIsResourceExhausted: a publish that finds the shared directory
// out of space answers RESOURCE_EXHAUSTED (L-5, retryable), publishes
// nothing, and leaves Health READY with a cache_dir check naming ENOSPC;
// the next publish that fits clears it (issue 15 finding 8).
func TestENOSPCIsResourceExhausted(t *testing.T) {
	expectNoFailures(t, checkENOSPC(t, Hooks{}))
}

// checkENOSPC is TestENOSPCIsResourceExhausted's check of an engine built
// with hooks.
func checkENOSPC(t *testing.T, hooks Hooks) (f failures) {
	fsys := &fullFS{}
	dir := t.TempDir()
	srv, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir, FS: fsys, Hooks: hooks})
	ctx := context.Background()
	fsys.full.Store(true)
	res, err := producer.Generate(ctx, mediaPublish(imageItem(t, "basn6a08.png")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Code() != codes.ResourceExhausted || !strings.Contains(res.Status.Message(), "ENOSPC") || res.EncoderReady() != nil {
		f.add("publish on a full disk = %v; want RESOURCE_EXHAUSTED naming ENOSPC and no EncoderReady", res.Status)
	}
	h, _ := producer.Health(ctx)
	if h.GetState() != pb.HealthState_HEALTH_STATE_READY || !hasCheck(h, handoff.CheckCacheDir, "ENOSPC") {
		f.add("Health on a full disk = %v %v; want READY with a cache_dir check naming ENOSPC", h.GetState(), h.GetChecks())
	}
	if obs := srv.Engine.Observables(); obs["encoder.exports.entries"] != 0 || obs["encoder.exports.bytes"] != 0 {
		f.add("after a failed publish exports = %g entries, %g bytes; want nothing published", obs["encoder.exports.entries"], obs["encoder.exports.bytes"])
	}
	if left, _ := os.ReadDir(dir + "/" + srv.Engine.InstanceID()); len(left) != 2 { // the key file and the instance's lock only
		names := []string{}
		for _, e := range left {
			names = append(names, e.Name())
		}
		f.add("the instance directory holds %v after the failed publish; want only the key and the lock", names)
	}
	fsys.full.Store(false)
	if res, _ := producer.Generate(ctx, mediaPublish(imageItem(t, "basn6a08.png"))); res.Code() != codes.OK {
		f.add("publish once space is back = %v; want OK", res.Status)
	}
	if h, _ := producer.Health(ctx); hasCheck(h, handoff.CheckCacheDir, "") {
		f.add("Health after a publish fitted still has the cache_dir check: %v", h.GetChecks())
	}
	return f
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
// count every one (issue 15 finding 11).
func TestRejectionLogsAreRateLimited(t *testing.T) {
	expectNoFailures(t, checkRejectionLogLimit(t, Hooks{}))
}

// checkRejectionLogLimit is TestRejectionLogsAreRateLimited's check of an
// engine built with hooks.
func checkRejectionLogLimit(t *testing.T, hooks Hooks) (f failures) {
	srv, consumer, logs := startLoggedEngine(t, Config{Role: RolePD, CacheDir: t.TempDir(), Hooks: hooks})
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
		f.add("%d rejections at one instant logged %d lines; want the burst, %d", flood, n, logBurst)
	}
	if grown := logs.size() - before; grown > logBurst*2048 {
		f.add("the flood wrote %d log bytes; want at most %d (logBurst lines of at most 2 KiB)", grown, logBurst*2048)
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
		f.add("first line after a second: rule %v suppressed %v; want SU-4 and %s", last["rule"], last["suppressed"], want)
	}
	if n := count(); n != logBurst+1 {
		f.add("after one more rejection %d lines; want %d", n, logBurst+1)
	}
	if n := metricValue(t, srv, `baton_rejections_total{code="InvalidArgument",rule="SU-4"}`); n != flood+1 {
		f.add("baton_rejections_total for SU-4 = %v; want %d (every rejection counted)", n, flood+1)
	}
	return f
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
// SU-5 on the consumer (not SU-2) (issue 15 finding 12).
func TestRuleLabels(t *testing.T) {
	expectNoFailures(t, checkRuleLabels(t, Hooks{}))
}

// checkRuleLabels is TestRuleLabels's check of engines built with hooks.
func checkRuleLabels(t *testing.T, hooks Hooks) (f failures) {
	_, producer, prodLogs := startLoggedEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP, TestHooks: true, Hooks: hooks})
	consSrv, consumer, consLogs := startLoggedEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}, TestHooks: true, Hooks: hooks})
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
		f.add("consume with a forged tag = %v; want INVALID_ARGUMENT naming SU-5", res.Status)
	}
	if got := rejected(consLogs, "/Generate"); len(got) != 1 || got[0] != "SU-5" {
		f.add("consumer logged the forged tag with rules %v; want [SU-5] (not SU-2)", got)
	}
	// A WRITE failing after the claim. Another request's call keeps the
	// producer client in use across it, so the consumer's quarantine lasts
	// until the Q-4 check below (Q-6: the retired client closes with its
	// last use, and with nothing written the revocation is done at once).
	defer holdProducerClient(t, consSrv.Engine)()
	req := consumeReq(ref)
	req.Extra, _ = structpb.NewStruct(map[string]any{"baton.transfer_fail": true})
	res, _ = consumer.Generate(ctx, req)
	if res.Code() != codes.Unavailable {
		f.add("consume whose WRITE failed after the claim = %v; want UNAVAILABLE", res.Status)
	}
	if got := rejected(prodLogs, "/TransferEncoderCache"); len(got) != 2 || got[0] != "SU-5" || got[1] != "Q-3" {
		f.add("producer logged its transfers with rules %v; want [SU-5 Q-3] (Q-3, not none)", got)
	}
	if got := rejected(consLogs, "/Generate"); len(got) != 2 || got[1] != "Q-1" {
		f.add("consumer logged its consumes with rules %v; want the uncertain one as Q-1 (not Q-4)", got)
	}
	// A handoff on the quarantined consumer is Q-4.
	res, _ = consumer.Generate(ctx, consumeReq(ref))
	if res.Code() != codes.Unavailable || !strings.Contains(res.Status.Message(), "Q-4") {
		f.add("handoff on a quarantined consumer = %v; want UNAVAILABLE naming Q-4", res.Status)
	}
	return f
}

// TestDeadInstanceSweptAtStart: a producer started on a shared directory
// that holds a dead producer's instance directory (its files left, its lock
// free: what a crash leaves) removes it at once, and keeps its own (issue
// 15 finding 7: orphaned instances are recovered).
func TestDeadInstanceSweptAtStart(t *testing.T) {
	expectNoFailures(t, checkDeadInstanceSwept(t, Hooks{}))
}

// checkDeadInstanceSwept is TestDeadInstanceSweptAtStart's check of a
// producer built with hooks.
func checkDeadInstanceSwept(t *testing.T, hooks Hooks) (f failures) {
	root := t.TempDir()
	const deadID = "11111111-2222-4333-8444-555555555555"
	dead, err := shareddir.OpenProducer(shareddir.OSFS{}, root, deadID, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(false); err != nil { // files kept, lock released: a crashed producer's directory
		t.Fatal(err)
	}
	srv, _ := startEngine(t, Config{Role: RoleEncoder, CacheDir: root, Hooks: hooks})
	if _, err := os.Lstat(filepath.Join(root, deadID)); !errors.Is(err, fs.ErrNotExist) {
		f.add("a producer started on a shared directory holding a dead producer's instance directory left it (Lstat = %v); want it removed at start", err)
	}
	if _, err := os.Lstat(filepath.Join(root, srv.Engine.InstanceID())); err != nil {
		f.add("the producer's own instance directory: %v; want it there", err)
	}
	return f
}

// TestExistingCacheDirKeepsItsMode: a producer and a consumer started on
// an operator's 1777 --cache-dir leave its mode alone (issue 15 finding 9:
// `chmod 1777 d; baton serve --cache-dir d` left it drwx------).
func TestExistingCacheDirKeepsItsMode(t *testing.T) {
	expectNoFailures(t, checkCacheDirKeepsItsMode(t, Hooks{}))
}

// checkCacheDirKeepsItsMode is TestExistingCacheDirKeepsItsMode's check of
// engines built with hooks.
func checkCacheDirKeepsItsMode(t *testing.T, hooks Hooks) (f failures) {
	root := t.TempDir()
	if err := os.Chmod(root, fs.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	startEngine(t, Config{Role: RoleEncoder, CacheDir: root, Hooks: hooks})
	startEngine(t, Config{Role: RolePD, CacheDir: root, Hooks: hooks})
	if info, err := os.Lstat(root); err != nil || info.Mode() != fs.ModeDir|fs.ModeSticky|0o777 {
		f.add("--cache-dir after a producer and a consumer started on it = %v, %v; want drwxrwxrwt, the mode it had (never change a directory baton did not create)", info.Mode(), err)
	}
	return f
}

// logQ3WithoutRule is the q3-logged-without-rule mutant's
// Hooks.ProducerTransferFailure: the producer answers a transfer that
// failed after the claim with the same code and message, but as a plain
// status that carries no rule, so its log line and metric say "none" (the
// engine before issue 15 finding 12).
func logQ3WithoutRule(err error) error {
	st := status.Convert(err)
	return status.Error(st.Code(), st.Message())
}

// TestHardeningHooksBreakTheirChecks: each hardening of issue 15 that has
// an engine test but no conformance case (findings 7, 8, 9, 11, 12: nothing
// on the wire shows a directory's mode or a log line) has a mutant, a hook
// that puts the old decision back, and that test's check must fail against
// it, so the check is known to catch the regression it was written for.
func TestHardeningHooksBreakTheirChecks(t *testing.T) {
	for _, m := range []struct {
		name, finding string
		apply         func(h *Hooks)
		check         func(t *testing.T, hooks Hooks) failures
	}{
		{"orphan-sweep-skipped", "7: dead producers' instance directories are never removed", func(h *Hooks) { h.SkipDeadInstanceSweep = true }, checkDeadInstanceSwept},
		{"enospc-internal", "8: ENOSPC answers INTERNAL and Health says nothing", func(h *Hooks) { h.StorageFullInternal = true }, checkENOSPC},
		{"cache-dir-chmod", "9: an existing --cache-dir is chmod'ed 0700", func(h *Hooks) { h.ChmodCacheDir = true }, checkCacheDirKeepsItsMode},
		{"log-unlimited", "11: every rejection is logged, without a rate limit", func(h *Hooks) { h.UnlimitedRejectionLog = true }, checkRejectionLogLimit},
		{"q3-logged-without-rule", "12: a Q-3 failure is logged with rule none", func(h *Hooks) { h.ProducerTransferFailure = logQ3WithoutRule }, checkRuleLabels},
	} {
		t.Run(m.name, func(t *testing.T) {
			var hooks Hooks
			m.apply(&hooks)
			f := m.check(t, hooks)
			if len(f) == 0 {
				t.Fatalf("mutant %s (finding %s) survived: its check found nothing wrong", m.name, m.finding)
			}
			t.Logf("mutant %s KILLED: %s", m.name, f[0])
		})
	}
}
