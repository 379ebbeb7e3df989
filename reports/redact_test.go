package reports_test

import (
	"reflect"
	"testing"

	"github.com/baton-dev/baton/reports"
)

func TestRedactConfig(t *testing.T) {
	in := map[string]any{
		"name":           "engine",
		"implementation": map[string]any{"contact": "dev@example.org", "vendor": "Example"},
		"endpoints":      map[string]any{"producer": "user:hunter2@10.0.0.5:50051", "consumer": "10.0.0.6:50051"},
		"tls":            map[string]any{"ca_file": "/etc/ca.pem", "cert_file": "client.pem", "key_file": "/secret/client.key", "insecure_skip_verify": false},
		"api_token":      "abc123",
		"password":       "",
		"extra":          []any{"https://bob:pw@example.org/x", map[string]any{"client_secret": 42}},
		"observables":    true,
		"quota":          67108864,
	}
	want := map[string]any{
		"name":           "engine",
		"implementation": map[string]any{"contact": "dev@example.org", "vendor": "Example"},
		"endpoints":      map[string]any{"producer": "10.0.0.5:50051", "consumer": "10.0.0.6:50051"},
		"tls":            map[string]any{"ca_file": "/etc/ca.pem", "cert_file": "client.pem", "key_file": reports.Redacted, "insecure_skip_verify": false},
		"api_token":      reports.Redacted,
		"password":       "",
		"extra":          []any{"https://example.org/x", map[string]any{"client_secret": reports.Redacted}},
		"observables":    true,
		"quota":          67108864,
	}
	got := reports.RedactConfig(in)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RedactConfig =\n%#v\nwant\n%#v", got, want)
	}
	if in["api_token"] != "abc123" || in["endpoints"].(map[string]any)["producer"] != "user:hunter2@10.0.0.5:50051" {
		t.Error("RedactConfig changed its input")
	}
	if reports.RedactConfig(nil) != nil {
		t.Error("RedactConfig(nil) != nil")
	}
}
