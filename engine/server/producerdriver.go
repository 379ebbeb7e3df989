package server

import (
	"fmt"

	"github.com/baton-dev/baton/engine/cache/cudaipc"
	"github.com/baton-dev/baton/engine/cache/memory"
	"github.com/baton-dev/baton/engine/producer"
)

// producerDriver is the producer's driver (engine/producer) over this
// engine: its table, its lock, its agent, its store (and the tcp
// backend's memory store, the cuda_ipc backend's loans), the X-2 and
// SU-3 race mutants' switches.
func (e *Engine) producerDriver() *producer.Driver {
	sources, _ := e.store.(*memory.Store)
	loans, _ := e.store.(*cudaipc.Store)
	return &producer.Driver{Table: e.table, Env: producerEnv{consumerEnv{e}}, Agent: e.agent, Store: sources, Loans: loans, Entries: e.store,
		Log: e.log, CollectorTrustsTable: e.cfg.Hooks.CollectorTrustsTable, ReleaseAnswersFromTable: e.cfg.Hooks.ReleaseAnswersFromTable}
}

// producerEnv is the engine as engine/producer's driver sees it
// (producer.Env): what the consumer's driver sees (consumerEnv,
// transfer.go) and the end of an entry's removal.
type producerEnv struct{ consumerEnv }

// RemovalEndedLocked: the removal of id ended with err. Call with e.mu
// held, in the critical section that reports the end to the table.
func (p producerEnv) RemovalEndedLocked(id string, err error) error {
	e := p.e
	if e.failRemoval[id] {
		// Test hook baton.cleanup_fail: the removal took effect, yet it is
		// reported as failed, once, so the X-1 path runs (sticky NOT_READY).
		delete(e.failRemoval, id)
		if err == nil {
			err = fmt.Errorf("injected by test hook %s", HookCleanupFail)
		}
	}
	e.cleanups--
	e.removalEndedSignalLocked() // releases waiting on this removal decide again
	return err
}

// RemovalsStartedLocked counts n removals in flight. Call with e.mu held.
func (p producerEnv) RemovalsStartedLocked(n int) { p.e.cleanups += n }

// RemovalEndLocked: the channel the next removal's end closes, and the
// test hook a waiting release calls (releaseWaiting). Call with e.mu held.
func (p producerEnv) RemovalEndLocked() (<-chan struct{}, func(id string)) {
	return p.e.removalEndedLocked(), p.e.releaseWaiting
}
