package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// size is the bytes written so far.
func (b *lockedBuffer) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// records parses the JSON log lines written so far.
func (b *lockedBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		out = append(out, rec)
	}
	return out
}

// startLoggedEngine is startEngine with a JSON logger at debug level.
func startLoggedEngine(t *testing.T, cfg Config) (*Server, *target.GRPCEngine, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	srv, eng := startEngineLogging(t, cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return srv, eng, logs
}

// scraped is one sample of a scrape: its labels and value.
type scraped struct {
	labels map[string]string
	value  float64
}

// samples maps a metric name to its samples.
type samples map[string][]scraped

// scrape GETs /metrics from the engine's handler and parses the text format.
func scrape(t *testing.T, e *Engine) samples {
	t.Helper()
	hs := httptest.NewServer(e.MetricsHandler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d, %v", resp.StatusCode, err)
	}
	out := samples{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		name, labels := line[:sp], map[string]string{}
		if i := strings.IndexByte(name, '{'); i >= 0 {
			for _, kv := range strings.Split(strings.TrimSuffix(name[i+1:], "}"), ",") {
				k, val, _ := strings.Cut(kv, "=")
				labels[k] = strings.Trim(val, `"`)
			}
			name = name[:i]
		}
		out[name] = append(out[name], scraped{labels, v})
	}
	return out
}

// sample returns the value of name whose labels include want (0 if absent).
func sample(m samples, name string, want map[string]string) float64 {
	for _, s := range m[name] {
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			return s.value
		}
	}
	return 0
}

func publishRequest(t *testing.T, id string) *pb.GenerateRequest {
	return &pb.GenerateRequest{RequestId: id, Media: []*pb.MediaItem{imageItem(t, firstImage(t))},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
}

func consumeRequest(id string, ref *pb.EncoderCacheRef) *pb.GenerateRequest {
	return &pb.GenerateRequest{RequestId: id, Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}}
}

// firstImage names the first valid fixture image.
func firstImage(t *testing.T) string {
	t.Helper()
	imgs := fixtures.Images()
	if len(imgs) == 0 {
		t.Fatal("no fixture images")
	}
	return imgs[0].Name
}

// TestMetricsMoveWithHandoffs: a publish, a consume, a replay (SU-2) and a
// wrong-role request (L-4) each move the counters an operator watches.
func TestMetricsMoveWithHandoffs(t *testing.T) {
	dir := t.TempDir()
	psrv, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	csrv, consumer := startEngine(t, Config{Role: RolePD, CacheDir: dir})
	ctx := context.Background()

	before := scrape(t, psrv.Engine)
	if v := sample(before, "baton_handoff_published_total", nil); v != 0 {
		t.Fatalf("published_total before any publish = %v", v)
	}
	if v := sample(before, "baton_engine_info", map[string]string{"role": "encoder", "instance_id": psrv.Engine.InstanceID()}); v != 1 {
		t.Errorf("baton_engine_info{role=encoder} = %v; want 1", v)
	}

	pub, err := producer.Generate(ctx, publishRequest(t, "pub-1"))
	if err != nil || pub.Code() != codes.OK || pub.EncoderReady() == nil {
		t.Fatalf("publish = %v, %v", pub.Status, err)
	}
	ref := pub.EncoderReady().GetRef()
	m := scrape(t, psrv.Engine)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"baton_handoff_published_total", nil, 1},
		{"baton_exports_entries", nil, 1},
		{"baton_handoff_publish_seconds_count", map[string]string{"outcome": "ok"}, 1},
		{"baton_generate_seconds_count", map[string]string{"code": "OK"}, 1},
		{"baton_health_state", nil, 2},
	} {
		if got := sample(m, c.name, c.labels); got != c.want {
			t.Errorf("producer %s%v = %v after one publish; want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := sample(m, "baton_exports_bytes", nil); got <= 0 {
		t.Errorf("producer baton_exports_bytes = %v after one publish; want > 0", got)
	}

	got, _ := consumer.Generate(ctx, consumeRequest("con-1", ref))
	if got.Code() != codes.OK {
		t.Fatalf("consume = %v", got.Status)
	}
	replay, _ := consumer.Generate(ctx, consumeRequest("con-2", ref))
	if replay.Code() != codes.InvalidArgument {
		t.Fatalf("SU-2 replay = %v; want INVALID_ARGUMENT", replay.Status)
	}
	m = scrape(t, csrv.Engine)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"baton_handoff_consumed_total", nil, 1},
		{"baton_handoff_consume_seconds_count", map[string]string{"outcome": "ok"}, 1},
		{"baton_handoff_consume_seconds_count", map[string]string{"outcome": "rejected"}, 1},
		{"baton_rejections_total", map[string]string{"rule": "SU-2", "code": "InvalidArgument"}, 1},
		{"baton_generate_seconds_count", map[string]string{"code": "InvalidArgument"}, 1},
		{"baton_quarantine_buffers", nil, 0},
	} {
		if got := sample(m, c.name, c.labels); got != c.want {
			t.Errorf("consumer %s%v = %v after consume + replay; want %v", c.name, c.labels, got, c.want)
		}
	}

	// The producer learns of the claim when it next looks (Abort does).
	ab, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
	if err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Fatalf("Abort of a consumed reference = %v, %v", ab.GetStatus(), err)
	}
	wrongRole, _ := producer.Generate(ctx, &pb.GenerateRequest{RequestId: "l4", Input: &pb.GenerateRequest_Prompt{Prompt: "hi"}})
	if wrongRole.Code() != codes.FailedPrecondition {
		t.Fatalf("L-4 text request to E = %v", wrongRole.Status)
	}
	_, err = producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Abort with empty request_id = %v", err)
	}
	m = scrape(t, psrv.Engine)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"baton_handoff_consumed_total", nil, 1},
		{"baton_exports_entries", nil, 0},
		{"baton_rejections_total", map[string]string{"rule": "L-4", "code": "FailedPrecondition"}, 1},
		{"baton_rejections_total", map[string]string{"rule": "none", "code": "InvalidArgument"}, 1},
		{"baton_handoff_released_total", nil, 0},
	} {
		if got := sample(m, c.name, c.labels); got != c.want {
			t.Errorf("producer %s%v = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestMetricsCountReleaseAndCleanupFailure: SU-3 release moves
// released_total; an X-1 cleanup failure moves cleanup_failures_total and
// the health gauge.
func TestMetricsCountReleaseAndCleanupFailure(t *testing.T) {
	dir := t.TempDir()
	psrv, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	ctx := context.Background()
	pub, _ := producer.Generate(ctx, publishRequest(t, "pub-r"))
	if pub.Code() != codes.OK {
		t.Fatalf("publish = %v", pub.Status)
	}
	ab, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: pub.EncoderReady().GetRef()}})
	if err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ABORTED {
		t.Fatalf("SU-3 Abort = %v, %v", ab.GetStatus(), err)
	}
	psrv.Engine.failCleanup("test removal", errors.New("disk on fire"))
	m := scrape(t, psrv.Engine)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"baton_handoff_released_total", 1},
		{"baton_cleanup_failures_total", 1},
		{"baton_health_state", float64(pb.HealthState_HEALTH_STATE_NOT_READY)},
	} {
		if got := sample(m, c.name, nil); got != c.want {
			t.Errorf("%s = %v; want %v", c.name, got, c.want)
		}
	}
}

// TestRejectionLogCarriesRuleRequestAndTrace: the log line of a rejection
// names its rule, the request id and the caller's trace id.
func TestRejectionLogCarriesRuleRequestAndTrace(t *testing.T) {
	dir := t.TempDir()
	_, producer, logs := startLoggedEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00f067aa0ba902b7"
	)
	ctx := metadata.AppendToOutgoingContext(context.Background(), TraceparentKey, "00-"+traceID+"-"+parent+"-01")
	res, _ := producer.Generate(ctx, &pb.GenerateRequest{RequestId: "req-l4", Input: &pb.GenerateRequest_Prompt{Prompt: "hi"}})
	if res.Code() != codes.FailedPrecondition {
		t.Fatalf("L-4 text request to E = %v", res.Status)
	}
	pub, _ := producer.Generate(ctx, publishRequest(t, "req-pub"))
	if pub.Code() != codes.OK {
		t.Fatalf("publish = %v", pub.Status)
	}
	// A malformed traceparent is ignored (a new trace), never a rejection.
	bad := metadata.AppendToOutgoingContext(context.Background(), TraceparentKey, "00-XYZ")
	if _, err := producer.GetLoad(bad); err != nil {
		t.Fatalf("GetLoad with a malformed traceparent = %v; want OK", err)
	}
	_, err := producer.Abort(bad, &pb.AbortRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Abort without target = %v", err)
	}

	var rejected, published, noTarget map[string]any
	for _, rec := range logs.records(t) {
		switch {
		case rec["msg"] == "request rejected" && rec["request_id"] == "req-l4":
			rejected = rec
		case rec["msg"] == "published" && rec["request_id"] == "req-pub":
			published = rec
		case rec["msg"] == "request rejected" && strings.Contains(rec["err"].(string), "no target"):
			noTarget = rec
		}
	}
	if rejected == nil {
		t.Fatalf("no 'request rejected' line for req-l4 in:\n%s", logs.buf.String())
	}
	for k, want := range map[string]any{"rule": "L-4", "code": "FailedPrecondition", "trace_id": traceID, "method": generateMethod} {
		if rejected[k] != want {
			t.Errorf("rejection log %s = %v; want %v (line %v)", k, rejected[k], want, rejected)
		}
	}
	if sid, _ := rejected["span_id"].(string); len(sid) != 16 || sid == parent {
		t.Errorf("rejection log span_id = %q; want this engine's own 16-hex span", sid)
	}
	if published == nil || published["trace_id"] != traceID {
		t.Errorf("'published' line = %v; want request_id req-pub and trace_id %s", published, traceID)
	}
	if noTarget == nil || noTarget["rule"] != "none" {
		t.Errorf("Abort-without-target line = %v; want rule none", noTarget)
	} else if tid, _ := noTarget["trace_id"].(string); len(tid) != 32 || tid == traceID {
		t.Errorf("malformed traceparent: trace_id %q; want a fresh 32-hex trace id", tid)
	}
}

func TestWrapSiteRule(t *testing.T) {
	tests := []struct{ msg, want string }{
		{"handoff: invalid request: SU-4 bad field", "SU-4"},
		{"handoff: invalid request: token id 99999 out of vocabulary", ""},
		{"entry 4c3b-9f2e: x", ""},
		{"L-6 then SU-2", "L-6"},
		{"XSU-2 is not a rule", ""},
	}
	for _, tt := range tests {
		if got := wrapSiteRule(tt.msg); got != tt.want {
			t.Errorf("wrapSiteRule(%q) = %q; want %q", tt.msg, got, tt.want)
		}
	}
}

// TestEndCallOutcomes: how endCall logs and counts each kind of ending.
func TestEndCallOutcomes(t *testing.T) {
	logs := &lockedBuffer{}
	e, err := New(Config{Role: RoleAggregated, Preset: "tiny"}, withRequestLogging(slog.New(slog.NewJSONHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		err     error
		msg     string
		rule    string
		counted bool
	}{
		{"rule rejection", e.status(fmt.Errorf("%w: SU-2 spent", handoff.ErrSpentReference)), "request rejected", "SU-2", true},
		{"wrap-site rule", e.status(fmt.Errorf("%w: SU-4 bad field", handoff.ErrBadRequest)), "request rejected", "SU-4", true},
		{"plain status", status.Error(codes.Unimplemented, "no"), "request rejected", "none", true},
		{"internal", e.status(errors.New("disk on fire")), "request failed", "none", true},
		{"client cancelled", e.status(context.Canceled), "request cancelled", "none", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "req-" + strconv.Itoa(i)
			ctx, ci := beginCall(context.Background(), "/test/Method")
			ci.requestID = id
			code := status.Code(tt.err).String()
			before := sample(scrape(t, e), "baton_rejections_total", map[string]string{"rule": tt.rule, "code": code})
			e.endCall(ctx, ci, time.Now(), tt.err)
			after := sample(scrape(t, e), "baton_rejections_total", map[string]string{"rule": tt.rule, "code": code})
			if counted := after == before+1; counted != tt.counted {
				t.Errorf("baton_rejections_total{rule=%s,code=%s} went %v -> %v; want counted=%v", tt.rule, code, before, after, tt.counted)
			}
			var line map[string]any
			for _, rec := range logs.records(t) {
				if rec["request_id"] == id {
					line = rec
				}
			}
			if line == nil || line["msg"] != tt.msg || line["rule"] != tt.rule || line["trace_id"] == nil {
				t.Errorf("log line %v; want msg %q rule %q with a trace_id", line, tt.msg, tt.rule)
			}
		})
	}
}
