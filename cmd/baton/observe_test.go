package main

import (
	"bytes"
	"testing"

	"github.com/baton-dev/baton/internal/progress"
	"github.com/spf13/cobra"
)

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
