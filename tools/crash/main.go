// Command crash is baton's crash campaign (`make crash`, part of `make
// ci-long`): it kills real `baton serve` processes with SIGKILL at chosen
// points of the handoff's lifecycle, again and again, and checks what the
// contract promises about a configured peer's crash (CONTRACT SE-4: "Q-1..Q-4
// apply, ended by Q-6"):
//
//   - every survivor is READY again, with nothing quarantined, within
//     -hard-bound of the kill (the kill closes the victim's connections),
//     and, over the runs where a survivor had something to recover from
//     (not READY with nothing quarantined at the harness's first look),
//     the p99 of that time is within -target (a survivor already calm at
//     the first look recovered before it: its time is the look's own
//     latency, shown but not judged against the target);
//   - no answer differs from the aggregated baseline's (no byte of an
//     embedding was corrupted), during the crash window and after the
//     victim's restart;
//   - a restarted producer removes every orphaned instance directory of
//     the shared directory (checked only once the shared-directory
//     lock/orphan rule is in: sharedDirOrphanRuleMerged).
//
// Scenarios: E, PD over tcp (E+PD) and P, D over tcp (E+P+D) killed during
// a publish, during the claim (the consumer's transfer request just
// sent), during the WRITE (a moment later, while a multi-item entry
// streams) and after the reply; E and PD over the shared directory during
// a publish, during the claim (the consumer's rename) and after the
// reply; D has no claim or WRITE of its own. The kill's moment is drawn
// from -seed (timing is the machine's: the same seed draws the same
// delays, not the same interleaving). It prints SEED= first, one table
// row per scenario, and exits 1 on any violation (2 for a harness error).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// items is how many images one handoff carries: a multi-item entry makes
// the WRITE last long enough to be hit.
const items = 4

// points of the lifecycle a victim is killed at.
const (
	pointPublish = "publish"
	pointClaim   = "claim"
	pointWrite   = "write"
	pointAfter   = "after-reply"
)

// scenario is one victim at one point in one topology.
type scenario struct {
	topology string // "E+PD tcp", "E+P+D tcp", "E+PD shared_dir"
	victim   target.Role
	point    string
}

func scenarios() []scenario {
	var out []scenario
	all := []string{pointPublish, pointClaim, pointWrite, pointAfter}
	for _, v := range []target.Role{target.RoleProducer, target.RoleConsumer} {
		for _, p := range all {
			out = append(out, scenario{"E+PD tcp", v, p})
		}
	}
	for _, p := range all {
		out = append(out, scenario{"E+P+D tcp", target.RolePrefill, p})
	}
	for _, p := range []string{pointPublish, pointAfter} {
		out = append(out, scenario{"E+P+D tcp", target.RoleDecode, p})
	}
	for _, v := range []target.Role{target.RoleProducer, target.RoleConsumer} {
		for _, p := range []string{pointPublish, pointClaim, pointAfter} {
			out = append(out, scenario{"E+PD shared_dir", v, p})
		}
	}
	return out
}

// result is what the runs of one scenario found.
type result struct {
	sc         scenario
	runs       int
	answers    int             // OK answers compared with the baseline
	recovery   []time.Duration // kill -> every survivor seen calm, every run (includes the look's own latency)
	hitTimes   []time.Duration // the same, for the runs where a survivor was not calm at the first look
	hit        int             // runs after which a survivor was not yet READY with nothing quarantined: the kill left it something to recover from
	violations []string
	orphans    string
}

func main() {
	bin := flag.String("binary", "bin/baton", "the baton binary (make build)")
	runs := flag.Int("runs", 20, "kills per scenario")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the kills' moments")
	target2 := flag.Duration("target", 2*time.Second, "p99 bound on a survivor's return to READY after the kill")
	hard := flag.Duration("hard-bound", 10*time.Second, "bound on any one survivor's return to READY after the kill")
	only := flag.String("only", "", "run only the scenarios whose name matches this regexp")
	work := flag.String("work", "", "work directory (default: a temporary one, removed)")
	mutant := flag.String("mutant", "", "run every process as this conformance mutant (to show the campaign finds it)")
	verbose := flag.Bool("v", false, "print every run's survivors: looks until calm and the time")
	flag.Parse()
	fmt.Printf("SEED=%d\n", *seed)
	start := time.Now()
	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "baton-crash-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var filter *regexp.Regexp
	if *only != "" {
		filter = regexp.MustCompile(*only)
	}
	c := &campaign{bin: *bin, runs: *runs, rng: rand.New(rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15)), hard: *hard, work: dir, mutant: *mutant, verbose: *verbose}
	var results []*result
	for _, topo := range []string{"E+PD tcp", "E+P+D tcp", "E+PD shared_dir"} {
		var scs []scenario
		for _, sc := range scenarios() {
			if sc.topology == topo && (filter == nil || filter.MatchString(sc.name())) {
				scs = append(scs, sc)
			}
		}
		if len(scs) == 0 {
			continue
		}
		rs, err := c.runTopology(topo, scs)
		if err != nil {
			fatal(err)
		}
		results = append(results, rs...)
	}
	bad := report(results, *target2)
	fmt.Printf("wall time %.0f s for %d scenarios x %d runs (SEED=%d)\n", time.Since(start).Seconds(), len(results), *runs, *seed)
	if bad {
		fmt.Printf("FAILED: replay with -seed %d\n", *seed)
		os.Exit(1)
	}
	fmt.Println("PASSED")
}

func (sc scenario) name() string {
	return fmt.Sprintf("%s kill %s at %s", sc.topology, sc.victim, sc.point)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "crash: harness error:", err)
	os.Exit(2)
}

// campaign is the state shared by every topology.
type campaign struct {
	bin     string
	runs    int
	rng     *rand.Rand
	hard    time.Duration
	work    string
	mutant  string
	verbose bool
}

// topo is one running topology and what its handoffs must answer.
type topo struct {
	kind   string
	t      *launch.Topology
	live   *launch.LiveTarget
	prompt string
	media  []*pb.MediaItem
	want   []uint32 // the baseline's tokens
}

func (c *campaign) runTopology(kind string, scs []scenario) ([]*result, error) {
	ctx := context.Background()
	opts := launch.Options{Binary: c.bin, Preset: "tiny", WorkDir: filepath.Join(c.work, strings.NewReplacer(" ", "-", "+", "").Replace(kind)), ProducerQuotaBytes: 64 << 20, Backend: "tcp",
		ServeArgs: []string{"--log-level", "warn"}, Mutant: c.mutant}
	var lt *launch.Topology
	var err error
	switch kind {
	case "E+PD tcp":
		lt, err = launch.StartEPD(ctx, opts)
	case "E+P+D tcp":
		lt, err = launch.StartEPPD(ctx, opts)
	case "E+PD shared_dir":
		opts.Backend = "shared_dir"
		lt, err = launch.StartEPD(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", kind, err)
	}
	defer func() { _ = lt.Shutdown(context.Background(), 30*time.Second) }() // orphans of killed instances make S-4 fail here: not judged
	img, err := fixtures.ImageByName("video-001.png")
	if err != nil {
		return nil, err
	}
	tp := &topo{kind: kind, t: lt, live: lt.Target(), prompt: strings.TrimSpace(strings.Repeat("<image> ", items)) + " Describe."}
	for range items {
		tp.media = append(tp.media, &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: img.Data}, MimeType: "image/png"})
	}
	base, _ := tp.live.Engine(target.RoleBaseline)
	res, err := base.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: tp.prompt}, Media: tp.media, Stopping: stopping()})
	if err != nil || res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		return nil, fmt.Errorf("%s: baseline answer: %v %v", kind, res.Status, err)
	}
	tp.want = res.TokenIDs()
	if _, err := tp.handoff(ctx, nil); err != nil {
		return nil, fmt.Errorf("%s: first handoff: %w", kind, err)
	}
	var out []*result
	for _, sc := range scs {
		r := &result{sc: sc, orphans: "n/a"}
		for i := 0; i < c.runs; i++ {
			if err := c.once(ctx, tp, sc, r); err != nil {
				return nil, fmt.Errorf("%s run %d: %w", sc.name(), i, err)
			}
		}
		fmt.Printf("  %-40s %d runs, %d violations\n", sc.name(), r.runs, len(r.violations))
		out = append(out, r)
	}
	return out, nil
}

func stopping() *pb.StoppingOptions { return &pb.StoppingOptions{MaxTokens: proto.Uint32(8)} }

// signals a worker sends the kill trigger.
type signals struct {
	publishing, claiming, replied chan struct{}
}

func newSignals() *signals {
	return &signals{publishing: make(chan struct{}, 64), claiming: make(chan struct{}, 64), replied: make(chan struct{}, 64)}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// errNotOK is a handoff that did not end with tokens (expected while a
// process is down); what matters is that an OK answer is the baseline's.
var errNotOK = errors.New("no answer")

// handoff runs one publish and consume (E+PD) or publish, prefill and
// decode (E+P+D), and returns the tokens.
func (tp *topo) handoff(ctx context.Context, s *signals) ([]uint32, error) {
	prod, _ := tp.live.Engine(target.RoleProducer)
	if s != nil {
		notify(s.publishing)
	}
	pub, err := prod.Generate(ctx, &pb.GenerateRequest{Media: tp.media, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
	if err != nil || pub.EncoderReady() == nil {
		return nil, notOK("publish", pub, err)
	}
	consume := &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: tp.prompt}, Stopping: stopping(),
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: pub.EncoderReady().GetRef()}}}
	if s != nil {
		notify(s.claiming)
	}
	if tp.kind == "E+P+D tcp" {
		pre, _ := tp.live.Engine(target.RolePrefill)
		res, err := pre.Generate(ctx, consume)
		var ready *pb.PrefillReady
		for _, r := range res.Responses {
			if pr := r.GetPrefillReady(); pr != nil {
				ready = pr
			}
		}
		if err != nil || res.Code() != codes.OK || ready == nil {
			release(ctx, prod, pub.EncoderReady().GetRef())
			return nil, notOK("prefill", res, err)
		}
		dec, _ := tp.live.Engine(target.RoleDecode)
		out, err := dec.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: tp.prompt}, Stopping: stopping(),
			Kv: &pb.KvOptions{Session: ready.GetKvSession()}, DecodePreparation: ready.GetDecodePreparation()})
		if err != nil || out.Code() != codes.OK || len(out.TokenIDs()) == 0 {
			return nil, notOK("decode", out, err)
		}
		if s != nil {
			notify(s.replied)
		}
		return out.TokenIDs(), nil
	}
	cons, _ := tp.live.Engine(target.RoleConsumer)
	res, err := cons.Generate(ctx, consume)
	if err != nil || res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		release(ctx, prod, pub.EncoderReady().GetRef())
		return nil, notOK("consume", res, err)
	}
	if s != nil {
		notify(s.replied)
	}
	return res.TokenIDs(), nil
}

// release gives back a published entry whose consume failed, as a client
// does (Abort(encoder_cache), CONTRACT SU-3; ALREADY_FINISHED if the
// consumer had claimed it), so the entries of the crash window's failed
// handoffs do not hold the producer's L-5 quota until their TTL and make
// the handoffs after the restart RESOURCE_EXHAUSTED. Best effort, on a
// context of its own (the run's may be ending).
func release(ctx context.Context, prod target.Engine, ref *pb.EncoderCacheRef) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_, _ = prod.Abort(actx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
}

// notOK is errNotOK saying which step of a handoff answered what: the
// call's error, else its status and how many tokens it gave.
func notOK(step string, res *target.GenerateResult, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: %v", errNotOK, step, err)
	case res == nil || res.Status == nil:
		return fmt.Errorf("%w: %s: no status", errNotOK, step)
	}
	return fmt.Errorf("%w: %s: %s %q, %d tokens", errNotOK, step, res.Code(), res.Status.Message(), len(res.TokenIDs()))
}

// once is one kill: handoffs run in workers, the victim is killed at the
// scenario's point, survivors must come back, the victim is restarted and
// a handoff must answer as the baseline.
func (c *campaign) once(ctx context.Context, tp *topo, sc scenario, r *result) error {
	r.runs++
	wctx, stop := context.WithCancel(ctx)
	s := newSignals()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var answers [][]uint32
	for range 3 {
		wg.Go(func() {
			for wctx.Err() == nil {
				toks, err := tp.handoff(wctx, s)
				if err != nil {
					time.Sleep(10 * time.Millisecond) // a client backing off while a peer is down
					continue
				}
				mu.Lock()
				answers = append(answers, toks)
				mu.Unlock()
			}
		})
	}
	var delay time.Duration
	var trigger chan struct{}
	switch sc.point {
	case pointPublish:
		trigger, delay = s.publishing, time.Duration(c.rng.IntN(20))*time.Millisecond
	case pointClaim:
		trigger, delay = s.claiming, time.Duration(c.rng.IntN(1500))*time.Microsecond
	case pointWrite:
		trigger, delay = s.claiming, time.Millisecond+time.Duration(c.rng.IntN(6000))*time.Microsecond
	case pointAfter:
		trigger = s.replied
	}
	select {
	case <-trigger:
	case <-time.After(30 * time.Second):
		stop()
		wg.Wait()
		return fmt.Errorf("no handoff reached the %s point within 30 s", sc.point)
	}
	time.Sleep(delay) // the kill's moment, drawn from the seed
	killed := time.Now()
	oldInstance, err := tp.t.Crash(sc.victim)
	if err != nil {
		stop()
		wg.Wait()
		return err
	}
	// Survivors: every role but the victim, READY with nothing quarantined.
	var survivors []target.Role
	for _, role := range []target.Role{target.RoleProducer, target.RoleConsumer, target.RolePrefill, target.RoleDecode, target.RoleBaseline} {
		if _, ok := tp.live.Engine(role); ok && role != sc.victim {
			survivors = append(survivors, role)
		}
	}
	var worst time.Duration
	hit := false
	for _, role := range survivors {
		e, _ := tp.live.Engine(role)
		d, why, waited := c.waitCalm(ctx, e, killed)
		if waited {
			hit = true
		}
		if c.verbose {
			fmt.Printf("    run %d: survivor %-9s calm after %7.1f ms (first look calm: %t)\n", r.runs, role, ms(d), !waited)
		}
		if why != "" {
			r.violations = append(r.violations, fmt.Sprintf("%s: survivor %s %s", sc.name(), role, why))
		}
		worst = max(worst, d)
	}
	r.recovery = append(r.recovery, worst)
	if hit {
		r.hit++
		r.hitTimes = append(r.hitTimes, worst)
	}
	stop()
	wg.Wait()
	for _, toks := range answers {
		r.answers++
		if !slices.Equal(toks, tp.want) {
			r.violations = append(r.violations, fmt.Sprintf("%s: an answer during the crash window differs from the baseline (%d tokens vs %d)", sc.name(), len(toks), len(tp.want)))
		}
	}
	if err := tp.live.Restart(ctx, sc.victim); err != nil {
		return fmt.Errorf("restart %s: %w", sc.victim, err)
	}
	if tp.kind == "E+PD shared_dir" && sc.victim == target.RoleProducer {
		orphan := filepath.Join(tp.t.CacheDir, oldInstance)
		_, statErr := os.Stat(orphan)
		switch {
		case statErr == nil:
			r.violations = append(r.violations, fmt.Sprintf("%s: the restarted producer left the orphaned instance directory %s", sc.name(), oldInstance))
			r.orphans = "LEFT"
		default:
			if r.orphans != "LEFT" {
				r.orphans = "removed"
			}
		}
	}
	// After the restart a handoff answers as the baseline (retried while a
	// peer reconnects: UNAVAILABLE is retryable).
	deadline := time.Now().Add(c.hard)
	for attempts := 1; ; attempts++ {
		toks, err := tp.handoff(ctx, nil)
		if err == nil {
			r.answers++
			if !slices.Equal(toks, tp.want) {
				r.violations = append(r.violations, fmt.Sprintf("%s: the answer after the restart differs from the baseline", sc.name()))
			}
			break
		}
		if time.Now().After(deadline) {
			r.violations = append(r.violations, fmt.Sprintf("%s: no handoff succeeded within %v of the victim's restart (%d attempts; the last: %v)", sc.name(), c.hard, attempts, err))
			break
		}
		time.Sleep(50 * time.Millisecond) // a client's retry of a retryable answer
	}
	return nil
}

// waitCalm polls e until it is READY with nothing quarantined; it returns
// the time since the kill, past the hard bound why not, and whether the
// first look found it not yet calm.
func (c *campaign) waitCalm(ctx context.Context, e target.Engine, since time.Time) (time.Duration, string, bool) {
	for first := true; ; first = false {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := e.Health(hctx)
		load, lerr := e.GetLoad(hctx)
		cancel()
		q := load.GetAttributes().GetFields()["encoder.quarantine.buffers"].GetNumberValue()
		if err == nil && lerr == nil && h.GetState() == pb.HealthState_HEALTH_STATE_READY && q == 0 {
			return time.Since(since), "", !first
		}
		if time.Since(since) > c.hard {
			return time.Since(since), fmt.Sprintf("not READY with nothing quarantined %v after the kill (Health %v, quarantine.buffers %g, %v)", c.hard, h.GetState(), q, err), true
		}
		time.Sleep(5 * time.Millisecond) // polling another process's health
	}
}

// report prints the table and reports whether any run violated a rule.
func report(results []*result, p99Target time.Duration) bool {
	bad := false
	quantile := func(ds []time.Duration, q float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(q*float64(len(ds))))]
	}
	fmt.Printf("\n%-16s %-9s %-12s %5s %8s %5s %11s %9s %9s %9s %-16s %s\n", "topology", "victim", "point", "runs", "answers", "hit", "hit p99 ms", "p50 ms", "p99 ms", "max ms", "orphan dirs", "verdict")
	for _, r := range results {
		hitP99 := quantile(r.hitTimes, 0.99)
		if hitP99 > p99Target {
			r.violations = append(r.violations, fmt.Sprintf("%s: p99 return to READY %v over the %v target", r.sc.name(), hitP99, p99Target))
		}
		verdict := "ok"
		if len(r.violations) > 0 {
			verdict, bad = fmt.Sprintf("%d VIOLATIONS", len(r.violations)), true
		}
		hitCell := "-"
		if len(r.hitTimes) > 0 {
			hitCell = fmt.Sprintf("%.1f", ms(hitP99))
		}
		fmt.Printf("%-16s %-9s %-12s %5d %8d %5d %11s %9.1f %9.1f %9.1f %-16s %s\n", r.sc.topology, r.sc.victim, r.sc.point, r.runs, r.answers, r.hit, hitCell,
			ms(quantile(r.recovery, 0.5)), ms(quantile(r.recovery, 0.99)), ms(quantile(r.recovery, 1)), r.orphans, verdict)
	}
	fmt.Printf("(hit: runs after which a survivor was not READY with nothing quarantined at the harness's first look; hit p99 is judged against the %v target. p50/p99/max: kill -> every survivor seen calm, every run, the look's own latency included; the kill closes the victim's connections)\n", p99Target)
	for _, r := range results {
		for _, v := range r.violations {
			fmt.Println("VIOLATION", v)
		}
	}
	return bad
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
