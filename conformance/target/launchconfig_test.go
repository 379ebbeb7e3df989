package target

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"
)

const launchProfile = `
name: launched
endpoints: {producer: 127.0.0.1:7101, consumer: 127.0.0.1:7102, baseline: 127.0.0.1:7103}
fault_proxy: {listen: 127.0.0.1:7199, producer_control: 127.0.0.1:7101}
launch:
  adopt: true
  start_timeout: 30s
  env: {RUST_LOG: info}
  roles:
    producer:
      start: [bin/baton, serve, --role, encoder, --listen, "${ADDR}", --cache-dir, "${CACHE_DIR}", --advertise-control, "${FAULT_PROXY}"]
    consumer:
      start: "exec bin/baton serve --role pd --listen ${HOST}:${PORT} --cache-dir ${CACHE_DIR} # $${literal} $HOME"
      stop: [kill, "-TERM", "${START}"]
      ready: "grpc_health_probe -addr=${ENDPOINT_CONSUMER}"
      env: {CACHE: "${INSTANCE_DIR}"}
`

// TestParseLaunchSection: both command forms, the variables, the fault
// proxy mapping and the defaults parse; Restarts and FaultProxy follow.
func TestParseLaunchSection(t *testing.T) {
	c, err := ParseConfig([]byte(launchProfile))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Restarts || !c.FaultProxy || c.FaultProxyAt == nil || c.FaultProxyAt.Listen != "127.0.0.1:7199" || !c.HarnessRunsFaultProxy() {
		t.Errorf("profile = %+v, fault proxy %+v; want restarts and the proxy at 127.0.0.1:7199", c.Profile, c.FaultProxyAt)
	}
	p := c.Launch.Roles[RoleProducer]
	if len(p.Start.Argv) != 10 || p.Start.Argv[5] != "${ADDR}" || p.Start.Shell != "" {
		t.Errorf("producer start = %+v; want the argv list as written", p.Start)
	}
	cons := c.Launch.Roles[RoleConsumer]
	if !strings.HasPrefix(cons.Start.Shell, "exec bin/baton serve") || cons.Ready.Shell == "" || len(cons.Stop.Argv) != 3 {
		t.Errorf("consumer = %+v; want a shell start, an argv stop and a ready command", cons)
	}
	got, err := expandLaunch(cons.Start.Shell, map[string]string{"HOST": "h", "PORT": "1", "CACHE_DIR": "/c"})
	if err != nil || got != "exec bin/baton serve --role pd --listen h:1 --cache-dir /c # ${literal} $HOME" {
		t.Errorf("expand = %q, %v", got, err)
	}
}

// TestLaunchConfigRoundTrips: a Config marshalled to YAML or JSON (the
// results' profile, the bundle README's) parses back to the same Config.
func TestLaunchConfigRoundTrips(t *testing.T) {
	c, err := ParseConfig([]byte(launchProfile))
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []struct {
		name string
		fn   func(any) ([]byte, error)
	}{{"yaml", yaml.Marshal}, {"json", json.Marshal}} {
		raw, err := enc.fn(c)
		if err != nil {
			t.Fatalf("%s: %v", enc.name, err)
		}
		back, err := ParseConfig(raw)
		if err != nil {
			t.Fatalf("%s: ParseConfig(%s) = %v", enc.name, raw, err)
		}
		if d := cmp.Diff(c, back, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s round trip (-want +got):\n%s", enc.name, d)
		}
	}
	plain := Config{Profile: Profile{Name: "x", FaultProxy: true}, Endpoints: map[Role]string{RoleProducer: "h:1"}}
	raw, _ := yaml.Marshal(plain)
	if !strings.Contains(string(raw), "fault_proxy: true") {
		t.Errorf("yaml of fault_proxy: true = %s", raw)
	}
}

// TestMalformedLaunchSections: each bad launch section or fault_proxy key
// is an error naming what is wrong.
func TestMalformedLaunchSections(t *testing.T) {
	base := "name: x\nendpoints: {producer: 127.0.0.1:1, consumer: 127.0.0.1:2}\n"
	tests := []struct {
		name, text, want string
	}{
		{"unknown key", "launch: {roles: {producer: {start: [a]}}, restart_all: true}\n", "restart_all"},
		{"unknown role key", "launch: {roles: {producer: {start: [a], begin: [b]}}}\n", "begin"},
		{"no roles", "launch: {adopt: true}\n", "names no roles"},
		{"no start", "launch: {roles: {producer: {stop: [a]}}}\n", "no start command"},
		{"empty shell", "launch: {roles: {producer: {start: \"  \"}}}\n", "empty command"},
		{"empty argv", "launch: {roles: {producer: {start: []}}}\n", "empty argv"},
		{"mapping command", "launch: {roles: {producer: {start: {cmd: a}}}}\n", "shell string or an argv list"},
		{"nested list", "launch: {roles: {producer: {start: [[a]]}}}\n", "must be a string"},
		{"unknown variable", "launch: {roles: {producer: {start: [a, \"${PROT}\"]}}}\n", "${PROT}"},
		{"fault proxy variable without proxy", "launch: {roles: {producer: {start: [a, \"${FAULT_PROXY}\"]}}}\n", "${FAULT_PROXY}"},
		{"endpoint variable of a role without endpoint", "launch: {roles: {producer: {start: [a, \"${ENDPOINT_DECODE}\"]}}}\n", "${ENDPOINT_DECODE}"},
		{"unknown variable in env", "launch: {env: {A: \"${NOPE}\"}, roles: {producer: {start: [a]}}}\n", "${NOPE}"},
		{"role without endpoint", "launch: {roles: {baseline: {start: [a]}}}\n", "no endpoint for baseline"},
		{"unknown role", "launch: {roles: {encoder: {start: [a]}}}\n", "unknown role"},
		{"negative timeout", "launch: {start_timeout: -1s, roles: {producer: {start: [a]}}}\n", "negative"},
		{"fault proxy unknown key", "fault_proxy: {listen: 127.0.0.1:9, port: 1}\n", "port"},
		{"fault proxy without listen", "fault_proxy: {producer_control: 127.0.0.1:9}\n", "no listen address"},
		{"fault proxy bad address", "fault_proxy: {listen: nowhere}\n", "not host:port"},
		{"fault proxy not a bool", "fault_proxy: sometimes\n", "true, false or"},
		{"fault proxy with tls", "fault_proxy: {listen: 127.0.0.1:9}\ntls: {}\n", "tls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(base + tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseConfig(%q) = %v; want an error naming %q", tt.text, err, tt.want)
			}
		})
	}
	if _, err := ParseConfig([]byte(base + "launch: {roles: {producer: {start: [a, \"${NOPE}\"]}}}\n")); !errors.Is(err, ErrBadLaunch) {
		t.Errorf("an unknown variable is %v; want ErrBadLaunch", err)
	}
}

// TestLaunchEnvVars: BATON_LAUNCH_* need a launch section;
// BATON_FAULT_PROXY_LISTEN turns the mapping form on; BATON_FAULT_PROXY=false drops it.
func TestLaunchEnvVars(t *testing.T) {
	path := writeProfile(t, launchProfile)
	c, err := LoadConfigEnv(path, envMap(map[string]string{"BATON_LAUNCH_ADOPT": "false", "BATON_LAUNCH_STOP_TIMEOUT": "5s", "BATON_FAULT_PROXY_LISTEN": "127.0.0.1:7200"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Launch.Adopt || c.Launch.StopTimeout.Seconds() != 5 || c.FaultProxyAt.Listen != "127.0.0.1:7200" {
		t.Errorf("launch %+v proxy %+v; want the environment's values", c.Launch, c.FaultProxyAt)
	}
	if c, err = LoadConfigEnv(path, envMap(map[string]string{"BATON_FAULT_PROXY": "false"})); err == nil {
		t.Errorf("BATON_FAULT_PROXY=false with ${FAULT_PROXY} in a command = %+v; want the unknown variable error", c.FaultProxyAt)
	}
	plain := writeProfile(t, minimalProfile)
	if _, err := LoadConfigEnv(plain, envMap(map[string]string{"BATON_LAUNCH_ADOPT": "true"})); !errors.Is(err, ErrBadEnv) || !strings.Contains(err.Error(), "no launch section") {
		t.Errorf("BATON_LAUNCH_ADOPT without launch = %v; want ErrBadEnv", err)
	}
	c, err = LoadConfigEnv(plain, envMap(map[string]string{"BATON_FAULT_PROXY_LISTEN": "127.0.0.1:7200"}))
	if err != nil || !c.FaultProxy || c.FaultProxyAt == nil {
		t.Errorf("BATON_FAULT_PROXY_LISTEN alone = %+v, %v; want the proxy on", c.FaultProxyAt, err)
	}
}

// FuzzExpandLaunch: expansion never panics, replaces every known ${NAME}
// and fails on any other.
func FuzzExpandLaunch(f *testing.F) {
	for _, s := range []string{"${ADDR}", "$${ADDR}", "${", "${}", "$${", "a ${ROLE} b $HOME ${X"} {
		f.Add(s)
	}
	vars := map[string]string{"ADDR": "h:1", "ROLE": "producer"}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := expandLaunch(s, vars)
		if err != nil {
			return
		}
		if strings.Contains(s, "${ADDR}") && !strings.Contains(s, "$${ADDR}") && !strings.Contains(out, "h:1") {
			t.Errorf("expand(%q) = %q lost ${ADDR}", s, out)
		}
	})
}

// TestExampleLaunchSectionParses: the commented launch section of
// fixtures/target.example.yaml, uncommented, is a valid section.
func TestExampleLaunchSectionParses(t *testing.T) {
	raw, err := os.ReadFile(exampleProfile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "\n# launch:\n")
	if i < 0 {
		t.Fatal("the example profile has no commented launch section")
	}
	var b strings.Builder
	b.WriteString("endpoints: {producer: 127.0.0.1:1, consumer: 127.0.0.1:2, baseline: 127.0.0.1:3}\n")
	for _, line := range strings.Split(text[i+1:], "\n") {
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			b.WriteString(rest + "\n")
		}
	}
	c, err := ParseConfig([]byte(b.String()))
	if err != nil {
		t.Fatalf("the example's launch section does not parse: %v\n%s", err, b.String())
	}
	if len(c.Launch.Roles) != 3 || c.Launch.Roles[RoleConsumer].Start.Shell == "" || c.Launch.Roles[RoleBaseline].Ready.IsZero() {
		t.Errorf("launch = %+v", c.Launch)
	}
}
