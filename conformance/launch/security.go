package launch

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/internal/devcert"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// security is what Options.Security generates at start: a CA, one
// certificate every engine serves and presents to its peers, the harness's
// client certificate and the operator's bearer token.
type security struct {
	ca              *devcert.CA
	engine, harness devcert.Leaf
	tokenFile       string
	token           string
}

func newSecurity(dir string) (*security, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	ca, err := devcert.NewCA(dir, "baton-launch")
	if err != nil {
		return nil, fmt.Errorf("launch: generate a CA: %w", err)
	}
	s := &security{ca: ca}
	if s.engine, err = ca.Issue("engine"); err != nil {
		return nil, fmt.Errorf("launch: engine certificate: %w", err)
	}
	if s.harness, err = ca.Issue("harness"); err != nil {
		return nil, fmt.Errorf("launch: harness certificate: %w", err)
	}
	if s.tokenFile, s.token, err = devcert.Token(dir, "operator"); err != nil {
		return nil, fmt.Errorf("launch: operator token: %w", err)
	}
	return s, nil
}

// serveArgs are the flags of every `baton serve` (none without Security):
// TLS with client authentication on every listener, a metrics listener,
// peers dialled over TLS, and the operator token.
func (s *security) serveArgs() []string {
	if s == nil {
		return nil
	}
	return []string{"--tls-cert", s.engine.CertFile, "--tls-key", s.engine.KeyFile, "--tls-client-ca", s.ca.CertFile,
		"--operator-token-file", s.tokenFile, "--metrics-listen", "127.0.0.1:0"}
}

// tlsSettings are the harness's: the CA and its own client certificate.
func (s *security) tlsSettings() *target.TLS {
	return &target.TLS{CAFile: s.ca.CertFile, CertFile: s.harness.CertFile, KeyFile: s.harness.KeyFile, ClientAuth: true}
}

// dialOptions reach an engine as the operator (none without Security).
func (s *security) dialOptions() []target.DialOption {
	if s == nil {
		return nil
	}
	return []target.DialOption{target.WithTLS(s.tlsSettings()), target.WithBearerToken(s.token)}
}

// declare puts the tls and authorization blocks into p, with the listeners
// of procs (role -> process); nothing without Security.
func (s *security) declare(p *target.Profile, procs map[target.Role]*Process) {
	if s == nil {
		return
	}
	t := s.tlsSettings()
	roles := make([]string, 0, len(procs))
	for r := range procs {
		roles = append(roles, string(r))
	}
	sort.Strings(roles)
	for _, r := range roles {
		proc := procs[target.Role(r)]
		kinds := make([]string, 0, len(proc.listeners))
		for k := range proc.listeners {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			t.Listeners = append(t.Listeners, target.Listener{Role: target.Role(r), Kind: k, Address: proc.listeners[k]})
		}
	}
	p.TLS = t
	p.Authorization = &target.Authorization{Operator: target.Credential{TokenFile: s.tokenFile}}
}

// listenersOf reads an engine's other listeners from its ServerInfo
// (extra "baton.listeners.<kind>").
func listenersOf(info *pb.ServerInfo) map[string]string {
	out := map[string]string{}
	for k, v := range info.GetExtra().GetFields() {
		if kind, ok := strings.CutPrefix(k, "baton.listeners."); ok && v.GetStringValue() != "" {
			out[kind] = v.GetStringValue()
		}
	}
	return out
}

// roleProcesses maps each role of the topology to its process.
func (t *Topology) roleProcesses() map[target.Role]*Process {
	out := map[target.Role]*Process{}
	for role, p := range map[target.Role]*Process{target.RoleProducer: t.Producer, target.RoleConsumer: t.Consumer,
		target.RolePrefill: t.Prefill, target.RoleDecode: t.Decode, target.RoleBaseline: t.Baseline} {
		if p != nil {
			out[role] = p
		}
	}
	return out
}
