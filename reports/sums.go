package reports

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// SumsFile is the checksum file of a bundle, in sha256sum's format.
const SumsFile = "SHA256SUMS"

// sumsLine matches one line of `sha256sum` output: 64 hex digits, a space,
// a space or '*' (binary mode), the file name.
var sumsLine = regexp.MustCompile(`^([0-9a-f]{64}) [ *](.+)$`)

// FileSHA256 returns the lower-case hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteSums writes dir/SHA256SUMS over every regular file directly in dir
// except SHA256SUMS itself, sorted by name, one "<sha256>  <name>" line each
// (`sha256sum -c SHA256SUMS` checks it). A subdirectory or other non-regular
// entry is an error: a bundle is flat.
func WriteSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reports: bundle: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() == SumsFile {
			continue
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("reports: bundle: %s is not a regular file (a bundle is one flat directory)", filepath.Join(dir, e.Name()))
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		sum, err := FileSHA256(filepath.Join(dir, n))
		if err != nil {
			return fmt.Errorf("reports: bundle: %w", err)
		}
		fmt.Fprintf(&buf, "%s  %s\n", sum, n)
	}
	return writeFileAtomic(filepath.Join(dir, SumsFile), buf.Bytes())
}

// ParseSums parses a SHA256SUMS file: name -> hex digest. Blank lines are
// skipped; a malformed line, a name with a path separator or "..", or a
// name listed twice is an error naming the line.
func ParseSums(raw []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := sumsLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s line %d: %q is not \"<sha256>  <name>\"", SumsFile, n, truncate(line, 80))
		}
		name := m[2]
		if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return nil, fmt.Errorf("%s line %d: %q is not a file of the bundle directory", SumsFile, n, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s line %d: %s listed twice", SumsFile, n, name)
		}
		out[name] = m[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", SumsFile, err)
	}
	return out, nil
}
