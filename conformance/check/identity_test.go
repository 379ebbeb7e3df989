package check

import (
	"context"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/server"
)

// TestIdentities: every endpoint's engine name, preset and model are
// recorded by role; an endpoint that does not answer keeps its role.
func TestIdentities(t *testing.T) {
	prod := serve(t, server.Config{Role: server.RoleEncoder, CacheDir: t.TempDir()})
	dead, err := target.DialEngine("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	tg := target.NewStatic(target.Profile{Name: "ids"}, map[target.Role]target.Engine{target.RoleProducer: prod, target.RoleConsumer: dead})
	ids := Identities(context.Background(), tg)
	if len(ids) != 2 || ids[0].Role != "producer" || ids[1].Role != "consumer" {
		t.Fatalf("identities %+v; want producer then consumer", ids)
	}
	if ids[0].EngineName == "" || ids[0].Preset != "tiny" || ids[0].Model == "" || ids[0].Address == "" {
		t.Errorf("producer identity %+v; want engine name, preset tiny, model and address", ids[0])
	}
	if ids[1].EngineName != "" || ids[1].Address != "127.0.0.1:1" {
		t.Errorf("unreachable consumer identity %+v; want only its role and address", ids[1])
	}
}
