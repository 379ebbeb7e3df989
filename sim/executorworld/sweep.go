package executorworld

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"

	"github.com/baton-dev/baton/sim"
)

// Summary is the outcome of sweeping a seed range of the executor world.
type Summary struct {
	// From and To are the range (inclusive); Runs the seeds run.
	From, To uint64
	Runs     int
	// Failures are the failing seeds with the lowest numbers (at most
	// sim.DefaultKeepFailures), in seed order; FailuresOmitted the others;
	// Failed is every failing seed.
	Failures        []Result
	FailuresOmitted int
	Failed          int
	// Steps is the scheduler steps summed over the runs with cancellations.
	Steps int64
	// Sampled is the passing seeds whose run with cancellations ran a
	// second time (DeterminismSampled); Diverged how many of them gave two
	// different outcomes, Divergences the first few with both (Outcome).
	Sampled     int
	Diverged    int
	Divergences []Divergence
}

// Divergence is a sampled executor seed whose two runs differed.
type Divergence struct {
	Seed          uint64
	First, Second []byte
}

// Sweep runs the executor world on seeds from..to with mutation
// m, in one goroutine; memory is independent of the range's length.
// progress, if set, is called after each seed.
func Sweep(from, to uint64, m Mutation, progress func(Result)) Summary {
	s := Summary{From: from, To: to}
	for seed := from; seed <= to; seed++ {
		r := RunSeed(seed, m)
		s.Runs++
		s.Steps += int64(r.Steps)
		if r.Err != nil {
			s.Failed++
			if len(s.Failures) < sim.DefaultKeepFailures {
				s.Failures = append(s.Failures, r)
			}
		} else if sim.DeterminismSampled(seed) {
			s.Sampled++
			a, b := Outcome(seed, m), Outcome(seed, m)
			if !bytes.Equal(a, b) {
				s.Diverged++
				if len(s.Divergences) < sim.MaxDivergences {
					s.Divergences = append(s.Divergences, Divergence{Seed: seed, First: a, Second: b})
				}
			}
		}
		if progress != nil {
			progress(r)
		}
		if seed == to {
			break
		}
	}
	s.FailuresOmitted = s.Failed - len(s.Failures)
	return s
}

// Outcome renders what seed's run with cancellations produced, the
// executor world's stand-in for a trace: the steps taken, the error, and
// every finished request's tokens in request order, one line each.
func Outcome(seed uint64, m Mutation) []byte {
	run := runExecutorWorld(seed, DrawSettings(seed), m, true)
	var b []byte
	b = fmt.Appendf(b, "seed=%d steps=%d err=%v\n", seed, run.steps, run.err)
	ids := make([]string, 0, len(run.tokens))
	for id := range run.tokens {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		b = append(b, id...)
		for _, t := range run.tokens[id] {
			b = append(b, ' ')
			b = strconv.AppendUint(b, t, 16)
		}
		b = append(b, '\n')
	}
	return b
}

// WriteDivergence writes d's two outcomes (Outcome: the executor world's
// traces) to dir/executor-seed-<N>.run1.txt and
// dir/executor-seed-<N>.run2.txt and returns the paths.
func WriteDivergence(dir string, d Divergence) ([2]string, error) {
	return sim.WriteRunPair(dir, fmt.Sprintf("executor-seed-%d", d.Seed), "txt", d.First, d.Second)
}
