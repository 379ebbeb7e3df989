package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestExitBeforeListeningPortTaken: a role that exits before listening
// because its reserved port was taken is errPortTaken, which startAll
// answers by starting the topology again on fresh ports (a make test run
// on 2 loaded cores once lost a PD's transfer port to another test between
// the reservation and the bind); any other early exit is not, and stays
// the launch's error.
func TestExitBeforeListeningPortTaken(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		taken        bool
	}{
		{"port taken", "echo 'baton: server: start the tcp transfer agent: listen tcp 127.0.0.1:43853: bind: address already in use' >&2; exit 4", true},
		{"other failure", "echo 'baton: --preset: unknown preset' >&2; exit 2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "fake-baton")
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			tp := &Topology{opts: Options{Binary: bin, Preset: "tiny", WorkDir: dir, StartTimeout: time.Minute}, ports: map[string]rolePorts{"pd": {transfer: 43853}}}
			_, err := tp.startAs(context.Background(), "pd", "")
			if err == nil {
				t.Fatal("startAs = nil; want the early exit")
			}
			if got := errors.Is(err, errPortTaken); got != tc.taken {
				t.Errorf("startAs = %v; errors.Is(err, errPortTaken) = %v, want %v", err, got, tc.taken)
			}
		})
	}
}
