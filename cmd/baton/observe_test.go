package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-dev/baton/internal/progress"
	"github.com/spf13/cobra"
)

func TestServeMetricsServesOnlyMetrics(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "baton_up 1\n") })
	stop := serveMetrics(lis, h, slog.New(slog.DiscardHandler))
	defer stop()
	base := "http://" + lis.Addr().String()
	tests := []struct {
		method, path string
		code         int
		body         string
	}{
		{http.MethodGet, "/metrics", http.StatusOK, "baton_up 1"},
		{http.MethodGet, "/", http.StatusNotFound, ""},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, base+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.body) {
			t.Errorf("%s %s = %d %q; want %d containing %q", tt.method, tt.path, resp.StatusCode, body, tt.code, tt.body)
		}
	}
	stop()
	if _, err := http.Get(base + "/metrics"); err == nil {
		t.Errorf("metrics still served after stop")
	}
}

func TestProgressModeFlagBeatsEnv(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    progress.Mode
		wantErr bool
	}{
		{"default without a terminal", nil, nil, progress.Lines, false},
		{"env", nil, map[string]string{envProgress: "off"}, progress.Off, false},
		{"flag beats env", []string{"--progress", "bar"}, map[string]string{envProgress: "off"}, progress.Bar, false},
		{"empty env counts as unset", nil, map[string]string{envProgress: ""}, progress.Lines, false},
		{"bad flag", []string{"--progress", "sparkles"}, nil, progress.Auto, true},
		{"bad env", nil, map[string]string{envProgress: "sparkles"}, progress.Auto, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mode string
			cmd := &cobra.Command{Use: "x"}
			addProgressFlag(cmd, &mode)
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			p, err := newProgressOn(&bytes.Buffer{}, cmd, mode, "cases", lookup)
			if (err != nil) != tt.wantErr {
				t.Fatalf("newProgressOn = %v; want error %v", err, tt.wantErr)
			}
			if err == nil && p.Mode() != tt.want {
				t.Errorf("mode = %v; want %v", p.Mode(), tt.want)
			}
		})
	}
}
