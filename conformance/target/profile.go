package target

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is a target profile file (target.yaml): the Profile plus where each
// role answers and how to reach it. fixtures/target.example.yaml is a
// commented example with every key. Short example:
//
//	name: reference-engine
//	implementation: {vendor: baton-dev, product: baton-reference, version: 0.1.0, contact: dev@example.org}
//	endpoints: {producer: 127.0.0.1:7001, consumer: 127.0.0.1:7002, baseline: 127.0.0.1:7003}
//	level: core
//	topologies: [E+PD]
//	backends: [shared_dir]
//	observables: true
//	destructive: true
//	producer_quota_bytes: 67108864
//	reference_format: baton-json-v1
//	media_formats: [png, jpeg, gif, webp]
//	case_timeout: 60s
type Config struct {
	Profile `yaml:",inline"`
	// Endpoints maps each role the target serves to its host:port.
	Endpoints map[Role]string `yaml:"endpoints" json:"endpoints"`
	// FaultProxyAt is the `fault_proxy: {listen, producer_control}` form of
	// the fault_proxy key (nil for `true`/`false`): the harness runs its
	// fault proxy there (LaunchTarget). It sets Profile.FaultProxy.
	FaultProxyAt *FaultProxyAddrs `yaml:"-" json:"-"`
	// Launch is the `launch:` section (nil: baton starts nothing and can
	// restart nothing). It sets Profile.Restarts.
	Launch *Launch `yaml:"launch,omitempty" json:"launch,omitempty"`
}

// plainConfig is Config without its methods, for the file form.
type plainConfig Config

// configFile is the profile file's form of a Config: the fault_proxy key
// is a boolean or a mapping.
type configFile struct {
	plainConfig `yaml:",inline"`
	FaultProxy  faultProxyKey `yaml:"fault_proxy" json:"fault_proxy"`
	// CaseTimeout is case_timeout as JSON writes it ("1m0s"; YAML writes
	// the Duration itself), so the JSON form loads as a profile too.
	CaseTimeout string `yaml:"-" json:"case_timeout"`
}

// file returns c in its file form.
func (c Config) file() configFile {
	return configFile{plainConfig: plainConfig(c), FaultProxy: faultProxyKey{on: c.FaultProxy, addrs: c.FaultProxyAt}, CaseTimeout: c.CaseTimeout.String()}
}

// MarshalYAML writes c as a profile file (fault_proxy as a boolean or its
// {listen, producer_control} mapping), so a marshalled Config loads again.
func (c Config) MarshalYAML() (any, error) { return c.file(), nil }

// MarshalJSON writes c with the profile file's keys, as MarshalYAML.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.file()) }

// KnownBackends are the backend names a profile may declare (WIRE.md
// EncoderCacheRef.backend): a misspelt one is a configuration error, not a
// backend no case can cover.
var KnownBackends = []string{"shared_dir", "tcp", "cuda_ipc"}

// DefaultCaseTimeout bounds one case when the profile gives no case_timeout.
const DefaultCaseTimeout = 60 * time.Second

// MinCaseTimeout is the shortest case_timeout a profile may give: a bound
// shorter than one publish and consume would fail every case for the
// harness's own setting.
const MinCaseTimeout = time.Second

// MaxCaseTimeout is the longest case_timeout a profile may give: the bound
// is what turns a hung target into a verdict, and a case of the suite that
// needs longer than an hour is not one a CI run can wait for (attack O4,
// stop 22: "case_timeout: 100000h" was accepted, so a hang never ended).
const MaxCaseTimeout = time.Hour

// ErrBadProfile is wrapped by every validation error of a profile's values
// (unknown role, level, topology or reference format, negative numbers).
var ErrBadProfile = errors.New("target: bad profile")

// LoadConfig reads the profile file at path, applies the BATON_* environment
// variables of the process over it (EnvVars; env > file) and validates the
// result. Unknown keys are an error, so a typo never silently turns a check
// off. With path "" it reads the file named by BATON_CONFIG, and with neither
// it builds the profile from the environment alone.
//
// Errors: the file cannot be read; a parse error or unknown key; ErrBadEnv
// for a malformed variable; ErrBadProfile or ErrBadTLS for a bad value.
func LoadConfig(path string) (Config, error) {
	return LoadConfigEnv(path, os.LookupEnv)
}

// LoadConfigEnv is LoadConfig with the environment given as a lookup
// function (os.LookupEnv for the process's). Relative TLS file paths in the
// file are resolved against the file's directory; those from the
// environment against the working directory.
func LoadConfigEnv(path string, lookup LookupEnv) (Config, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	if path == "" {
		if v, ok := lookup(EnvConfigPath); ok {
			path = v
		}
	}
	var c Config
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("target: read profile: %w", err)
		}
		if c, err = decodeConfig(raw); err != nil {
			return Config{}, err
		}
		c.TLS.resolve(filepath.Dir(path))
		c.Launch.resolve(filepath.Dir(path))
		c.Authorization.resolve(filepath.Dir(path))
	}
	if err := ApplyEnv(&c, lookup); err != nil {
		return Config{}, err
	}
	if err := c.finish(); err != nil {
		return Config{}, err
	}
	if c.TLS != nil {
		// Load the files now, so a bad CA or key pair is a configuration
		// error (exit 3) before anything is dialled.
		if _, err := c.TLS.ClientConfig(); err != nil {
			return Config{}, err
		}
	}
	if c.Authorization != nil {
		if _, err := c.Authorization.Operator.load(); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// ParseConfig parses and validates a target profile. It does not read the
// environment (LoadConfig does) nor any TLS file (Dial does).
func ParseConfig(raw []byte) (Config, error) {
	c, err := decodeConfig(raw)
	if err != nil {
		return Config{}, err
	}
	if err := c.finish(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// decodeConfig decodes a profile strictly: unknown keys are errors.
func decodeConfig(raw []byte) (Config, error) {
	var f configFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Config{}, fmt.Errorf("target: parse profile: %w", err)
	}
	c := Config(f.plainConfig)
	c.FaultProxy, c.FaultProxyAt = f.FaultProxy.on, f.FaultProxy.addrs
	return c, nil
}

// finish validates c and fills defaults (case_timeout 60s).
func (c *Config) finish() error {
	if len(c.Endpoints) == 0 {
		return fmt.Errorf("target: profile names no endpoints (want endpoints: {producer: host:port, consumer: ..., baseline: ...} or BATON_ENDPOINT_<ROLE>)")
	}
	for role, addr := range c.Endpoints {
		switch role {
		case RoleProducer, RoleConsumer, RolePrefill, RoleDecode, RoleBaseline, RoleSecondConsumer:
		default:
			return fmt.Errorf("%w: unknown role %q in endpoints (want producer, consumer, prefill, decode, baseline, consumer2)", ErrBadProfile, role)
		}
		if addr == "" {
			return fmt.Errorf("%w: role %s has an empty endpoint", ErrBadProfile, role)
		}
	}
	if c.Endpoints[RoleSecondConsumer] != "" && c.Endpoints[RoleConsumer] == "" {
		return fmt.Errorf("%w: endpoints name a consumer2 but no consumer (the second consumer process races the first: SU-1)", ErrBadProfile)
	}
	formats, err := checkMediaFormats(c.MediaFormats)
	if err != nil {
		return err
	}
	c.MediaFormats = formats
	if _, ok := c.ClaimedLevels(); !ok {
		return fmt.Errorf("%w: level %q (want core, lifecycle or faults)", ErrBadProfile, c.Level)
	}
	for _, t := range c.Topologies {
		if t != TopologyEPD && t != TopologyEPPD {
			return fmt.Errorf("%w: topology %q (want %s or %s)", ErrBadProfile, t, TopologyEPD, TopologyEPPD)
		}
	}
	for _, b := range c.Backends {
		if !slices.Contains(KnownBackends, b) {
			return fmt.Errorf("%w: unknown backend %q in backends %v (want %s)", ErrBadProfile, b, c.Backends, strings.Join(KnownBackends, ", "))
		}
	}
	if c.ReferenceFormat != "" && c.ReferenceFormat != ReferenceFormatBatonJSONv1 {
		return fmt.Errorf("%w: reference_format %q (want %q or empty for opaque)", ErrBadProfile, c.ReferenceFormat, ReferenceFormatBatonJSONv1)
	}
	if c.AgentFormat != "" && c.AgentFormat != AgentFormatBatonXferV1 {
		return fmt.Errorf("%w: agent_format %q (want %q or empty for opaque)", ErrBadProfile, c.AgentFormat, AgentFormatBatonXferV1)
	}
	if c.ProducerQuotaBytes < 0 {
		return fmt.Errorf("%w: producer_quota_bytes %d is negative", ErrBadProfile, c.ProducerQuotaBytes)
	}
	if c.DecodeBudgetBytes < 0 {
		return fmt.Errorf("%w: decode_budget_bytes %d is negative", ErrBadProfile, c.DecodeBudgetBytes)
	}
	if c.CaseTimeout == 0 {
		c.CaseTimeout = DefaultCaseTimeout
	}
	if c.CaseTimeout < MinCaseTimeout {
		return fmt.Errorf("%w: case_timeout %v is shorter than %v (no case can publish and consume in less; absent or 0s means %v)", ErrBadProfile, c.CaseTimeout, MinCaseTimeout, DefaultCaseTimeout)
	}
	if c.CaseTimeout > MaxCaseTimeout {
		return fmt.Errorf("%w: case_timeout %v is longer than %v (the bound is what turns a hung target into a verdict; absent or 0s means %v)", ErrBadProfile, c.CaseTimeout, MaxCaseTimeout, DefaultCaseTimeout)
	}
	if c.TLS != nil {
		if err := c.TLS.check(); err != nil {
			return err
		}
	}
	if c.FaultProxyAt != nil {
		c.FaultProxy = true
	}
	if err := c.checkFaultProxy(); err != nil {
		return err
	}
	if err := c.checkLaunch(); err != nil {
		return err
	}
	c.Restarts = c.Restarts || c.Launch != nil
	if c.Authorization != nil {
		if err := c.Authorization.check(c.TLS); err != nil {
			return err
		}
	}
	return nil
}

// RoleSecondConsumer is an optional second consumer process (PD) of the
// same E+PD topology, endpoints key "consumer2": the SU-1 case that races
// one reference across two consumer processes needs it and is not
// applicable without it. It must be another process than the consumer,
// accepting the same producer's references.
const RoleSecondConsumer Role = "consumer2"

// Image formats a profile may list in media_formats (Profile.MediaFormats;
// CONTRACT "How requests look"). MediaPNG and MediaJPEG are required of
// every engine; MediaGIF and MediaWebP are optional.
const (
	MediaPNG  = "png"
	MediaJPEG = "jpeg"
	MediaGIF  = "gif"
	MediaWebP = "webp"
)

// RequiredMediaFormats are the formats every engine decodes (PNG of every
// colour type and bit depth, JPEG baseline and progressive), in order.
func RequiredMediaFormats() []string { return []string{MediaPNG, MediaJPEG} }

// OptionalMediaFormats are the formats a profile may add to the required ones.
func OptionalMediaFormats() []string { return []string{MediaGIF, MediaWebP} }

// DeclaredMediaFormats returns the image formats p declares: the required
// ones, then the optional ones it lists, in the order of
// RequiredMediaFormats and OptionalMediaFormats. An empty
// Profile.MediaFormats declares the required formats only.
func (p Profile) DeclaredMediaFormats() []string {
	out := RequiredMediaFormats()
	for _, f := range OptionalMediaFormats() {
		for _, g := range p.MediaFormats {
			if strings.EqualFold(strings.TrimSpace(g), f) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// DeclaresMediaFormat reports whether p declares the image format f ("png",
// "gif", ...; the required formats always).
func (p Profile) DeclaresMediaFormat(f string) bool {
	for _, g := range p.DeclaredMediaFormats() {
		if g == f {
			return true
		}
	}
	return false
}

// checkMediaFormats validates a media_formats list and returns it in lower
// case without repeats. Errors (ErrBadProfile): a name that is not png,
// jpeg, gif or webp; a non-empty list that leaves out png or jpeg (they
// are required: CONTRACT "How requests look").
func checkMediaFormats(list []string) ([]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	known := append(RequiredMediaFormats(), OptionalMediaFormats()...)
	var out []string
	for _, f := range list {
		f = strings.ToLower(strings.TrimSpace(f))
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("%w: media_formats lists %q (want png, jpeg, gif or webp)", ErrBadProfile, f)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, req := range RequiredMediaFormats() {
		if !slices.Contains(out, req) {
			return nil, fmt.Errorf("%w: media_formats %v leaves out %s, which every engine must decode (CONTRACT \"How requests look\"); list png and jpeg with the optional formats, or leave media_formats out", ErrBadProfile, out, req)
		}
	}
	return out, nil
}

// Static is a Target over fixed engines.
type Static struct {
	profile Profile
	engines map[Role]Engine
	closers []func() error
}

// NewStatic returns a Target serving the given engines.
func NewStatic(p Profile, engines map[Role]Engine) *Static {
	return &Static{profile: p, engines: engines}
}

// Dial connects to every endpoint of c (lazily) and returns the Target.
// With c.TLS set every connection uses TLS (its files are loaded once,
// here); otherwise plaintext. With c.Authorization set every connection
// presents the operator's credential (Profile.DialOptions). Errors:
// ErrBadTLS for unusable TLS or authorization settings.
func Dial(c Config) (*Static, error) {
	opts, err := c.Profile.DialOptions()
	if err != nil {
		return nil, err
	}
	s := &Static{profile: c.Profile, engines: map[Role]Engine{}}
	roles := make([]string, 0, len(c.Endpoints))
	for r := range c.Endpoints {
		roles = append(roles, string(r))
	}
	sort.Strings(roles)
	for _, r := range roles {
		e, err := DialEngine(c.Endpoints[Role(r)], opts...)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.engines[Role(r)] = e
		s.closers = append(s.closers, e.Close)
	}
	return s, nil
}

// Profile implements Target.
func (s *Static) Profile() Profile { return s.profile }

// Engine implements Target.
func (s *Static) Engine(role Role) (Engine, bool) {
	e, ok := s.engines[role]
	return e, ok
}

// Close closes every connection.
func (s *Static) Close() error {
	var first error
	for _, c := range s.closers {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
