package inprocess_test

import (
	"testing"

	"github.com/baton-dev/baton/conformance"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/inprocess"
)

// TestCoreSuiteInProcess runs every Core case as a subtest against the
// reference engine started in this process: the way an engine embeds the
// suite in its own tests (conformance.Run).
func TestCoreSuiteInProcess(t *testing.T) {
	conformance.Run(t, func() (target.Target, func(), error) {
		tg, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: t.TempDir()})
		if err != nil {
			return nil, nil, err
		}
		return tg, func() {
			if err := stop(); err != nil {
				t.Errorf("S-4 drain: %v", err)
			}
		}, nil
	})
}
