package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
)

// gatedRemovalFS is the real disk whose producer removal (the rename of an
// entry to its .claimed- name, shareddir.Dir.Remove) waits, while armed, until
// the test lets it go on: entered names the entry file, proceed gives the
// rename's result (nil: do the rename; an error: fail it, X-1).
type gatedRemovalFS struct {
	shareddir.OSFS
	armed   atomic.Bool
	entered chan string
	proceed chan error
}

func (g *gatedRemovalFS) Rename(oldpath, newpath string) error {
	if strings.HasPrefix(filepath.Base(newpath), ".claimed-") && g.armed.CompareAndSwap(true, false) {
		g.entered <- oldpath
		if err := <-g.proceed; err != nil {
			return err
		}
	}
	return g.OSFS.Rename(oldpath, newpath)
}

// TestAbortDuringRemovalWaitsForIt covers SU-2 and SU-3 under a race: an
// Abort(encoder_cache) that arrives while an earlier Abort's removal of the
// same entry is still in flight does not answer ALREADY_FINISHED at once
// (a consumer may still claim the entry before the producer's rename, or
// the removal may fail and leave it claimable, X-1): it waits, without
// holding the engine's lock, until the removal ended, then answers
// as the removal decided: ALREADY_FINISHED when a consumer's claim won,
// UNAVAILABLE when the removal failed. Found by the simulator
// (seeds 576264 and 954255).
func TestAbortDuringRemovalWaitsForIt(t *testing.T) {
	cases := []struct {
		name string
		// end makes the in-flight removal end: entryFile is the entry's
		// path; it returns the result of the producer's rename.
		end  func(t *testing.T, entryFile string) error
		want codes.Code
		// wantStatus is the Abort status when want is OK.
		wantStatus pb.AbortStatus
	}{
		{"SU-3 a consumer claims the entry before the producer's rename", func(t *testing.T, entryFile string) error {
			if err := os.Rename(entryFile, entryFile+".taken-by-consumer"); err != nil {
				t.Fatal(err)
			}
			return nil
		}, codes.OK, pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED},
		{"X-1 the producer's removal fails", func(*testing.T, string) error {
			return errors.New("injected EIO")
		}, codes.Unavailable, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := &gatedRemovalFS{entered: make(chan string, 1), proceed: make(chan error, 1)}
			srv, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: t.TempDir(), FS: fsys})
			t.Cleanup(func() { // a failed check must not leave the removal blocked for the drain
				fsys.armed.Store(false)
				select {
				case fsys.proceed <- nil:
				default:
				}
			})
			waiting := make(chan string, 4)
			srv.Engine.mu.Lock()
			srv.Engine.releaseWaiting = func(id string) { waiting <- id }
			srv.Engine.mu.Unlock()
			ctx := context.Background()
			res, err := producer.Generate(ctx, publishReq(t))
			if err != nil || res.Code() != codes.OK || res.EncoderReady() == nil {
				t.Fatalf("publish = %v, %v; want OK", res, err)
			}
			abort := &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: res.EncoderReady().GetRef()}}
			type answer struct {
				resp *pb.AbortResponse
				err  error
			}
			call := func() chan answer {
				ch := make(chan answer, 1)
				go func() {
					resp, err := producer.Abort(ctx, abort)
					ch <- answer{resp, err}
				}()
				return ch
			}
			fsys.armed.Store(true)
			first := call()
			entryFile := <-fsys.entered // the first Abort's removal is in flight
			second := call()
			select {
			case a := <-second:
				t.Fatalf("second Abort answered %v, %v while the first one's removal was in flight; want it to wait for the removal's outcome (the entry may still be claimed)", a.resp.GetStatus(), a.err)
			case <-waiting:
			}
			fsys.proceed <- c.end(t, entryFile)
			for i, ch := range []chan answer{first, second} {
				a := <-ch
				if code := statusCode(a.err); code != c.want || (c.want == codes.OK && a.resp.GetStatus() != c.wantStatus) {
					t.Errorf("Abort %d = %v, %v; want %v %v", i+1, a.resp.GetStatus(), a.err, c.want, c.wantStatus)
				}
			}
			if c.want == codes.Unavailable {
				if resp, err := producer.Abort(ctx, abort); statusCode(err) != codes.Unavailable {
					t.Errorf("Abort after the failed removal = %v, %v; want UNAVAILABLE (X-1)", resp.GetStatus(), err)
				}
			}
		})
	}
}
