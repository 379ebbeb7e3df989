package target

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// LookupEnv looks up one environment variable, like os.LookupEnv.
type LookupEnv func(key string) (value string, ok bool)

// EnvConfigPath names the profile file to read when no --config flag is
// given (LoadConfig with path "").
const EnvConfigPath = "BATON_CONFIG"

// ErrBadEnv is wrapped by the error for a BATON_* variable whose value does
// not parse as its kind (a boolean that is not true/false, a bad duration or
// byte count).
var ErrBadEnv = errors.New("target: bad environment variable")

// EnvVar is one BATON_* variable that overrides one profile key.
type EnvVar struct {
	// Name is the variable, e.g. "BATON_LEVEL".
	Name string
	// Key is the profile key it overrides, e.g. "level", "endpoints.producer", "tls.ca_file".
	Key string
	// Kind is how the value is read: "string", "bool" (true/false, 1/0, t/f),
	// "list" (comma-separated), "duration" (Go syntax: 90s, 2m), "int" (bytes).
	Kind string
	// Help is a one-line description.
	Help string

	set func(c *Config, v string) error
}

// envVars is THE table of overrides: ApplyEnv, EnvVars and EnvHelp all read
// it, so the code and its documentation cannot drift.
var envVars = []EnvVar{
	strVar("BATON_NAME", "name", "target name in reports", func(c *Config) *string { return &c.Name }),
	strVar("BATON_MODEL", "model", "model name put in GenerateRequest.model (\"\" = engine default)", func(c *Config) *string { return &c.Model }),
	strVar("BATON_LEVEL", "level", "level claimed: core, lifecycle or faults", func(c *Config) *string { return &c.Level }),
	strVar("BATON_IMPLEMENTATION_VENDOR", "implementation.vendor", "vendor of the engine under test", func(c *Config) *string { return &c.Implementation.Vendor }),
	strVar("BATON_IMPLEMENTATION_PRODUCT", "implementation.product", "product name of the engine", func(c *Config) *string { return &c.Implementation.Product }),
	strVar("BATON_IMPLEMENTATION_VERSION", "implementation.version", "version of the engine under test", func(c *Config) *string { return &c.Implementation.Version }),
	strVar("BATON_IMPLEMENTATION_CONTACT", "implementation.contact", "contact for the submission (e-mail or URL)", func(c *Config) *string { return &c.Implementation.Contact }),
	endpointVar(RoleProducer, "E: serves encoder.publish"),
	endpointVar(RoleConsumer, "PD: serves encoder.consume"),
	endpointVar(RolePrefill, "P: consumes, prefill only"),
	endpointVar(RoleDecode, "D: decodes from P's KV session"),
	endpointVar(RoleBaseline, "aggregated engine, the B-1 baseline"),
	endpointVar(RoleSecondConsumer, "a second PD process, raced against the consumer in SU-1"),
	listVar("BATON_TOPOLOGIES", "topologies", "topologies served: E+PD, E+P+D", func(c *Config) *[]string { return &c.Topologies }),
	listVar("BATON_BACKENDS", "backends", "backends the consumer accepts: shared_dir, tcp, ...", func(c *Config) *[]string { return &c.Backends }),
	boolVar("BATON_OBSERVABLES", "observables", "GetLoad carries the CONTRACT section 4 counters", func(c *Config) *bool { return &c.Observables }),
	boolVar("BATON_TEST_HOOKS", "test_hooks", "GenerateRequest.extra baton.* hooks are honoured", func(c *Config) *bool { return &c.TestHooks }),
	{Name: "BATON_FAULT_PROXY", Key: "fault_proxy", Kind: "bool", Help: "the harness may proxy consumer -> producer control calls (false also drops fault_proxy.listen)",
		set: func(c *Config, v string) error {
			b, err := parseBool(v)
			if err != nil {
				return err
			}
			c.FaultProxy = b
			if !b {
				c.FaultProxyAt = nil
			}
			return nil
		}},
	faultProxyVar("BATON_FAULT_PROXY_LISTEN", "fault_proxy.listen", "host:port where baton check runs its fault proxy (sets fault_proxy)", func(a *FaultProxyAddrs) *string { return &a.Listen }),
	faultProxyVar("BATON_FAULT_PROXY_PRODUCER_CONTROL", "fault_proxy.producer_control", "the producer's real control address the proxy forwards to (default endpoints.producer)", func(a *FaultProxyAddrs) *string { return &a.ProducerControl }),
	boolVar("BATON_DESTRUCTIVE", "destructive", "the suite may shut instances down (S-1 ACCEPTED)", func(c *Config) *bool { return &c.Destructive }),
	bytesVar("BATON_PRODUCER_QUOTA_BYTES", "producer_quota_bytes", "producer's L-5 bound in bytes (0 = undeclared)", func(c *Config) *int64 { return &c.ProducerQuotaBytes }),
	bytesVar("BATON_DECODE_BUDGET_BYTES", "decode_budget_bytes", "producer's SE-4 bound on decoded image bytes (8 a pixel) of all requests at once (0 = undeclared)", func(c *Config) *int64 { return &c.DecodeBudgetBytes }),
	listVar("BATON_MEDIA_FORMATS", "media_formats", "image formats decoded: png, jpeg (required, the default) plus gif, webp if served", func(c *Config) *[]string { return &c.MediaFormats }),
	strVar("BATON_REFERENCE_FORMAT", "reference_format", "opaque_state format: baton-json-v1 or empty (opaque)", func(c *Config) *string { return &c.ReferenceFormat }),
	strVar("BATON_UNTRUSTED_HOST", "untrusted_host", "host where the harness may listen on ports the target does not trust (SE-3, SE-4)", func(c *Config) *string { return &c.UntrustedHost }),
	strVar("BATON_AGENT_FORMAT", "agent_format", "tcp consumer_agent format: baton-xfer-v1 or empty (opaque)", func(c *Config) *string { return &c.AgentFormat }),
	{Name: "BATON_CASE_TIMEOUT", Key: "case_timeout", Kind: "duration", Help: "bound on one case (default 60s)",
		set: func(c *Config, v string) (err error) {
			c.CaseTimeout, err = parseDuration(v)
			return err
		}},
	launchVar("BATON_LAUNCH_WORK_DIR", "launch.work_dir", "string", "where launched roles' logs and ${CACHE_DIR} go (default <report-dir>/launch)", func(l *Launch, v string) error {
		l.WorkDir = v
		return nil
	}),
	launchVar("BATON_LAUNCH_DIR", "launch.dir", "string", "directory launch commands run in (default: baton's working directory)", func(l *Launch, v string) error {
		l.Dir = v
		return nil
	}),
	launchVar("BATON_LAUNCH_ADOPT", "launch.adopt", "bool", "adopt roles already answering READY instead of starting them", func(l *Launch, v string) (err error) {
		l.Adopt, err = parseBool(v)
		return err
	}),
	launchVar("BATON_LAUNCH_LEAVE_RUNNING", "launch.leave_running", "bool", "leave the instances baton started running after the run", func(l *Launch, v string) (err error) {
		l.LeaveRunning, err = parseBool(v)
		return err
	}),
	launchVar("BATON_LAUNCH_START_TIMEOUT", "launch.start_timeout", "duration", "bound on a start or restart until ready (default 60s)", func(l *Launch, v string) (err error) {
		l.StartTimeout, err = parseDuration(v)
		return err
	}),
	launchVar("BATON_LAUNCH_STOP_TIMEOUT", "launch.stop_timeout", "duration", "bound on a stop before SIGTERM/SIGKILL (default 30s)", func(l *Launch, v string) (err error) {
		l.StopTimeout, err = parseDuration(v)
		return err
	}),
	tlsStrVar("BATON_TLS_CA_FILE", "tls.ca_file", "PEM CA bundle for the target's certificates", func(t *TLS) *string { return &t.CAFile }),
	tlsStrVar("BATON_TLS_CERT_FILE", "tls.cert_file", "client certificate (PEM) for mutual TLS", func(t *TLS) *string { return &t.CertFile }),
	tlsStrVar("BATON_TLS_KEY_FILE", "tls.key_file", "client key (PEM) for mutual TLS", func(t *TLS) *string { return &t.KeyFile }),
	tlsStrVar("BATON_TLS_SERVER_NAME", "tls.server_name", "name checked against the target's certificate", func(t *TLS) *string { return &t.ServerName }),
	{Name: "BATON_TLS_INSECURE_SKIP_VERIFY", Key: "tls.insecure_skip_verify", Kind: "bool", Help: "accept any server certificate (testing only)",
		set: func(c *Config, v string) error {
			b, err := parseBool(v)
			if err != nil {
				return err
			}
			tlsOf(c).InsecureSkipVerify = b
			return nil
		}},
	{Name: "BATON_TLS_CLIENT_AUTH", Key: "tls.client_auth", Kind: "bool", Help: "every listener requires a client certificate (mTLS; SE-1 checks one without is refused)",
		set: func(c *Config, v string) error {
			b, err := parseBool(v)
			if err != nil {
				return err
			}
			tlsOf(c).ClientAuth = b
			return nil
		}},
	{Name: "BATON_TLS_LISTENERS", Key: "tls.listeners", Kind: "list", Help: "other listeners SE-1 checks, as role/kind=host:port (kind metrics or transfer)",
		set: func(c *Config, v string) error {
			var ls []Listener
			for _, item := range strings.Split(v, ",") {
				if item = strings.TrimSpace(item); item == "" {
					continue
				}
				l, err := ParseListener(item)
				if err != nil {
					return fmt.Errorf("want role/kind=host:port entries")
				}
				ls = append(ls, l)
			}
			tlsOf(c).Listeners = ls
			return nil
		}},
	authStrVar("BATON_AUTHORIZATION_OPERATOR_TOKEN_FILE", "authorization.operator.token_file", "file with the operator's bearer token (SE-2; turns authorization on)", func(o *Credential) *string { return &o.TokenFile }),
	authStrVar("BATON_AUTHORIZATION_OPERATOR_CERT_FILE", "authorization.operator.cert_file", "the operator's client certificate (SE-2; turns authorization on)", func(o *Credential) *string { return &o.CertFile }),
	authStrVar("BATON_AUTHORIZATION_OPERATOR_KEY_FILE", "authorization.operator.key_file", "the key of the operator's client certificate", func(o *Credential) *string { return &o.KeyFile }),
}

// authStrVar overrides one string of the operator's credential; setting any
// BATON_AUTHORIZATION_* variable turns authorization on.
func authStrVar(name, key, help string, field func(*Credential) *string) EnvVar {
	return EnvVar{Name: name, Key: key, Kind: "string", Help: help, set: func(c *Config, v string) error {
		if c.Authorization == nil {
			c.Authorization = &Authorization{}
		}
		*field(&c.Authorization.Operator) = v
		return nil
	}}
}

func strVar(name, key, help string, field func(*Config) *string) EnvVar {
	return EnvVar{Name: name, Key: key, Kind: "string", Help: help, set: func(c *Config, v string) error {
		*field(c) = v
		return nil
	}}
}

func boolVar(name, key, help string, field func(*Config) *bool) EnvVar {
	return EnvVar{Name: name, Key: key, Kind: "bool", Help: help, set: func(c *Config, v string) error {
		b, err := parseBool(v)
		if err != nil {
			return err
		}
		*field(c) = b
		return nil
	}}
}

// bytesVar overrides a byte count (a whole number).
func bytesVar(name, key, help string, field func(*Config) *int64) EnvVar {
	return EnvVar{Name: name, Key: key, Kind: "int", Help: help, set: func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want a whole number of bytes")
		}
		*field(c) = n
		return nil
	}}
}

func listVar(name, key, help string, field func(*Config) *[]string) EnvVar {
	return EnvVar{Name: name, Key: key, Kind: "list", Help: help, set: func(c *Config, v string) error {
		var out []string
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
		*field(c) = out
		return nil
	}}
}

func endpointVar(role Role, help string) EnvVar {
	return EnvVar{Name: "BATON_ENDPOINT_" + strings.ToUpper(string(role)), Key: "endpoints." + string(role), Kind: "string",
		Help: "host:port of the " + string(role) + " (" + help + ")",
		set: func(c *Config, v string) error {
			if c.Endpoints == nil {
				c.Endpoints = map[Role]string{}
			}
			c.Endpoints[role] = v
			return nil
		}}
}

// tlsStrVar overrides one TLS string; setting any BATON_TLS_* variable turns TLS on.
func tlsStrVar(name, key, help string, field func(*TLS) *string) EnvVar {
	return EnvVar{Name: name, Key: key, Kind: "string", Help: help, set: func(c *Config, v string) error {
		*field(tlsOf(c)) = v
		return nil
	}}
}

// faultProxyVar overrides one fault_proxy address; setting it turns the
// {listen, producer_control} form on.
func faultProxyVar(name, key, help string, field func(*FaultProxyAddrs) *string) EnvVar {
	return EnvVar{Name: name, Key: key, Kind: "string", Help: help, set: func(c *Config, v string) error {
		if c.FaultProxyAt == nil {
			c.FaultProxyAt = &FaultProxyAddrs{}
		}
		*field(c.FaultProxyAt) = v
		c.FaultProxy = true
		return nil
	}}
}

// launchVar overrides one key of the launch section; the section must
// exist (its roles' commands come only from the file).
func launchVar(name, key, kind, help string, set func(*Launch, string) error) EnvVar {
	return EnvVar{Name: name, Key: key, Kind: kind, Help: help, set: func(c *Config, v string) error {
		if c.Launch == nil {
			return fmt.Errorf("the profile has no launch section to set it in (launch.roles come from the profile file)")
		}
		return set(c.Launch, v)
	}}
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 90s or 2m")
	}
	return d, nil
}

// tlsOf returns c.TLS, creating an empty block (TLS on) when absent.
func tlsOf(c *Config) *TLS {
	if c.TLS == nil {
		c.TLS = &TLS{}
	}
	return c.TLS
}

func parseBool(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("want true or false")
	}
	return b, nil
}

// EnvVars returns every BATON_* variable that overrides a profile key, in
// the order EnvHelp lists them.
func EnvVars() []EnvVar {
	return append([]EnvVar(nil), envVars...)
}

// ApplyEnv overrides c's keys with the BATON_* variables lookup finds
// (EnvVars). A variable that is unset or empty (after trimming spaces)
// leaves its key alone. It does not validate the result (LoadConfig does).
// Errors: ErrBadEnv naming the variable, its value and what it wants, e.g.
// `BATON_OBSERVABLES="maybe": want true or false`.
func ApplyEnv(c *Config, lookup LookupEnv) error {
	for _, ev := range envVars {
		v, ok := lookup(ev.Name)
		if !ok {
			continue
		}
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if err := ev.set(c, v); err != nil {
			return fmt.Errorf("%w: %s=%q (profile key %s): %v", ErrBadEnv, ev.Name, v, ev.Key, err)
		}
	}
	return nil
}

// EnvHelp is the text `baton check --help` shows about configuration: the
// precedence (flag > env > file) and every BATON_* variable, one a line, as
// `  BATON_OBSERVABLES   observables (bool): GetLoad carries ...`.
func EnvHelp() string {
	var b strings.Builder
	b.WriteString(`Configuration: the target profile (--config FILE, else the file named by
BATON_CONFIG; see fixtures/target.example.yaml). Every profile key can be
overridden by a BATON_* environment variable. Precedence, highest first:
command-line flag > BATON_* environment variable > profile file. An empty
variable counts as unset. Booleans take true/false (1/0); lists are
comma-separated; durations use Go syntax (90s, 2m). Setting any BATON_TLS_*
variable turns TLS on, any BATON_AUTHORIZATION_* variable authorization.
Unknown profile keys are an error.

Environment variables (profile key (kind): meaning):
`)
	fmt.Fprintf(&b, "  %-31s %s\n", EnvConfigPath, "profile file to read when --config is not given")
	for _, ev := range envVars {
		fmt.Fprintf(&b, "  %-31s %s (%s): %s\n", ev.Name, ev.Key, ev.Kind, ev.Help)
	}
	return b.String()
}
