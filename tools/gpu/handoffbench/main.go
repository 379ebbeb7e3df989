// Command handoffbench measures baton's cuda_ipc handoff and E+PD
// time-to-first-token on this machine's GPU (issue 6, `make gpu-bench`).
//
//	handoffbench -baton bin/gpu/baton -out out/gpu-bench/handoff.md
//
// It starts three `baton serve` processes on cuda:0 with preset large: E
// (--backend cuda_ipc), PD (accepting cuda_ipc) and the aggregated baseline,
// all with the CUDA encoder. Then, in this one run:
//
//   - device-to-device copy of 256 MiB in this process (CUDA events, median
//     of 20 after 3 warm-ups): the reference bandwidth;
//   - the cuda_ipc handoff of a 256 MiB entry (32 large images) from E, with
//     this process as the consumer: TransferEncoderCache (the claim and the
//     loan), cuIpcOpenMemHandle, the device-to-device copy out of the
//     mapping (CUDA events: the bandwidth compared with the reference),
//     close, and the loan given back; median of 5;
//   - an 8 MiB handoff (one large image) timed whole, RPC to loan given
//     back, p50 and p90 of 50;
//   - time to first token of one image and a prompt: E+PD (publish on E,
//     consume on PD over cuda_ipc, first token) against the aggregated
//     engine (one Generate with the image), p50 of 20 after 3 warm-ups.
//
// It prints a Markdown section and writes it to -out. Exit status 1 when a
// measurement failed; the bars (>= 80% of D2D, <= 1.25x TTFT) are reported,
// not enforced.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/baton-dev/baton/engine/xfer"
	"github.com/baton-dev/baton/gpu/cuda"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

func main() {
	bin := flag.String("baton", "bin/gpu/baton", "the baton binary")
	out := flag.String("out", "", "also write the Markdown section here")
	work := flag.String("work", "", "directory for ready files and logs (default: a temp dir)")
	flag.Parse()
	var buf bytes.Buffer
	err := run(&buf, *bin, *work)
	os.Stdout.Write(buf.Bytes())
	if *out != "" {
		_ = os.WriteFile(*out, buf.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "handoffbench:", err)
		os.Exit(1)
	}
}

type proc struct {
	name, addr string
	cmd        *exec.Cmd
	conn       *grpc.ClientConn
}

func start(bin, work, name string, args ...string) (*proc, error) {
	ready := filepath.Join(work, name+".ready")
	logf, err := os.Create(filepath.Join(work, name+".log"))
	if err != nil {
		return nil, err
	}
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--ready-file", ready, "--preset", "large", "--device", "cuda:0", "--log-level", "warn"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(90 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond) // polling the ready file the process writes
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("%s exited before ready: %v\n%s", name, err, tail(string(b)))
		case <-deadline:
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("%s not ready after 90 s", name)
		case <-tick.C:
		}
		b, err := os.ReadFile(ready)
		if err != nil {
			continue
		}
		addr := strings.TrimSpace(string(b))
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
		if err != nil {
			return nil, err
		}
		return &proc{name: name, addr: addr, cmd: cmd, conn: conn}, nil
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

func (p *proc) stop() {
	_ = p.conn.Close()
	_ = p.cmd.Process.Signal(os.Interrupt)
}

func run(w io.Writer, bin, work string) error {
	if work != "" {
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
	} else {
		d, err := os.MkdirTemp("", "handoffbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	ctx, err := cuda.Open(0)
	if err != nil {
		return fmt.Errorf("open cuda:0: %w", err)
	}
	defer ctx.Close()
	fmt.Fprintf(w, "## cuda_ipc handoff and E+PD time to first token (tools/gpu/handoffbench)\n\n")
	fmt.Fprintf(w, "Device %s (cc %s); four `baton serve` processes on cuda:0 (E over cuda_ipc, PD, aggregated, and E over tcp for the publish comparison), preset large, CUDA encoder fp32.\n\n", ctx.Info().Name, ctx.Info().ComputeCapability())

	e, err := start(bin, work, "encoder", "--role", "encoder", "--backend", "cuda_ipc", "--producer-quota-bytes", fmt.Sprint(2<<30))
	if err != nil {
		return err
	}
	defer e.stop()
	pd, err := start(bin, work, "pd", "--role", "pd", "--accept-backends", "cuda_ipc", "--consumer-quota-bytes", fmt.Sprint(2<<30), "--trusted-producers", e.addr) // CONTRACT SE-3
	if err != nil {
		return err
	}
	defer pd.stop()
	agg, err := start(bin, work, "aggregated", "--role", "aggregated")
	if err != nil {
		return err
	}
	defer agg.stop()
	etcp, err := start(bin, work, "encoder-tcp", "--role", "encoder", "--backend", "tcp")
	if err != nil {
		return err
	}
	defer etcp.stop()

	var errs []error
	d2d, err := d2dBandwidth(ctx, 256<<20)
	if err != nil {
		errs = append(errs, fmt.Errorf("D2D reference: %w", err))
	}
	big, err := handoffs(ctx, e, 32, 5)
	if err != nil {
		errs = append(errs, fmt.Errorf("256 MiB handoff: %w", err))
	}
	small, err := handoffs(ctx, e, 1, 50)
	if err != nil {
		errs = append(errs, fmt.Errorf("8 MiB handoff: %w", err))
	}
	fmt.Fprintf(w, "| copy (bytes copied) | median ms | TB/s | vs D2D |\n|---|---|---|---|\n")
	if d2d > 0 {
		fmt.Fprintf(w, "| device-to-device, 256 MiB, same process | %.4f | %.3f | 1.00 |\n", d2d*1e3, 256*(1<<20)/d2d/1e12)
	}
	if len(big) > 0 && d2d > 0 {
		c := median(col(big, func(h handoff) float64 { return h.copyS }))
		fmt.Fprintf(w, "| cuda_ipc handoff, 256 MiB entry (32 items): copy out of the mapping | %.4f | %.3f | %.2f |\n", c*1e3, float64(big[0].bytes)/c/1e12, d2d/c)
		whole := median(col(big, func(h handoff) float64 { return h.wholeS }))
		fmt.Fprintf(w, "| the same handoff whole (RPC claim + open + copy + close + loan back) | %.4f | %.3f | %.2f |\n", whole*1e3, float64(big[0].bytes)/whole/1e12, d2d/whole)
		fmt.Fprintf(w, "\nBar: the copy out of the mapping >= 0.80 of D2D. Parts of the 256 MiB handoff (median ms): RPC %.3f, open %.3f, copy %.3f, close %.3f, loan back %.3f.\n",
			1e3*median(col(big, func(h handoff) float64 { return h.rpcS })), 1e3*median(col(big, func(h handoff) float64 { return h.openS })),
			1e3*median(col(big, func(h handoff) float64 { return h.copyS })), 1e3*median(col(big, func(h handoff) float64 { return h.closeS })),
			1e3*median(col(big, func(h handoff) float64 { return h.backS })))
	}
	if len(small) > 0 {
		whole := col(small, func(h handoff) float64 { return h.wholeS })
		fmt.Fprintf(w, "\n8 MiB handoff (one large image; RPC claim + open + copy + sync + close + loan back), %d runs: p50 %.1f us, p90 %.1f us (open p50 %.1f us, RPC p50 %.1f us)\n",
			len(small), 1e6*median(whole), 1e6*quantile(whole, 0.9), 1e6*median(col(small, func(h handoff) float64 { return h.openS })), 1e6*median(col(small, func(h handoff) float64 { return h.rpcS })))
	}
	epd, aggT, pub, err := ttft(e, pd, agg, 20)
	if err != nil {
		errs = append(errs, fmt.Errorf("TTFT: %w", err))
	} else {
		tcpPub, err := publishTimes(etcp, 20)
		if err != nil {
			errs = append(errs, fmt.Errorf("tcp publish: %w", err))
		}
		stage, err := stageTimes(ctx, 8<<20, 20)
		if err != nil {
			errs = append(errs, fmt.Errorf("staging: %w", err))
		}
		fmt.Fprintf(w, "\n| time to first token, one 640x480 PNG + prompt | p50 ms | p90 ms |\n|---|---|---|\n")
		fmt.Fprintf(w, "| aggregated (CUDA encoder) | %.2f | %.2f |\n", 1e3*median(aggT), 1e3*quantile(aggT, 0.9))
		fmt.Fprintf(w, "| E+PD over cuda_ipc (publish on E, consume on PD) | %.2f | %.2f |\n", 1e3*median(epd), 1e3*quantile(epd, 0.9))
		fmt.Fprintf(w, "\nE+PD / aggregated (p50) = %.2fx (bar <= 1.25x). E+PD parts (p50): publish on E until EncoderReady %.2f ms, then consume on PD until its first token %.2f ms.\n",
			median(epd)/median(aggT), 1e3*median(pub), 1e3*(median(epd)-median(pub)))
		fmt.Fprintf(w, "For comparison: the same publish on a tcp producer (its tensors stay in host memory) p50 %.2f ms; in this process, staging 8 MiB into a fresh exported allocation (cuMemAlloc, upload from pageable memory, sync, cuIpcGetMemHandle) p50 %.2f ms.\n",
			1e3*median(tcpPub), 1e3*median(stage))
	}
	return errors.Join(errs...)
}

// d2dBandwidth times a device-to-device copy of n bytes (seconds, median).
func d2dBandwidth(ctx *cuda.Context, n int) (float64, error) {
	s, err := ctx.NewStream()
	if err != nil {
		return 0, err
	}
	defer s.Destroy()
	a, err := ctx.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer a.Free()
	b, err := ctx.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer b.Free()
	var times []float64
	for i := range 23 {
		t, err := timeCopy(ctx, s, b, a, n)
		if err != nil {
			return 0, err
		}
		if i >= 3 {
			times = append(times, t)
		}
	}
	return median(times), nil
}

// timeCopy copies n bytes from src to dst on s between two events; seconds.
func timeCopy(ctx *cuda.Context, s *cuda.Stream, dst, src *cuda.Buffer, n int) (float64, error) {
	start, err := ctx.NewEvent()
	if err != nil {
		return 0, err
	}
	defer start.Destroy()
	end, err := ctx.NewEvent()
	if err != nil {
		return 0, err
	}
	defer end.Destroy()
	if err := start.Record(s); err != nil {
		return 0, err
	}
	if err := s.CopyDtoD(dst, 0, src, 0, n); err != nil {
		return 0, err
	}
	if err := end.Record(s); err != nil {
		return 0, err
	}
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	ms, err := cuda.ElapsedMs(start, end)
	return ms / 1e3, err
}

type handoff struct {
	bytes                                     uint64
	rpcS, openS, copyS, closeS, backS, wholeS float64
}

func col(hs []handoff, f func(handoff) float64) []float64 {
	out := make([]float64, len(hs))
	for i, h := range hs {
		out[i] = f(h)
	}
	return out
}

// handoffs publishes runs entries of items large images on E and receives
// each as a cuda_ipc consumer: claim, open, copy (events), close, loan back.
// The first entry's embeddings are checked against a download of the copy
// (not all zero, no NaN) so the numbers are of a real transfer.
func handoffs(ctx *cuda.Context, e *proc, items, runs int) ([]handoff, error) {
	inf := pb.NewInferenceClient(e.conn)
	ctl := pb.NewControlClient(e.conn)
	s, err := ctx.NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Destroy()
	media := make([]*pb.MediaItem, items)
	for i := range media {
		media[i] = &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: noisePNG(448, 448, uint64(i))}}
	}
	var dst *cuda.Buffer
	defer func() {
		if dst != nil {
			_ = dst.Free()
		}
	}()
	var out []handoff
	for r := range runs + 2 { // 2 warm-ups
		ready, err := publish(inf, media)
		if err != nil {
			return nil, err
		}
		ref := ready.GetRef()
		var lengths []uint64
		var targets []*pb.MemoryRegion
		var total uint64
		for _, it := range ready.GetItems() {
			n := uint64(it.GetEmbeddingRows()) * 2048 * 4 // preset large: OutDim 2048, float32
			lengths = append(lengths, n)
			targets = append(targets, &pb.MemoryRegion{Address: total, Length: n, MemoryKind: "cuda"})
			total += n
		}
		if dst == nil {
			if dst, err = ctx.Alloc(int(total)); err != nil {
				return nil, err
			}
		}
		t0 := time.Now()
		resp, err := ctl.TransferEncoderCache(context.Background(), &pb.TransferEncoderCacheRequest{Ref: ref, TransferId: fmt.Sprint("bench-", r),
			ConsumerAgent: xfer.IPCPeer{Name: "handoffbench", Device: 0}.Marshal(), Targets: targets})
		if err != nil {
			return nil, fmt.Errorf("TransferEncoderCache: %w", err)
		}
		t1 := time.Now()
		loan, err := xfer.ParseIPCLoan(resp.GetTensorLayout(), lengths)
		if err != nil {
			return nil, err
		}
		m, err := ctx.OpenIPC(cuda.IPCHandle{Reserved: loan.Handle}, int(loan.Bytes))
		if err != nil {
			return nil, fmt.Errorf("open the loan: %w", err)
		}
		t2 := time.Now()
		copyS, err := timeCopy(ctx, s, dst, m, int(loan.Bytes))
		if err != nil {
			return nil, err
		}
		t3 := time.Now()
		if err := m.Free(); err != nil {
			return nil, fmt.Errorf("close the mapping: %w", err)
		}
		t4 := time.Now()
		ab, err := ctl.Abort(context.Background(), &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
		if err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
			return nil, fmt.Errorf("give the loan back: %v %v", ab.GetStatus(), err)
		}
		t5 := time.Now()
		if r == 0 {
			sample := make([]float32, 1<<16)
			if err := cuda.Download(s, sample, dst, 0); err != nil {
				return nil, err
			}
			nonzero := 0
			for _, v := range sample {
				if v != v {
					return nil, errors.New("the received embeddings hold NaN")
				}
				if v != 0 {
					nonzero++
				}
			}
			if nonzero == 0 {
				return nil, errors.New("the received embeddings are all zero")
			}
		}
		if r < 2 {
			continue
		}
		out = append(out, handoff{bytes: loan.Bytes, rpcS: t1.Sub(t0).Seconds(), openS: t2.Sub(t1).Seconds(), copyS: copyS,
			closeS: t4.Sub(t3).Seconds(), backS: t5.Sub(t4).Seconds(), wholeS: t5.Sub(t0).Seconds()})
	}
	return out, nil
}

func publish(inf pb.InferenceClient, media []*pb.MediaItem) (*pb.EncoderReady, error) {
	st, err := inf.Generate(context.Background(), &pb.GenerateRequest{Media: media, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
	if err != nil {
		return nil, err
	}
	var ready *pb.EncoderReady
	for {
		r, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		if x := r.GetEncoderReady(); x != nil {
			ready = x
		}
	}
	if ready == nil {
		return nil, errors.New("publish: no EncoderReady")
	}
	return ready, nil
}

// firstToken sends req to c and returns the time until the first token
// event, draining the rest of the stream.
func firstToken(c pb.InferenceClient, req *pb.GenerateRequest) (time.Duration, error) {
	t0 := time.Now()
	st, err := c.Generate(context.Background(), req)
	if err != nil {
		return 0, err
	}
	var first time.Duration
	for {
		r, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		if r.GetToken() != nil && first == 0 {
			first = time.Since(t0)
		}
		if e := r.GetError(); e != nil {
			return 0, fmt.Errorf("engine error: %v", e)
		}
	}
	if first == 0 {
		return 0, errors.New("no token")
	}
	return first, nil
}

// ttft measures time to first token, E+PD over cuda_ipc against the
// aggregated engine, n runs each after 3 warm-ups, interleaved.
func ttft(e, pd, agg *proc, n int) (epd, aggT, pub []float64, err error) {
	img := noisePNG(640, 480, 99)
	item := &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: img}}
	stop := &pb.StoppingOptions{MaxTokens: proto.Uint32(8)}
	prompt := &pb.GenerateRequest_Prompt{Prompt: "<image> Describe the image."}
	ei, pi, ai := pb.NewInferenceClient(e.conn), pb.NewInferenceClient(pd.conn), pb.NewInferenceClient(agg.conn)
	for r := range n + 3 {
		t0 := time.Now()
		ready, err := publish(ei, []*pb.MediaItem{item})
		if err != nil {
			return nil, nil, nil, err
		}
		pubD := time.Since(t0)
		rest, err := firstToken(pi, &pb.GenerateRequest{Input: prompt, Stopping: stop, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ready.GetRef()}}})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("consume on PD: %w", err)
		}
		a, err := firstToken(ai, &pb.GenerateRequest{Input: prompt, Stopping: stop, Media: []*pb.MediaItem{item}})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("aggregated: %w", err)
		}
		if r >= 3 {
			epd = append(epd, (pubD + rest).Seconds())
			aggT = append(aggT, a.Seconds())
			pub = append(pub, pubD.Seconds())
		}
	}
	return epd, aggT, pub, nil
}

// publishTimes times n publishes of one 640x480 image on e (after 3
// warm-ups), releasing each entry.
func publishTimes(e *proc, n int) ([]float64, error) {
	item := &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: noisePNG(640, 480, 99)}}
	inf, ctl := pb.NewInferenceClient(e.conn), pb.NewControlClient(e.conn)
	var out []float64
	for r := range n + 3 {
		t0 := time.Now()
		ready, err := publish(inf, []*pb.MediaItem{item})
		if err != nil {
			return nil, err
		}
		d := time.Since(t0)
		if _, err := ctl.Abort(context.Background(), &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ready.GetRef()}}); err != nil {
			return nil, err
		}
		if r >= 3 {
			out = append(out, d.Seconds())
		}
	}
	return out, nil
}

// stageTimes times what a cuda_ipc producer does per entry of n bytes:
// allocate, upload from pageable host memory, synchronize, export.
func stageTimes(ctx *cuda.Context, n, runs int) ([]float64, error) {
	s, err := ctx.NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Destroy()
	host := make([]byte, n)
	var out []float64
	for r := range runs + 3 {
		t0 := time.Now()
		b, err := ctx.Alloc(n)
		if err != nil {
			return nil, err
		}
		if err := cuda.Upload(s, b, 0, host); err != nil {
			return nil, err
		}
		if err := s.Synchronize(); err != nil {
			return nil, err
		}
		if _, err := ctx.ExportIPC(b); err != nil {
			return nil, err
		}
		d := time.Since(t0)
		if err := b.Free(); err != nil {
			return nil, err
		}
		if r >= 3 {
			out = append(out, d.Seconds())
		}
	}
	return out, nil
}

// noisePNG is a w x h PNG of seeded noise.
func noisePNG(w, h int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x6261746f6e))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(rng.Uint32()), uint8(rng.Uint32()), uint8(rng.Uint32()), 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

func median(x []float64) float64 { return quantile(x, 0.5) }

func quantile(x []float64, q float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}
