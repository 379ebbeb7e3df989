package producer

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// Release removes a live entry's storage (Abort(encoder_cache), or a
// publish whose EncoderReady never reached its client, C-7): the core
// decides (Table.Release, SU-3); the producer's removal and a consumer's
// claim race by atomic rename, and exactly one wins (SU-1, SU-3:
// FinishRemoval's outcome). A release of an entry whose removal (an
// earlier release, its expiry, the drain) is still in flight waits,
// without the lock, until that removal ended and then decides again
// (handoff.ReleaseWait): until then a consumer may still claim the entry,
// or the removal may fail, so ALREADY_FINISHED would not be true yet
// (found by the simulator, seeds 576264 and 954255). ctx bounds the wait;
// its error is the answer then. Errors: handoff.ErrCleanupFailed (X-1:
// this removal or an earlier one failed; UNAVAILABLE), ctx's.
func (d *Driver) Release(ctx context.Context, id string) (handoff.ReleaseOutcome, error) {
	d.Env.Lock()
	decision := d.Table.Release(id)
	for decision == handoff.ReleaseWait {
		ended, hook := d.Env.RemovalEndLocked()
		d.Env.Unlock()
		if hook != nil {
			hook(id)
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return 0, fmt.Errorf("server: release of entry %s waited for its removal in flight: %w", id, ctx.Err())
		}
		d.Env.Lock()
		decision = d.Table.Release(id)
	}
	if decision == handoff.ReleaseCleanupFailed {
		d.Env.Unlock()
		return 0, fmt.Errorf("%w: X-1 the removal of entry %s failed earlier; its storage may still be there", handoff.ErrCleanupFailed, id)
	}
	if decision != handoff.ReleaseRemove {
		d.Env.Unlock()
		return decision, nil
	}
	d.Env.RemovalsStartedLocked(1)
	d.Env.Unlock()
	out, err := d.FinishRemoval(id, false)
	if d.ReleaseAnswersFromTable && err == nil {
		// The SU-3 race mutant: the table listed the entry as published,
		// so the answer is ABORTED whoever won the removal.
		return handoff.ReleaseAborted, nil
	}
	return out, err
}
