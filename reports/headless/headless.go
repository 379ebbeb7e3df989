// Package headless renders a report page (report.html) in headless Chromium
// for tests: the page's DOM after its scripts ran, every message it wrote
// to the browser console (script errors, Content-Security-Policy
// violations, console.* calls), and a PNG screenshot.
//
// It drives the Debian `chromium` package's binary with plain command-line
// switches (--dump-dom, --screenshot, --enable-logging=stderr), no
// debugging protocol: the console reaches Chromium's log as
// "INFO:CONSOLE(<line>)] "<message>", source: <url> (<line>)" lines, which
// Render collects. A report writes nothing to the console, so any such
// line is an error.
//
// Tests find the browser with Browser: it skips the test when none is
// installed, unless CI=true, where a missing browser fails it.
package headless

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// EnvBrowser names a Chromium binary to use instead of searching.
const EnvBrowser = "BATON_CHROMIUM"

// Candidates are the binaries Find looks for, in order: the Debian package's
// path first, then names on PATH.
var Candidates = []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// WindowWidth and WindowHeight are the viewport of Render's screenshot, in
// CSS pixels.
const (
	WindowWidth  = 1280
	WindowHeight = 2400
)

// ErrNoBrowser: no Chromium binary was found (EnvBrowser, Candidates).
var ErrNoBrowser = errors.New("headless: no Chromium binary found (apt-get install chromium, or set " + EnvBrowser + ")")

// Find returns the Chromium binary to use: $BATON_CHROMIUM when set (it
// must exist), else the first of Candidates that exists; ErrNoBrowser
// otherwise.
func Find() (string, error) {
	if p := os.Getenv(EnvBrowser); p != "" {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
		return "", fmt.Errorf("%w: %s=%s is not executable", ErrNoBrowser, EnvBrowser, p)
	}
	for _, c := range Candidates {
		if path, err := exec.LookPath(c); err == nil {
			return path, nil
		}
	}
	return "", ErrNoBrowser
}

// TB is the part of testing.TB Browser uses.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Browser returns the Chromium binary for a test. Without one it skips the
// test with a message, or fails it when the environment has CI=true (a CI
// machine must have the browser: .ci/run installs it).
func Browser(t TB) string {
	t.Helper()
	path, err := Find()
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %v", err)
	}
	t.Skipf("skipping the browser check: %v", err)
	return ""
}

// Page is what Render saw.
type Page struct {
	// DOM is the serialized document after load (--dump-dom).
	DOM string
	// Console holds every console message of the page, one per entry
	// ("Uncaught ReferenceError: x is not defined (file:///.../report.html:12)").
	Console []string
	// Screenshot is the path of the PNG screenshot ("" when none was asked).
	Screenshot string
}

// consoleLine matches Chromium's log line for a console message:
// `[pid:tid:date:INFO:CONSOLE(12)] "message", source: url (12)`, or
// `...:INFO:CONSOLE:12] ...` in newer builds.
var consoleLine = regexp.MustCompile(`:CONSOLE(?:\((\d+)\)|:(\d+))\] (.*)$`)

// Flags are the switches of every Chromium run: headless, no sandbox (CI
// containers run as root), no GPU, and nothing that reaches the network
// on its own (background networking, component updates, sync, QUIC).
var Flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
	"--enable-logging=stderr", "--v=0",
}

// Render loads the HTML file htmlPath in headless Chromium twice, each
// with a fresh profile directory: once to dump the DOM and collect console
// messages, once (when shotPath != "") to take a WindowWidth x WindowHeight
// screenshot into shotPath (console messages of that run are collected
// too). ctx bounds both runs. Errors: the browser cannot run or exits
// non-zero, or the screenshot was not written.
func Render(ctx context.Context, browser, htmlPath, shotPath string) (Page, error) {
	return RenderFragment(ctx, browser, htmlPath, "", shotPath)
}

// RenderFragment is Render with a URL fragment ("show=failed": the page
// reads location.hash on load), so a test can see what the page's own
// script does with it.
func RenderFragment(ctx context.Context, browser, htmlPath, fragment, shotPath string) (Page, error) {
	abs, err := filepath.Abs(htmlPath)
	if err != nil {
		return Page{}, err
	}
	u := (&url.URL{Scheme: "file", Path: abs, Fragment: fragment}).String()
	var page Page
	stdout, stderr, err := run(ctx, browser, "--dump-dom", u)
	if err != nil {
		return Page{}, err
	}
	page.DOM = stdout
	page.Console = append(page.Console, ConsoleMessages(stderr)...)
	if shotPath != "" {
		shot, err := filepath.Abs(shotPath)
		if err != nil {
			return Page{}, err
		}
		if err := os.MkdirAll(filepath.Dir(shot), 0o755); err != nil {
			return Page{}, err
		}
		_ = os.Remove(shot)
		_, stderr, err := run(ctx, browser, "--screenshot="+shot, fmt.Sprintf("--window-size=%d,%d", WindowWidth, WindowHeight), u)
		if err != nil {
			return Page{}, err
		}
		if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
			return Page{}, fmt.Errorf("headless: no screenshot at %s (stderr tail: %s)", shot, tail(stderr, 600))
		}
		page.Screenshot = shot
		page.Console = append(page.Console, ConsoleMessages(stderr)...)
	}
	return page, nil
}

// run starts the browser once with a fresh profile directory.
func run(ctx context.Context, browser string, args ...string) (stdout, stderr string, err error) {
	profile, err := os.MkdirTemp("", "baton-chromium-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(profile)
	all := append(append([]string{}, Flags...), "--user-data-dir="+profile)
	all = append(all, args...)
	cmd := exec.CommandContext(ctx, browser, all...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "HOME="+profile) // keep the browser away from the real home
	if err := cmd.Run(); err != nil {
		return out.String(), errb.String(), fmt.Errorf("headless: %s %s: %w (stderr tail: %s)", browser, strings.Join(args, " "), err, tail(errb.String(), 600))
	}
	return out.String(), errb.String(), nil
}

// ConsoleMessages extracts the console messages from Chromium's log
// (stderr with --enable-logging=stderr), in order.
func ConsoleMessages(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if m := consoleLine.FindStringSubmatch(strings.TrimRight(l, "\r")); m != nil {
			out = append(out, m[3])
		}
	}
	return out
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
