package sim

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
)

// ExecutorSummary is the outcome of sweeping a seed range of the executor world.
type ExecutorSummary struct {
	// From and To are the range (inclusive); Runs the seeds run.
	From, To uint64
	Runs     int
	// Failures are the failing seeds with the lowest numbers (at most
	// DefaultKeepFailures), in seed order; FailuresOmitted the others;
	// Failed is every failing seed.
	Failures        []ExecutorResult
	FailuresOmitted int
	Failed          int
	// Steps is the scheduler steps summed over the runs with cancellations.
	Steps int64
	// Sampled is the passing seeds whose run with cancellations ran a
	// second time (DeterminismSampled); Diverged how many of them gave two
	// different outcomes, Divergences the first few with both (ExecutorOutcome).
	Sampled     int
	Diverged    int
	Divergences []ExecutorDivergence
}

// ExecutorDivergence is a sampled executor seed whose two runs differed.
type ExecutorDivergence struct {
	Seed          uint64
	First, Second []byte
}

// SweepExecutor runs the executor world on seeds from..to with mutation
// m, in one goroutine; memory is independent of the range's length.
// progress, if set, is called after each seed.
func SweepExecutor(from, to uint64, m ExecutorMutation, progress func(ExecutorResult)) ExecutorSummary {
	s := ExecutorSummary{From: from, To: to}
	for seed := from; seed <= to; seed++ {
		r := RunExecutorSeed(seed, m)
		s.Runs++
		s.Steps += int64(r.Steps)
		if r.Err != nil {
			s.Failed++
			if len(s.Failures) < DefaultKeepFailures {
				s.Failures = append(s.Failures, r)
			}
		} else if DeterminismSampled(seed) {
			s.Sampled++
			a, b := ExecutorOutcome(seed, m), ExecutorOutcome(seed, m)
			if !bytes.Equal(a, b) {
				s.Diverged++
				if len(s.Divergences) < maxDivergences {
					s.Divergences = append(s.Divergences, ExecutorDivergence{Seed: seed, First: a, Second: b})
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

// ExecutorOutcome renders what seed's run with cancellations produced, the
// executor world's stand-in for a trace: the steps taken, the error, and
// every finished request's tokens in request order, one line each.
func ExecutorOutcome(seed uint64, m ExecutorMutation) []byte {
	run := runExecutorWorld(seed, DrawExecutorSettings(seed), m, true)
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
