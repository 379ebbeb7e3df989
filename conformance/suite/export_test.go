package suite

import (
	"testing"

	"github.com/baton-dev/baton/conformance/target"
)

// NewFakeTarget is the conforming fake (fake_engine_test.go) for the
// external tests of this package: a world serving roles (all four when
// nil: producer, consumer, consumer2, baseline) under profile p, decoding
// PNG and JPEG only when requiredFormatsOnly.
func NewFakeTarget(p target.Profile, roles []target.Role, requiredFormatsOnly bool) target.Target {
	w := newFakeWorld(fakeMutant{}, p.ProducerQuotaBytes)
	w.requiredFormatsOnly = requiredFormatsOnly
	if roles == nil {
		return w.target(p)
	}
	engines := map[target.Role]target.Engine{}
	for _, r := range roles {
		engines[r] = &fakeEngine{w, r}
	}
	return target.NewStatic(p, engines)
}

// RunRecorded runs c against tg as the suite's own tests do and returns
// its outcome and messages.
func RunRecorded(t *testing.T, c Case, tg target.Target) (Outcome, []string) {
	r := runCase(t, c, tg)
	return r.outcome(), r.msgs
}

// Concurrently is concurrently for the external tests.
func Concurrently[T any](jobs []func() T) []T { return concurrently(jobs) }

// FakeBackend and FakeEntryBytes describe the fake for profiles.
const (
	FakeBackend    = fakeBackend
	FakeEntryBytes = fakeEntryBytes
)
