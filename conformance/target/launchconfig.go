package target

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Launch is the profile's `launch:` section: how `baton check` (and `baton
// fuzz`) start, stop and restart each role's instance, the way Sonobuoy or
// hydrophone manage a cluster's conformance run. With it the target can
// restart what a case takes down or poisons (Restarter): X-1, the accepted
// Shutdown of S-1, S-2, S-4 and the Faults cases need that (CONTRACT section 4
// "A restart"). fixtures/target.example.yaml documents every key; LaunchTarget
// (launch.go) runs it.
//
//	launch:
//	  roles:
//	    producer:
//	      start: [bin/baton, serve, --role, encoder, --listen, "${ADDR}", --cache-dir, "${CACHE_DIR}"]
//	    consumer:
//	      start: "exec bin/baton serve --role pd --listen ${ADDR} --cache-dir ${CACHE_DIR}"
//
// Commands (LaunchCommand) are argv lists or shell strings; ${NAME} is one
// of LaunchVariables, expanded by baton in both forms.
type Launch struct {
	// WorkDir holds the launched processes' logs (<role>.<n>.log),
	// ${CACHE_DIR} and each ${INSTANCE_DIR}; "" = "launch" under the report
	// directory. Relative to the profile file's directory.
	WorkDir string `yaml:"work_dir" json:"work_dir,omitempty"`
	// Dir is the directory commands run in; "" = the directory baton runs in.
	// Relative to the profile file's directory.
	Dir string `yaml:"dir" json:"dir,omitempty"`
	// Adopt: a role whose endpoint already answers READY when the run starts
	// is adopted (kept, and restarted with its commands when a case needs
	// it) instead of started; a role that answers but is not READY is
	// restarted. Without Adopt a role that already answers is an error, so
	// two instances never fight over one address.
	Adopt bool `yaml:"adopt" json:"adopt,omitempty"`
	// LeaveRunning keeps the instances baton started running after the run
	// (default: each is stopped, Shutdown first). Adopted roles are always
	// left running, restarted if a case left them down.
	LeaveRunning bool `yaml:"leave_running" json:"leave_running,omitempty"`
	// StartTimeout bounds a start or restart until the role is ready
	// (default DefaultLaunchStartTimeout).
	StartTimeout time.Duration `yaml:"start_timeout" json:"start_timeout,omitempty"`
	// StopTimeout bounds a stop until the instance is gone, before baton
	// sends SIGTERM, then SIGKILL, to what it started (default
	// DefaultLaunchStopTimeout).
	StopTimeout time.Duration `yaml:"stop_timeout" json:"stop_timeout,omitempty"`
	// Env is added to the environment of every command (values may use
	// ${NAME}). Name secrets so that reports redact them (…_TOKEN, …_KEY).
	Env map[string]string `yaml:"env" json:"env,omitempty"`
	// Roles maps each managed role (a key of endpoints) to its commands.
	// A role of endpoints left out is not managed: it is never started,
	// stopped or restarted (Restart of it is an error).
	Roles map[Role]*LaunchRole `yaml:"roles" json:"roles"`
}

// MarshalJSON writes the section with its durations as Go durations
// ("30s"), as the profile file has them.
func (l Launch) MarshalJSON() ([]byte, error) {
	type plain Launch
	return json.Marshal(struct {
		plain
		StartTimeout string `json:"start_timeout,omitempty"`
		StopTimeout  string `json:"stop_timeout,omitempty"`
	}{plain(l), durationText(l.StartTimeout), durationText(l.StopTimeout)})
}

// durationText is d as a Go duration, "" for 0.
func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// LaunchRole is how one role's instance is started, stopped, restarted and
// found ready.
type LaunchRole struct {
	// Start starts the instance (required). A command that keeps running
	// is the instance: baton keeps it as a child and stops it at the end.
	// A command that exits 0 before the role is ready is a launcher that
	// left the instance running elsewhere (docker run -d, systemctl start):
	// baton then waits for readiness and stops it with Stop or Shutdown.
	Start LaunchCommand `yaml:"start" json:"start"`
	// Stop stops the instance; empty: Shutdown(expected_instance_id) through
	// the endpoint (the CONTRACT S-1 path), then SIGTERM and SIGKILL to the
	// process group of what Start left running.
	Stop LaunchCommand `yaml:"stop" json:"stop,omitempty"`
	// Restart replaces the instance with a fresh one (new instance id);
	// empty: Stop, then Start.
	Restart LaunchCommand `yaml:"restart" json:"restart,omitempty"`
	// Ready is polled until it exits 0; empty: the role's Control.Health
	// answers READY (every baton.encoder.v1 engine has it).
	Ready LaunchCommand `yaml:"ready" json:"ready,omitempty"`
	// Env is added to this role's commands' environment, after Launch.Env.
	Env map[string]string `yaml:"env" json:"env,omitempty"`
}

// LaunchCommand is one command of a launch section: a YAML list is an argv
// run directly (argv[0] is looked up in PATH when it has no '/', else taken
// relative to Launch.Dir); a YAML string is run by `/bin/sh -c`. In both,
// ${NAME} is replaced by baton's variable NAME (LaunchVariables; an unknown
// name is a profile error) and $${ gives a literal ${. Anything else,
// $HOME included, is left alone: the shell of a string command expands it.
type LaunchCommand struct {
	// Argv is the list form; nil for a shell string.
	Argv []string
	// Shell is the string form; "" for a list.
	Shell string
}

// IsZero reports whether the command is absent.
func (c LaunchCommand) IsZero() bool { return len(c.Argv) == 0 && c.Shell == "" }

// String is the command as a shell would read it (for logs and errors).
func (c LaunchCommand) String() string {
	if c.Shell != "" {
		return c.Shell
	}
	parts := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		parts[i] = shellWord(a)
	}
	return strings.Join(parts, " ")
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// UnmarshalYAML reads a string (shell) or a list of strings (argv).
func (c *LaunchCommand) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			*c = LaunchCommand{}
			return nil
		}
		if strings.TrimSpace(n.Value) == "" {
			return fmt.Errorf("line %d: an empty command (want a shell string or an argv list)", n.Line)
		}
		*c = LaunchCommand{Shell: n.Value}
		return nil
	case yaml.SequenceNode:
		argv := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				return fmt.Errorf("line %d: an argv element must be a string", e.Line)
			}
			argv = append(argv, e.Value)
		}
		if len(argv) == 0 || argv[0] == "" {
			return fmt.Errorf("line %d: an empty argv (want [program, args...])", n.Line)
		}
		*c = LaunchCommand{Argv: argv}
		return nil
	}
	return fmt.Errorf("line %d: a command is a shell string or an argv list", n.Line)
}

// MarshalYAML writes the list or the string.
func (c LaunchCommand) MarshalYAML() (any, error) {
	if c.Shell != "" {
		return c.Shell, nil
	}
	if len(c.Argv) == 0 {
		return nil, nil
	}
	return c.Argv, nil
}

// MarshalJSON writes the list or the string (null when absent).
func (c LaunchCommand) MarshalJSON() ([]byte, error) {
	v, _ := c.MarshalYAML()
	return json.Marshal(v)
}

// Defaults of a launch section.
const (
	// DefaultLaunchStartTimeout bounds a start until ready.
	DefaultLaunchStartTimeout = 60 * time.Second
	// DefaultLaunchStopTimeout bounds a stop until the instance is gone.
	DefaultLaunchStopTimeout = 30 * time.Second
)

// LaunchVariable is one ${NAME} a launch command may use.
type LaunchVariable struct {
	// Name is NAME in ${NAME}.
	Name string
	// Help says what it expands to.
	Help string
}

// LaunchVariables are the ${NAME}s of launch commands, in the order the
// documentation lists them.
var LaunchVariables = []LaunchVariable{
	{"ROLE", "the role: producer, consumer, prefill, decode or baseline"},
	{"ADDR", "the role's endpoint (host:port, from endpoints)"},
	{"HOST", "the host of ADDR"},
	{"PORT", "the port of ADDR"},
	{"ENDPOINT_PRODUCER", "the producer's endpoint (likewise ENDPOINT_CONSUMER, _PREFILL, _DECODE, _BASELINE; only roles the profile names)"},
	{"CACHE_DIR", "<work_dir>/cache: one directory for the whole run, shared by every role and kept across restarts (the shared directory E and PD must share); created empty at the start of the run"},
	{"INSTANCE_DIR", "a new, empty directory for this start of this role (<work_dir>/<role>.<n>): a fresh cache directory for an instance that must not inherit its predecessor's files"},
	{"WORK_DIR", "the launch work directory (logs are <work_dir>/<role>.<n>.log)"},
	{"START", "how many times this role was started in this run, this start included (1, 2, ...)"},
	{"FAULT_PROXY", "the harness's fault proxy address (fault_proxy: true picks a free loopback port; {listen: host:port} gives it): point the producer's advertised control address at it"},
}

// launchVarRE matches ${NAME} (and $${ as an escape, handled by expand).
var launchVarRE = regexp.MustCompile(`\$\$\{|\$\{([^}]*)\}`)

// launchEndpointVars maps ENDPOINT_<ROLE> to its role.
var launchEndpointVars = map[string]Role{
	"ENDPOINT_PRODUCER": RoleProducer, "ENDPOINT_CONSUMER": RoleConsumer, "ENDPOINT_PREFILL": RolePrefill,
	"ENDPOINT_DECODE": RoleDecode, "ENDPOINT_BASELINE": RoleBaseline,
}

// ErrBadLaunch is wrapped by every validation error of a launch section or
// of the fault_proxy addresses.
var ErrBadLaunch = errors.New("target: bad launch section")

// expandLaunch replaces every ${NAME} of s with vars[NAME] and $${ with ${.
// Errors: a name vars lacks.
func expandLaunch(s string, vars map[string]string) (string, error) {
	var bad []string
	out := launchVarRE.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$${" {
			return "${"
		}
		name := m[2 : len(m)-1]
		v, ok := vars[name]
		if !ok {
			bad = append(bad, m)
		}
		return v
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("unknown variable %s", strings.Join(bad, ", "))
	}
	return out, nil
}

// launchVarNames lists the variable names a launch section may use with
// this profile: FAULT_PROXY only with a fault proxy, ENDPOINT_<ROLE> only
// for roles with an endpoint.
func (c *Config) launchVarNames() map[string]string {
	vars := map[string]string{}
	for _, v := range LaunchVariables {
		vars[v.Name] = "x"
	}
	delete(vars, "ENDPOINT_PRODUCER")
	for name, role := range launchEndpointVars {
		if c.Endpoints[role] != "" {
			vars[name] = "x"
		}
	}
	if !c.FaultProxy {
		delete(vars, "FAULT_PROXY")
	}
	return vars
}

// checkLaunch validates the launch section against the rest of the profile.
func (c *Config) checkLaunch() error {
	l := c.Launch
	if l == nil {
		return nil
	}
	if len(l.Roles) == 0 {
		return fmt.Errorf("%w: launch names no roles (want launch.roles.<role>.start for each role baton manages)", ErrBadLaunch)
	}
	if l.StartTimeout < 0 || l.StopTimeout < 0 {
		return fmt.Errorf("%w: launch.start_timeout and launch.stop_timeout must not be negative", ErrBadLaunch)
	}
	vars := c.launchVarNames()
	check := func(where, s string) error {
		if _, err := expandLaunch(s, vars); err != nil {
			names := make([]string, 0, len(vars))
			for n := range vars {
				names = append(names, "${"+n+"}")
			}
			sort.Strings(names)
			return fmt.Errorf("%w: %s: %v (known: %s; write $${ for a literal ${)", ErrBadLaunch, where, err, strings.Join(names, " "))
		}
		return nil
	}
	checkEnv := func(where string, env map[string]string) error {
		for k, v := range env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("%w: %s: bad variable name %q", ErrBadLaunch, where, k)
			}
			if err := check(where+"."+k, v); err != nil {
				return err
			}
		}
		return nil
	}
	if err := checkEnv("launch.env", l.Env); err != nil {
		return err
	}
	roles := make([]string, 0, len(l.Roles))
	for r := range l.Roles {
		roles = append(roles, string(r))
	}
	sort.Strings(roles)
	for _, name := range roles {
		r, lr := Role(name), l.Roles[Role(name)]
		where := "launch.roles." + name
		if !slices.Contains(probeOrder, r) {
			return fmt.Errorf("%w: unknown role %q in launch.roles (want producer, consumer, prefill, decode, baseline, consumer2)", ErrBadLaunch, name)
		}
		if c.Endpoints[r] == "" {
			return fmt.Errorf("%w: %s: the profile names no endpoint for %s (baton reaches each launched role at its endpoint)", ErrBadLaunch, where, name)
		}
		if lr == nil || lr.Start.IsZero() {
			return fmt.Errorf("%w: %s has no start command", ErrBadLaunch, where)
		}
		for _, cmd := range []struct {
			key string
			c   LaunchCommand
		}{{"start", lr.Start}, {"stop", lr.Stop}, {"restart", lr.Restart}, {"ready", lr.Ready}} {
			for _, s := range append(cmd.c.Argv, cmd.c.Shell) {
				if err := check(where+"."+cmd.key, s); err != nil {
					return err
				}
			}
		}
		if err := checkEnv(where+".env", lr.Env); err != nil {
			return err
		}
	}
	return nil
}

// resolve makes the section's relative directories relative to dir (the
// profile file's directory).
func (l *Launch) resolve(dir string) {
	if l == nil {
		return
	}
	for _, p := range []*string{&l.WorkDir, &l.Dir} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// probeOrder is the order roles are started, stopped and reported in.
var probeOrder = []Role{RoleProducer, RoleConsumer, RolePrefill, RoleDecode, RoleBaseline, RoleSecondConsumer}

// FaultProxyAddrs is the `fault_proxy: {listen, producer_control}` form of
// the profile key: the harness runs its fault proxy (conformance/faultproxy)
// at Listen and forwards to ProducerControl, so engines that baton did not
// start can be faulted. Point the producer's advertised control address at
// Listen (the reference engine: `baton serve --advertise-control`), and let
// the consumer trust it as a producer (CONTRACT SE-3).
type FaultProxyAddrs struct {
	// Listen is host:port the proxy listens on (port 0 picks a free one,
	// which only a launch section can pass on, as ${FAULT_PROXY}).
	Listen string `yaml:"listen" json:"listen"`
	// ProducerControl is the producer's real control address, where the
	// proxy forwards to ("" = endpoints.producer).
	ProducerControl string `yaml:"producer_control" json:"producer_control,omitempty"`
}

// faultProxyKey is the profile's fault_proxy key as written: a boolean, or
// a mapping (FaultProxyAddrs).
type faultProxyKey struct {
	on    bool
	addrs *FaultProxyAddrs
}

// UnmarshalYAML reads `true`/`false` or {listen, producer_control}, keys
// checked strictly.
func (k *faultProxyKey) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: fault_proxy is true, false or {listen: host:port, producer_control: host:port}", n.Line)
		}
		*k = faultProxyKey{on: b}
		return nil
	case yaml.MappingNode:
		a := &FaultProxyAddrs{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			if val.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: fault_proxy.%s is a host:port string", val.Line, key.Value)
			}
			switch key.Value {
			case "listen":
				a.Listen = val.Value
			case "producer_control":
				a.ProducerControl = val.Value
			default:
				return fmt.Errorf("line %d: field %s not found in fault_proxy (want listen, producer_control)", key.Line, key.Value)
			}
		}
		*k = faultProxyKey{on: true, addrs: a}
		return nil
	}
	return fmt.Errorf("line %d: fault_proxy is true, false or {listen: host:port, producer_control: host:port}", n.Line)
}

// value is the key as YAML/JSON writes it.
func (k faultProxyKey) value() any {
	if k.addrs != nil {
		return k.addrs
	}
	return k.on
}

// MarshalYAML writes the boolean or the mapping.
func (k faultProxyKey) MarshalYAML() (any, error) { return k.value(), nil }

// MarshalJSON writes the boolean or the mapping.
func (k faultProxyKey) MarshalJSON() ([]byte, error) { return json.Marshal(k.value()) }

// checkFaultProxy validates the fault_proxy addresses.
func (c *Config) checkFaultProxy() error {
	a := c.FaultProxyAt
	if a == nil {
		return nil
	}
	if a.Listen == "" {
		return fmt.Errorf("%w: fault_proxy has no listen address (want fault_proxy: {listen: host:port})", ErrBadLaunch)
	}
	for key, addr := range map[string]string{"listen": a.Listen, "producer_control": a.ProducerControl} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%w: fault_proxy.%s %q is not host:port", ErrBadLaunch, key, addr)
		}
	}
	if c.Endpoints[RoleProducer] == "" && a.ProducerControl == "" {
		return fmt.Errorf("%w: fault_proxy needs endpoints.producer or fault_proxy.producer_control (where it forwards to)", ErrBadLaunch)
	}
	if c.TLS != nil {
		return fmt.Errorf("%w: fault_proxy with tls is not supported yet: the proxy serves and forwards plaintext", ErrBadLaunch)
	}
	return nil
}

// HarnessRunsFaultProxy reports whether the harness can run the fault proxy
// for this profile: a fault_proxy {listen} address, or fault_proxy: true
// with a launch section (a free loopback port, passed on as ${FAULT_PROXY}).
func (c Config) HarnessRunsFaultProxy() bool {
	return c.FaultProxyAt != nil || (c.FaultProxy && c.Launch != nil)
}
