package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
)

// budgetImage is a 32x32 fixture; budgetItems of them fill the budget of
// budgetConfig exactly.
const (
	budgetImage  = "basn0g08.png"
	budgetPixels = 32 * 32
	budgetItems  = MaxItemsPerRequest
)

// budgetConfig is an encoder whose L-6 bound is one 32x32 image and whose
// decode budget holds exactly the largest request (budgetItems of them).
func budgetConfig(t *testing.T, wait time.Duration) Config {
	return Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true,
		MediaLimits:  encoder.Limits{MaxPixels: budgetPixels},
		DecodeBudget: DecodeBudget{MaxBytes: budgetItems * budgetPixels * DecodedBytesPerPixel, Wait: wait}}
}

func budgetPublish(t *testing.T, n int) *pb.GenerateRequest {
	items := make([]*pb.MediaItem, n)
	for i := range items {
		items[i] = imageItem(t, budgetImage)
	}
	return &pb.GenerateRequest{Media: items, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
}

// waitDecodeBytes polls the producer's encoder.decode.inflight_bytes until
// it is want (the state the test waits for, not a duration) or 20 s pass.
func waitDecodeBytes(t *testing.T, eng *target.GRPCEngine, want float64) {
	t.Helper()
	waitDecode(t, eng, "encoder.decode.inflight_bytes", want)
}

// waitDecode polls one of the producer's encoder.decode.* observables
// until it is want or 20 s pass.
func waitDecode(t *testing.T, eng *target.GRPCEngine, key string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		load, err := eng.GetLoad(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := load.GetAttributes().GetFields()[key].GetNumberValue()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v; want %v", key, got, want)
		}
		time.Sleep(5 * time.Millisecond) // polling a counter another goroutine changes
	}
}

// fillBudget starts a publish of budgetItems images whose encoder step the
// test hook holds, so its reservation fills cfg's budget until cancel, and
// waits until it does; done gets its result.
func fillBudget(t *testing.T, eng *target.GRPCEngine, cfg Config) (cancel context.CancelFunc, done <-chan *target.GenerateResult) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	held := withExtra(t, budgetPublish(t, budgetItems), map[string]any{HookEncoderDelayMs: 20000})
	out := make(chan *target.GenerateResult, 1)
	go func() {
		res, _ := eng.Generate(ctx, held)
		out <- res
	}()
	waitDecodeBytes(t, eng, float64(cfg.DecodeBudget.MaxBytes))
	return cancel, out
}

// TestDecodeBudgetRefusesPastTheBound: while one request holds the whole
// decode budget, another publish gets RESOURCE_EXHAUSTED (SE-4, retryable)
// and Health stays READY; once the holder ends, its reservation is back
// (nothing leaked) and the largest request is served again.
func TestDecodeBudgetRefusesPastTheBound(t *testing.T) {
	cfg := budgetConfig(t, -1)
	_, eng := startEngine(t, cfg)
	cancel, done := fillBudget(t, eng, cfg)
	defer cancel()

	res, err := eng.Generate(context.Background(), budgetPublish(t, 1))
	if err != nil || res.Code() != codes.ResourceExhausted || !strings.Contains(res.Status.Message(), "SE-4") {
		t.Errorf("publish past the decode budget = %v, %v; want RESOURCE_EXHAUSTED naming SE-4", res.Status, err)
	}
	if h, err := eng.Health(context.Background()); err != nil || h.GetState() != pb.HealthState_HEALTH_STATE_READY {
		t.Errorf("Health while the budget is full = %v, %v; want READY", h.GetState(), err)
	}
	cancel()
	if res := <-done; res == nil || res.Code() != codes.Canceled {
		t.Fatalf("the held publish after its cancel = %v; want CANCELLED", res)
	}
	waitDecodeBytes(t, eng, 0)
	if res, err := eng.Generate(context.Background(), budgetPublish(t, 1)); err != nil || res.Code() != codes.OK {
		t.Errorf("a publish once the budget is free = %v, %v; want OK", res.Status, err)
	}
	load, _ := eng.GetLoad(context.Background())
	if n := load.GetAttributes().GetFields()["encoder.decode.refused"].GetNumberValue(); n != 1 {
		t.Errorf("encoder.decode.refused = %v; want 1", n)
	}
}

// TestDecodeBudgetWaitsForRoom: with a wait, a request that finds the
// budget full waits (encoder.decode.waiting) and is served once the holder
// ends instead of refused.
func TestDecodeBudgetWaitsForRoom(t *testing.T) {
	cfg := budgetConfig(t, time.Minute)
	_, eng := startEngine(t, cfg)
	cancel, done := fillBudget(t, eng, cfg)
	defer cancel()
	waiter := make(chan *target.GenerateResult, 1)
	go func() {
		res, _ := eng.Generate(context.Background(), budgetPublish(t, 1))
		waiter <- res
	}()
	waitDecode(t, eng, "encoder.decode.waiting", 1)
	cancel()
	<-done
	if res := <-waiter; res == nil || res.Code() != codes.OK {
		t.Errorf("publish that waited for room = %v; want OK", res)
	}
	waitDecodeBytes(t, eng, 0)
}

// TestDecodeBudgetReserve: the budget's own rules, without an engine.
func TestDecodeBudgetReserve(t *testing.T) {
	b := newDecodeBudget(DecodeBudget{MaxBytes: 800, MaxConcurrent: 1, Wait: time.Hour})
	if _, err := b.reserve(context.Background(), 808); !errors.Is(err, errDecodeBudget) {
		t.Errorf("reserve over the whole budget = %v; want errDecodeBudget at once", err)
	}
	rel, err := b.reserve(context.Background(), 800)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.reserve(ctx, 8); !errors.Is(err, context.Canceled) {
		t.Errorf("reserve on a full budget with a cancelled context = %v; want context.Canceled", err)
	}
	rel()
	rel() // idempotent
	if got := b.inflight.Load(); got != 0 {
		t.Errorf("inflight after release = %d; want 0", got)
	}
	if rel2, err := b.reserve(context.Background(), 800); err != nil {
		t.Errorf("reserve after release = %v; want room again", err)
	} else {
		rel2()
	}
}

// TestDecodeBudgetConfig: a budget that could never serve the largest
// request L-6 lets in is a configuration error.
func TestDecodeBudgetConfig(t *testing.T) {
	_, err := New(Config{Role: RoleAggregated, Preset: "tiny", DecodeBudget: DecodeBudget{MaxBytes: 1 << 20}}, nil)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "decode-budget-bytes") {
		t.Errorf("New with a 1 MiB decode budget = %v; want ErrConfig naming --decode-budget-bytes", err)
	}
	if _, err := New(Config{Role: RoleAggregated, Preset: "tiny", DecodeBudget: DecodeBudget{MaxConcurrent: -1}}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("New with -1 concurrent decodes = %v; want ErrConfig", err)
	}
}

// TestMaxRequestPixels: --max-request-pixels lowers L-6's bound on a
// request's pixels, and with it the smallest decode budget the engine
// accepts (one request of the largest size): a budget of exactly two 32x32
// images starts, a publish of two is served, one of three is
// INVALID_ARGUMENT naming L-6 before anything is decoded; a bound below 1
// is a configuration error.
func TestMaxRequestPixels(t *testing.T) {
	cfg := Config{Role: RoleEncoder, CacheDir: t.TempDir(), MaxRequestPixels: 2 * budgetPixels,
		DecodeBudget: DecodeBudget{MaxBytes: 2 * budgetPixels * DecodedBytesPerPixel}}
	_, eng := startEngine(t, cfg)
	if res, err := eng.Generate(context.Background(), budgetPublish(t, 2)); err != nil || res.Code() != codes.OK {
		t.Errorf("publish of two 32x32 images under a 2048-pixel request bound = %v, %v; want OK", res.Status, err)
	}
	res, err := eng.Generate(context.Background(), budgetPublish(t, 3))
	if err != nil || res.Code() != codes.InvalidArgument || !strings.Contains(res.Status.Message(), "L-6") {
		t.Errorf("publish of three 32x32 images under a 2048-pixel request bound = %v, %v; want INVALID_ARGUMENT naming L-6", res.Status, err)
	}
	if _, err := New(Config{Role: RoleAggregated, Preset: "tiny", MaxRequestPixels: -1}, nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "max-request-pixels") {
		t.Errorf("New with --max-request-pixels -1 = %v; want ErrConfig naming it", err)
	}
}

// TestDecodeBudgetSlotWait: a decode that finds every slot busy waits up to
// the slot wait, then fails with errDecodeBudget (RESOURCE_EXHAUSTED,
// SE-4), instead of waiting until its own deadline behind a slow decode
// (attack F1); once the slot is free it runs.
func TestDecodeBudgetSlotWait(t *testing.T) {
	b := newDecodeBudget(DecodeBudget{MaxBytes: 800, MaxConcurrent: 1, Wait: time.Millisecond})
	if b.slotWait != DecodeSlotWait {
		t.Fatalf("slot wait %v; want DecodeSlotWait %v", b.slotWait, DecodeSlotWait)
	}
	b.slotWait = 20 * time.Millisecond
	busy, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() { done <- b.run(context.Background(), func() { close(busy); <-release }) }()
	<-busy
	ran := false
	if err := b.run(context.Background(), func() { ran = true }); !errors.Is(err, errDecodeBudget) || ran {
		t.Errorf("run while the only slot is busy = %v (ran %v); want errDecodeBudget after the slot wait, not run", err, ran)
	}
	if got := b.refused.Load(); got != 1 {
		t.Errorf("refused = %d; want 1", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.run(ctx, func() { ran = true }); !errors.Is(err, context.Canceled) || ran {
		t.Errorf("run with a cancelled context while busy = %v; want context.Canceled", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.run(context.Background(), func() { ran = true }); err != nil || !ran {
		t.Errorf("run once the slot is free = %v (ran %v); want it run", err, ran)
	}
}

// TestProgressiveJPEGBounds: attack F1 and F3 (stop 22) on a real E. A
// progressive CMYK JPEG is charged what its decode holds (its coefficients
// and samples, 20 bytes a pixel, not 8), and a progressive JPEG of more
// scans than encoder.MaxJPEGScans is refused as a bound (INVALID_ARGUMENT,
// L-6) before its scans are decoded, with Health READY and the next
// publish served.
func TestProgressiveJPEGBounds(t *testing.T) {
	cfg := Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true}
	_, eng := startEngine(t, cfg)
	jpegItem := func(data []byte) *pb.GenerateRequest {
		return &pb.GenerateRequest{Media: []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: data}}},
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := withExtra(t, jpegItem(fixtures.ProgressiveJPEG(640, 480, 4, 1, 1)), map[string]any{HookEncoderDelayMs: 20000})
	out := make(chan *target.GenerateResult, 1)
	go func() {
		res, _ := eng.Generate(ctx, held)
		out <- res
	}()
	waitDecodeBytes(t, eng, 640*480*20)
	cancel()
	<-out
	waitDecodeBytes(t, eng, 0)

	bomb := fixtures.ProgressiveJPEG(6000, 6000, 1, 1, encoder.MaxJPEGScans) // one scan over the bound, 36 megapixels
	res, err := eng.Generate(context.Background(), jpegItem(bomb))
	if err != nil || res.Code() != codes.InvalidArgument || !strings.Contains(res.Status.Message(), "scans") {
		t.Errorf("publish of a JPEG of %d scans = %v, %v; want INVALID_ARGUMENT naming the scans", encoder.MaxJPEGScans+1, res.Status, err)
	}
	if h, err := eng.Health(context.Background()); err != nil || h.GetState() != pb.HealthState_HEALTH_STATE_READY {
		t.Errorf("Health after the scan bomb = %v, %v; want READY", h.GetState(), err)
	}
	waitDecodeBytes(t, eng, 0)
	if res, err := eng.Generate(context.Background(), jpegItem(fixtures.ProgressiveJPEG(64, 64, 3, 2, 3))); err != nil || res.Code() != codes.OK {
		t.Errorf("a progressive 4:2:0 publish after it = %v, %v; want OK", res.Status, err)
	}
}

// TestNoJPEGScanBoundHook: the SE-4 scan mutant's hook (NoJPEGScanBound)
// lifts the scan bound and nothing else: a JPEG of more scans than
// encoder.MaxJPEGScans, refused by the engine (TestProgressiveJPEGBounds),
// is decoded and published by the mutant.
func TestNoJPEGScanBoundHook(t *testing.T) {
	cfg := Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true, Hooks: Hooks{NoJPEGScanBound: true}}
	_, eng := startEngine(t, cfg)
	req := &pb.GenerateRequest{Media: []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: fixtures.ProgressiveJPEG(64, 48, 1, 1, 2*encoder.MaxJPEGScans)}}},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
	res, err := eng.Generate(context.Background(), req)
	if err != nil || res.Code() != codes.OK {
		t.Fatalf("publish of a JPEG of %d scans with NoJPEGScanBound = %v, %v; want OK (the bound lifted)", 1+2*encoder.MaxJPEGScans, res.Status, err)
	}
}
