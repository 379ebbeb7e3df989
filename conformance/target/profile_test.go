package target

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const exampleProfile = "../../fixtures/target.example.yaml"

// envMap is a LookupEnv over a map.
func envMap(m map[string]string) LookupEnv {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func writeProfile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "target.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const minimalProfile = `
name: file-name
endpoints: {producer: 127.0.0.1:1, consumer: 127.0.0.1:2}
level: core
topologies: [E+PD]
observables: true
case_timeout: 30s
`

func TestLoadConfigEnvOverridesFile(t *testing.T) {
	path := writeProfile(t, minimalProfile)
	tests := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"no env keeps the file", nil, func(t *testing.T, c Config) {
			if c.Name != "file-name" || c.Level != "core" || !c.Observables || c.CaseTimeout != 30*time.Second || c.TLS != nil {
				t.Errorf("got %+v; want the file's values and plaintext", c)
			}
		}},
		{"env beats file", map[string]string{
			"BATON_NAME": "env-name", "BATON_LEVEL": "lifecycle", "BATON_OBSERVABLES": "false", "BATON_CASE_TIMEOUT": "2m",
			"BATON_ENDPOINT_PRODUCER": "10.0.0.5:50051", "BATON_ENDPOINT_BASELINE": "10.0.0.7:50051",
			"BATON_TOPOLOGIES": " E+PD , E+P+D ,", "BATON_BACKENDS": "shared_dir,tcp",
			"BATON_TEST_HOOKS": "1", "BATON_FAULT_PROXY": "true", "BATON_DESTRUCTIVE": "T",
			"BATON_PRODUCER_QUOTA_BYTES": "67108864", "BATON_DECODE_BUDGET_BYTES": "33554432", "BATON_REFERENCE_FORMAT": "baton-json-v1", "BATON_MODEL": "m",
			"BATON_IMPLEMENTATION_VENDOR": "Example Corp", "BATON_IMPLEMENTATION_PRODUCT": "example-serve",
			"BATON_IMPLEMENTATION_VERSION": "2.4.1", "BATON_IMPLEMENTATION_CONTACT": "certs@example.com",
		}, func(t *testing.T, c Config) {
			want := Config{
				Profile: Profile{
					Name: "env-name", Model: "m", Level: "lifecycle",
					Implementation: Implementation{Vendor: "Example Corp", Product: "example-serve", Version: "2.4.1", Contact: "certs@example.com"},
					Topologies:     []string{"E+PD", "E+P+D"}, Backends: []string{"shared_dir", "tcp"},
					Observables: false, TestHooks: true, FaultProxy: true, Destructive: true,
					ProducerQuotaBytes: 64 << 20, DecodeBudgetBytes: 32 << 20, ReferenceFormat: "baton-json-v1", CaseTimeout: 2 * time.Minute,
				},
				Endpoints: map[Role]string{RoleProducer: "10.0.0.5:50051", RoleConsumer: "127.0.0.1:2", RoleBaseline: "10.0.0.7:50051"},
			}
			if d := cmp.Diff(want, c); d != "" {
				t.Errorf("config (-want +got):\n%s", d)
			}
		}},
		{"empty variables count as unset", map[string]string{"BATON_NAME": "", "BATON_OBSERVABLES": "  ", "BATON_TOPOLOGIES": ""}, func(t *testing.T, c Config) {
			if c.Name != "file-name" || !c.Observables || len(c.Topologies) != 1 {
				t.Errorf("got name %q observables %v topologies %v; want the file's", c.Name, c.Observables, c.Topologies)
			}
		}},
		{"a TLS variable turns TLS on", map[string]string{"BATON_TLS_SERVER_NAME": "engine.example", "BATON_TLS_INSECURE_SKIP_VERIFY": "true"}, func(t *testing.T, c Config) {
			if c.TLS == nil || c.TLS.ServerName != "engine.example" || !c.TLS.InsecureSkipVerify {
				t.Errorf("TLS = %+v; want server name and skip-verify set", c.TLS)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadConfigEnv(path, envMap(tt.env))
			if err != nil {
				t.Fatalf("LoadConfigEnv = %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadConfigWithoutFile(t *testing.T) {
	t.Run("environment alone", func(t *testing.T) {
		c, err := LoadConfigEnv("", envMap(map[string]string{"BATON_ENDPOINT_CONSUMER": "h:1"}))
		if err != nil || c.Endpoints[RoleConsumer] != "h:1" || c.CaseTimeout != DefaultCaseTimeout {
			t.Fatalf("LoadConfigEnv = %+v, %v; want consumer h:1 and the default case timeout", c, err)
		}
	})
	t.Run("BATON_CONFIG names the file", func(t *testing.T) {
		path := writeProfile(t, minimalProfile)
		c, err := LoadConfigEnv("", envMap(map[string]string{EnvConfigPath: path}))
		if err != nil || c.Name != "file-name" {
			t.Fatalf("LoadConfigEnv = %+v, %v; want the file BATON_CONFIG names", c, err)
		}
	})
	t.Run("nothing at all", func(t *testing.T) {
		if _, err := LoadConfigEnv("", nil); err == nil || !strings.Contains(err.Error(), "no endpoints") {
			t.Fatalf("LoadConfigEnv with nothing = %v; want 'names no endpoints'", err)
		}
	})
	t.Run("process environment", func(t *testing.T) {
		path := writeProfile(t, minimalProfile)
		t.Setenv("BATON_LEVEL", "faults")
		c, err := LoadConfig(path)
		if err != nil || c.Level != "faults" {
			t.Fatalf("LoadConfig with BATON_LEVEL=faults = %q, %v", c.Level, err)
		}
	})
}

func TestLoadConfigRejectsBadValues(t *testing.T) {
	path := writeProfile(t, minimalProfile)
	tests := []struct {
		env      map[string]string
		want     error
		contains []string
	}{
		{map[string]string{"BATON_OBSERVABLES": "maybe"}, ErrBadEnv, []string{"BATON_OBSERVABLES", `"maybe"`, "want true or false"}},
		{map[string]string{"BATON_DESTRUCTIVE": "yes please"}, ErrBadEnv, []string{"BATON_DESTRUCTIVE"}},
		{map[string]string{"BATON_TLS_INSECURE_SKIP_VERIFY": "sure"}, ErrBadEnv, []string{"BATON_TLS_INSECURE_SKIP_VERIFY"}},
		{map[string]string{"BATON_CASE_TIMEOUT": "soon"}, ErrBadEnv, []string{"BATON_CASE_TIMEOUT", "duration"}},
		{map[string]string{"BATON_PRODUCER_QUOTA_BYTES": "64MiB"}, ErrBadEnv, []string{"BATON_PRODUCER_QUOTA_BYTES", "bytes"}},
		{map[string]string{"BATON_CASE_TIMEOUT": "-1s"}, ErrBadProfile, []string{"shorter than 1s"}},
		{map[string]string{"BATON_PRODUCER_QUOTA_BYTES": "-5"}, ErrBadProfile, []string{"negative"}},
		{map[string]string{"BATON_DECODE_BUDGET_BYTES": "-5"}, ErrBadProfile, []string{"decode_budget_bytes", "negative"}},
		{map[string]string{"BATON_DECODE_BUDGET_BYTES": "32MiB"}, ErrBadEnv, []string{"BATON_DECODE_BUDGET_BYTES", "whole number"}},
		{map[string]string{"BATON_LEVEL": "platinum"}, ErrBadProfile, []string{`"platinum"`}},
		{map[string]string{"BATON_TOPOLOGIES": "E+PD,E+DP"}, ErrBadProfile, []string{`"E+DP"`}},
		{map[string]string{"BATON_REFERENCE_FORMAT": "json"}, ErrBadProfile, []string{`"json"`}},
		{map[string]string{"BATON_MEDIA_FORMATS": "png,jpeg,bmp"}, ErrBadProfile, []string{`"bmp"`, "png, jpeg, gif or webp"}},
		{map[string]string{"BATON_MEDIA_FORMATS": "png,gif"}, ErrBadProfile, []string{"leaves out jpeg", "every engine must decode"}},
		{map[string]string{"BATON_MEDIA_FORMATS": "webp"}, ErrBadProfile, []string{"leaves out png"}},
		{map[string]string{"BATON_TLS_CERT_FILE": "client.pem"}, ErrBadTLS, []string{"without tls.key_file"}},
	}
	for _, tt := range tests {
		name := ""
		for k, v := range tt.env {
			name = k + "=" + v
		}
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfigEnv(path, envMap(tt.env))
			if !errors.Is(err, tt.want) {
				t.Fatalf("LoadConfigEnv(%s) = %v; want %v", name, err, tt.want)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestParseConfigRejectsMalformedProfiles(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown top-level key", "endpoints: {producer: h:1}\nobsevables: true\n", "obsevables"},
		{"unknown implementation key", "endpoints: {producer: h:1}\nimplementation: {vendr: x}\n", "vendr"},
		{"unknown tls key", "endpoints: {producer: h:1}\ntls: {ca: x}\n", "field ca not found"},
		{"unknown role", "endpoints: {encoder: h:1}\n", `unknown role "encoder"`},
		{"empty endpoint", "endpoints: {producer: ''}\n", "empty endpoint"},
		{"no endpoints", "name: x\n", "no endpoints"},
		{"wrong type", "endpoints: {producer: h:1}\nobservables: maybe\n", "cannot unmarshal"},
		{"bad duration", "endpoints: {producer: h:1}\ncase_timeout: soon\n", "time.Duration"},
		{"case timeout too short", "endpoints: {producer: h:1}\ncase_timeout: 1ns\n", "shorter than 1s"},
		{"negative case timeout", "endpoints: {producer: h:1}\ncase_timeout: -5s\n", "shorter than 1s"},
		{"case timeout too long", "endpoints: {producer: h:1}\ncase_timeout: 100000h\n", "longer than 1h0m0s"},
		{"not yaml", "endpoints: [\n", "parse profile"},
		{"bad topology", "endpoints: {producer: h:1}\ntopologies: [EPD]\n", `topology "EPD"`},
		{"consumer2 without consumer", "endpoints: {producer: h:1, consumer2: h:2}\n", "consumer2 but no consumer"},
		{"unknown media format", "endpoints: {producer: h:1}\nmedia_formats: [png, jpeg, tiff]\n", `"tiff"`},
		{"required media format left out", "endpoints: {producer: h:1}\nmedia_formats: [jpeg, webp]\n", "leaves out png"},
		{"tls key without cert", "endpoints: {producer: h:1}\ntls: {key_file: k.pem}\n", "without tls.cert_file"},
		{"tls skip verify with ca", "endpoints: {producer: h:1}\ntls: {ca_file: ca.pem, insecure_skip_verify: true}\n", "choose one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseConfig(%q) = %v; want an error mentioning %q", tt.yaml, err, tt.want)
			}
		})
	}
}

func TestParseConfigTLSBlock(t *testing.T) {
	c, err := ParseConfig([]byte("endpoints: {producer: h:1}\ntls: {}\n"))
	if err != nil || c.TLS == nil {
		t.Fatalf("ParseConfig(tls: {}) = %+v, %v; want TLS on with system roots", c.TLS, err)
	}
	c, err = ParseConfig([]byte("endpoints: {producer: h:1}\n"))
	if err != nil || c.TLS != nil {
		t.Fatalf("ParseConfig without tls = %+v, %v; want plaintext (nil TLS)", c.TLS, err)
	}
}

// yamlKeys lists the dotted yaml keys of every leaf field of v's type.
func yamlKeys(typ reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		if tag[0] == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if len(tag) > 1 && tag[1] == "inline" {
			keys = append(keys, yamlKeys(ft, prefix)...)
			continue
		}
		name := prefix + tag[0]
		switch {
		case ft == reflect.TypeOf(faultProxyKey{}): // true, or {listen, producer_control}
			keys = append(keys, name)
			keys = append(keys, yamlKeys(reflect.TypeOf(FaultProxyAddrs{}), name+".")...)
		case ft.Kind() == reflect.Map && fileOnlyKeys[name]:
			keys = append(keys, name)
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Duration(0)):
			keys = append(keys, yamlKeys(ft, name+".")...)
		case ft.Kind() == reflect.Map: // endpoints: one key per role
			for _, r := range []Role{RoleProducer, RoleConsumer, RolePrefill, RoleDecode, RoleBaseline, RoleSecondConsumer} {
				keys = append(keys, name+"."+string(r))
			}
		default:
			keys = append(keys, name)
		}
	}
	return keys
}

// fileOnlyKeys are profile keys no BATON_* variable overrides: a launch
// section's commands and environment come from the file only.
var fileOnlyKeys = map[string]bool{"launch.env": true, "launch.roles": true}

// TestEveryKeyHasOneEnvVar keeps the override table complete: a new profile
// field without a BATON_* variable fails here.
func TestEveryKeyHasOneEnvVar(t *testing.T) {
	byKey := map[string]string{}
	for _, ev := range EnvVars() {
		if prev, dup := byKey[ev.Key]; dup {
			t.Errorf("key %s has two variables: %s and %s", ev.Key, prev, ev.Name)
		}
		byKey[ev.Key] = ev.Name
		if !strings.HasPrefix(ev.Name, "BATON_") {
			t.Errorf("variable %s does not start with BATON_", ev.Name)
		}
	}
	var keys []string
	for _, k := range yamlKeys(reflect.TypeOf(configFile{}), "") {
		if !fileOnlyKeys[k] {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if _, ok := byKey[k]; !ok {
			t.Errorf("profile key %s has no BATON_* variable", k)
		}
	}
	if len(byKey) != len(keys) {
		t.Errorf("%d variables for %d keys (%v)", len(byKey), len(keys), keys)
	}
}

func TestEnvHelpListsEveryVariableAndThePrecedence(t *testing.T) {
	help := EnvHelp()
	if !strings.Contains(help, "flag > BATON_* environment variable > profile file") {
		t.Errorf("EnvHelp does not state the precedence:\n%s", help)
	}
	for _, ev := range EnvVars() {
		if !strings.Contains(help, ev.Name+" ") || !strings.Contains(help, ev.Key) {
			t.Errorf("EnvHelp does not list %s (%s)", ev.Name, ev.Key)
		}
	}
}

// TestExampleProfileDocumentsEveryKey: fixtures/target.example.yaml parses,
// and names every profile key and every BATON_* variable.
func TestExampleProfileDocumentsEveryKey(t *testing.T) {
	raw, err := os.ReadFile(exampleProfile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(raw)
	if err != nil {
		t.Fatalf("ParseConfig(%s) = %v", exampleProfile, err)
	}
	if c.Implementation.Vendor == "" || len(c.Endpoints) == 0 {
		t.Errorf("example profile lacks implementation or endpoints: %+v", c)
	}
	text := string(raw)
	for _, k := range yamlKeys(reflect.TypeOf(configFile{}), "") {
		leaf := k[strings.LastIndex(k, ".")+1:]
		if !strings.Contains(text, leaf+":") {
			t.Errorf("example profile does not show key %s", k)
		}
	}
	for _, ev := range EnvVars() {
		if !strings.Contains(text, ev.Name) {
			t.Errorf("example profile does not mention %s", ev.Name)
		}
	}
	if !strings.Contains(text, EnvConfigPath) {
		t.Errorf("example profile does not mention %s", EnvConfigPath)
	}
}

// TestDeclaredMediaFormats: the required formats are always declared, the
// optional ones only when listed, in a fixed order; the list is normalized.
func TestDeclaredMediaFormats(t *testing.T) {
	tests := []struct {
		yaml string
		want []string
	}{
		{"endpoints: {producer: h:1}\n", []string{"png", "jpeg"}},
		{"endpoints: {producer: h:1}\nmedia_formats: [png, jpeg]\n", []string{"png", "jpeg"}},
		{"endpoints: {producer: h:1}\nmedia_formats: [WebP, jpeg, png, webp]\n", []string{"png", "jpeg", "webp"}},
		{"endpoints: {producer: h:1}\nmedia_formats: [gif, png, jpeg, webp]\n", []string{"png", "jpeg", "gif", "webp"}},
	}
	for _, tt := range tests {
		c, err := ParseConfig([]byte(tt.yaml))
		if err != nil {
			t.Fatalf("ParseConfig(%q) = %v", tt.yaml, err)
		}
		if got := c.DeclaredMediaFormats(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseConfig(%q).DeclaredMediaFormats() = %v; want %v", tt.yaml, got, tt.want)
		}
		if !c.DeclaresMediaFormat(MediaPNG) || c.DeclaresMediaFormat("bmp") {
			t.Errorf("ParseConfig(%q): DeclaresMediaFormat(png) false or (bmp) true", tt.yaml)
		}
	}
	var code Profile // built in code, never validated: the required formats
	if got := code.DeclaredMediaFormats(); !reflect.DeepEqual(got, []string{"png", "jpeg"}) || code.DeclaresMediaFormat(MediaGIF) {
		t.Errorf("Profile{}.DeclaredMediaFormats() = %v; want [png jpeg]", got)
	}
	c, err := LoadConfigEnv(writeProfile(t, minimalProfile), envMap(map[string]string{"BATON_MEDIA_FORMATS": "png, jpeg, gif"}))
	if err != nil || !c.DeclaresMediaFormat(MediaGIF) || c.DeclaresMediaFormat(MediaWebP) {
		t.Errorf("BATON_MEDIA_FORMATS=png,jpeg,gif = %v, %v; want gif declared, webp not", c.MediaFormats, err)
	}
}
