package reports

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Redacted replaces a secret value in a redacted configuration.
const Redacted = "<redacted>"

// secretKey matches configuration keys whose values are secrets or point
// at them: passwords, tokens, API keys, private keys and their files,
// credentials. "key_file" is redacted; "keys"-like counters are not.
var secretKey = regexp.MustCompile(`(?i)(secret|passw|token|credential|api_?key|private|(^|_)key($|_)|auth)`)

// userinfo matches "scheme://user:pass@" or "user:pass@" at the start of an
// address.
var userinfo = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://)?[^/@\s]+@`)

// RedactConfig returns a deep copy of cfg (a target profile decoded as a
// generic YAML/JSON object) with secrets removed: the value of every key
// that names a secret (password, token, api_key, key_file, private,
// credential, auth, secret) becomes Redacted, and user information in
// addresses ("user:pass@host:port" under endpoints, or any URL) is dropped;
// an e-mail contact is kept. Whole JSON numbers become int64. Maps, slices and scalars of
// other keys are kept as they are. nil gives nil.
func RedactConfig(cfg map[string]any) map[string]any {
	if cfg == nil {
		return nil
	}
	out, _ := redactValue("", "", cfg).(map[string]any)
	return out
}

// redactValue redacts v, found under key in a map whose own key is parent.
func redactValue(parent, key string, v any) any {
	if key != "" && secretKey.MatchString(key) {
		if v == nil {
			return nil
		}
		if s, ok := v.(string); ok && s == "" {
			return ""
		}
		if b, ok := v.(bool); ok {
			return b // a switch ("insecure_skip_verify"-like) is not a secret
		}
		return Redacted
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out[k] = redactValue(key, k, x[k])
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(key, "", e)
		}
		return out
	case json.Number, float64, float32:
		return normalizeNumber(x)
	case string:
		if strings.Contains(x, "://") || parent == "endpoints" || key == "endpoints" {
			return redactAddress(x)
		}
		return x
	default:
		return v
	}
}

// normalizeNumber turns a JSON number that is a whole number into an
// int64 (so YAML writes 33554432, not 3.3554432e+07), others into float64.
func normalizeNumber(v any) any {
	var f float64
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		g, err := x.Float64()
		if err != nil {
			return x.String()
		}
		f = g
	case float64:
		f = x
	case float32:
		f = float64(x)
	default:
		return v
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// configYAML renders a configuration for people (numbers normalized), or ""
// when there is none or it cannot be encoded.
func configYAML(cfg map[string]any) string {
	if len(cfg) == 0 {
		return ""
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(RedactConfig(cfg)); err != nil {
		return ""
	}
	return buf.String()
}

// redactAddress drops user information from an address or URL.
func redactAddress(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	if u, err := url.Parse(s); err == nil && u.User != nil && u.Host != "" {
		u.User = nil
		return u.String()
	}
	if userinfo.MatchString(s) {
		m := userinfo.FindStringSubmatch(s)
		return m[1] + s[len(m[0]):]
	}
	return s
}
