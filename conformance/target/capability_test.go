package target

import (
	"context"
	"testing"
)

type refusingTarget struct{ Target }

func (refusingTarget) RefuseProducerConnections(context.Context) (func() error, error) {
	return func() error { return nil }, nil
}

type wrapped struct{ Target }

func (w wrapped) UnwrapTarget() Target { return w.Target }

// TestCapabilityLooksThroughWrappers: a capability of a wrapped target is
// found through its wrappers; one nobody offers is not.
func TestCapabilityLooksThroughWrappers(t *testing.T) {
	inner := refusingTarget{NewStatic(Profile{}, nil)}
	if _, ok := Capability[ConnectionRefuser](wrapped{wrapped{inner}}); !ok {
		t.Error("ConnectionRefuser of a target wrapped twice not found")
	}
	if _, ok := Capability[Restarter](wrapped{inner}); ok {
		t.Error("a Restarter found where none is offered")
	}
	if _, ok := Capability[ConnectionRefuser](nil); ok {
		t.Error("a capability found on nil")
	}
}
