package target

import (
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"
)

// FuzzParseConfig: the profile parser (a target.yaml the harness is given)
// never panics, and a profile it accepts names endpoints, claims a known
// level and marshals to YAML that it accepts again alike. The seeds (here,
// the example profile and testdata/fuzz/) run with `go test`; `make fuzz`
// fuzzes it for FUZZTIME.
func FuzzParseConfig(f *testing.F) {
	if raw, err := os.ReadFile(exampleProfile); err == nil {
		f.Add(raw)
	}
	f.Add([]byte("endpoints: {producer: 127.0.0.1:1}\nlevel: faults\ntls: {client_auth: true, cert_file: c.pem, key_file: k.pem, listeners: [{role: producer, kind: metrics, address: '127.0.0.1:9'}]}\nauthorization: {operator: {token_file: t}}\n"))
	f.Add([]byte("endpoints: {nobody: x}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("case_timeout: -1s\nendpoints: {producer: h:1}\n"))
	f.Add([]byte(launchProfile))
	f.Add([]byte(minimalProfile))
	f.Add([]byte("endpoints: {producer: a:1}\nfault_proxy: {listen: a:2}\n"))
	f.Add([]byte("endpoints: {producer: a:1}\nlaunch: {roles: {producer: {start: \"x ${ADDR} $${\"}}}\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseConfig(raw)
		if err != nil {
			return
		}
		if len(c.Endpoints) == 0 {
			t.Fatal("accepted a profile without endpoints")
		}
		if _, ok := c.ClaimedLevels(); !ok || c.CaseTimeout <= 0 {
			t.Fatalf("accepted level %q, case_timeout %v", c.Level, c.CaseTimeout)
		}
		again, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("marshal an accepted profile: %v", err)
		}
		c2, err := ParseConfig(again)
		if err != nil {
			t.Fatalf("an accepted profile marshals to one it refuses: %v\n%s", err, again)
		}
		if d := cmp.Diff(c, c2, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip changed the profile (-want +got):\n%s", d)
		}
	})
}

// FuzzParseListener: BATON_TLS_LISTENERS entries parse to what they print
// as, or fail with ErrBadTLS.
func FuzzParseListener(f *testing.F) {
	f.Add("producer/metrics=127.0.0.1:9090")
	f.Add("consumer/transfer=[::1]:7400")
	f.Add("x/y=z")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseListener(s)
		if err != nil {
			if !errors.Is(err, ErrBadTLS) {
				t.Fatalf("error %v does not wrap ErrBadTLS", err)
			}
			return
		}
		if again, err := ParseListener(l.String()); err != nil || again != l {
			t.Fatalf("%q parses to %+v, which prints as %q and parses to %+v, %v", s, l, l.String(), again, err)
		}
	})
}
