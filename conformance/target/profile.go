package target

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is a target profile file (target.yaml): the Profile plus where each
// role answers. Example:
//
//	name: reference-engine
//	endpoints: {producer: 127.0.0.1:7001, consumer: 127.0.0.1:7002, baseline: 127.0.0.1:7003}
//	level: core
//	topologies: [E+PD]
//	backends: [shared_dir]
//	observables: true
//	destructive: true
//	producer_quota_bytes: 67108864
//	reference_format: baton-json-v1
//	case_timeout: 60s
type Config struct {
	Profile   `yaml:",inline"`
	Endpoints map[Role]string `yaml:"endpoints"`
}

// LoadConfig reads and validates a target profile file. Unknown keys are an
// error, so a typo never silently turns a check off.
func LoadConfig(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("target: read profile: %w", err)
	}
	return ParseConfig(raw)
}

// ParseConfig parses and validates a target profile.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("target: parse profile: %w", err)
	}
	if len(c.Endpoints) == 0 {
		return Config{}, fmt.Errorf("target: profile names no endpoints (want endpoints: {producer: host:port, consumer: ..., baseline: ...})")
	}
	for role, addr := range c.Endpoints {
		switch role {
		case RoleProducer, RoleConsumer, RolePrefill, RoleDecode, RoleBaseline:
		default:
			return Config{}, fmt.Errorf("target: unknown role %q in endpoints (want producer, consumer, prefill, decode, baseline)", role)
		}
		if addr == "" {
			return Config{}, fmt.Errorf("target: role %s has an empty endpoint", role)
		}
	}
	if _, ok := c.ClaimedLevels(); !ok {
		return Config{}, fmt.Errorf("target: level %q (want core, lifecycle or faults)", c.Level)
	}
	if c.CaseTimeout == 0 {
		c.CaseTimeout = 60 * time.Second
	}
	if c.CaseTimeout < 0 {
		return Config{}, fmt.Errorf("target: case_timeout %v is negative", c.CaseTimeout)
	}
	return c, nil
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
func Dial(c Config) (*Static, error) {
	s := &Static{profile: c.Profile, engines: map[Role]Engine{}}
	roles := make([]string, 0, len(c.Endpoints))
	for r := range c.Endpoints {
		roles = append(roles, string(r))
	}
	sort.Strings(roles)
	for _, r := range roles {
		e, err := DialEngine(c.Endpoints[Role(r)])
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
