package props_test

import (
	"testing"

	"github.com/baton-dev/baton/conformance/props"
	"github.com/baton-dev/baton/engine/server"
	"pgregory.net/rapid"
)

func TestTimingMedia(t *testing.T) {
	tg, stop := startEPD(t, server.Hooks{})
	defer stop()
	rapid.Check(t, props.Handoff(props.Shared(tg), props.Config{}))
}
