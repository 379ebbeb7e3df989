package check

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/server"
	"github.com/baton-dev/baton/reports"
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

// TestModelsDiffer: a producer and a consumer on one model and preset (or
// one that did not say) compare; two implementations on their own models
// do not, and the reason names both; P stands in for a missing consumer.
func TestModelsDiffer(t *testing.T) {
	goE := reports.EngineIdentity{Role: "producer", EngineName: "baton", Model: "baton/toy-vlm", Preset: "tiny"}
	goPD := reports.EngineIdentity{Role: "consumer", EngineName: "baton", Model: "baton/toy-vlm", Preset: "tiny"}
	pyPD := reports.EngineIdentity{Role: "consumer", EngineName: "baton-py-engine", Model: "baton-py/toy-vlm-1", Preset: "py-tiny"}
	pyP := pyPD
	pyP.Role = "prefill"
	silent := reports.EngineIdentity{Role: "consumer"}
	for _, tc := range []struct {
		name string
		ids  []reports.EngineIdentity
		want bool
	}{
		{"one implementation", []reports.EngineIdentity{goE, goPD}, false},
		{"mixed pair", []reports.EngineIdentity{goE, pyPD}, true},
		{"mixed E+P+D", []reports.EngineIdentity{goE, pyP}, true},
		{"consumer did not answer", []reports.EngineIdentity{goE, silent}, false},
		{"no consumer", []reports.EngineIdentity{goE}, false},
	} {
		got := ModelsDiffer(tc.ids)
		if (got != "") != tc.want {
			t.Errorf("%s: ModelsDiffer = %q; want a reason: %v", tc.name, got, tc.want)
		}
		if tc.want && (!strings.Contains(got, "baton-py-engine") || !strings.Contains(got, "py-tiny") || !strings.Contains(got, `"tiny"`)) {
			t.Errorf("%s: reason %q does not name both implementations and presets", tc.name, got)
		}
	}
}
