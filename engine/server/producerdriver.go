package server

import (
	"github.com/baton-dev/baton/engine/cache/memory"
	"github.com/baton-dev/baton/engine/producer"
)

// producerDriver is the producer's tcp transfer driver (engine/producer)
// over this engine: its table, its lock, its agent, its memory store.
// consumerEnv (transfer.go) is the engine as both drivers see it
// (producer.Env has the same methods as consumer.Env).
func (e *Engine) producerDriver(store *memory.Store) *producer.Driver {
	return &producer.Driver{Table: e.table, Env: consumerEnv{e}, Agent: e.agent, Store: store, Log: e.log}
}
