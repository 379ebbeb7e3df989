// Package contract is baton's copy of the contract it certifies,
// ../shared/spec/CONTRACT.md, compiled in: the certification bundle ships it
// (so report.html's rule links resolve) and report.html shows each rule's
// text from it. The copy is generated (`go run ./conformance/testlist/gen`
// writes it with conformance.yaml) and `make verify` checks it is current
// (TestCopyIsCurrent). It imports only the standard library.
package contract

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// FileName is the contract's file name, in a bundle and beside report.html.
const FileName = "CONTRACT.md"

//go:embed CONTRACT.md
var markdown []byte

// Markdown returns the compiled-in CONTRACT.md (a copy).
func Markdown() []byte { return bytes.Clone(markdown) }

var (
	rulesOnce sync.Once
	rules     map[string]Requirement
)

// Rules returns every rule entry of the compiled-in CONTRACT.md by rule ID
// ("SU-2"); empty if the copy does not parse (TestCopyParses keeps it
// parsing).
func Rules() map[string]Requirement {
	rulesOnce.Do(func() {
		rules = map[string]Requirement{}
		reqs, err := Parse(markdown)
		if err != nil {
			return
		}
		for _, r := range reqs {
			rules[r.Rule] = r
		}
	})
	out := make(map[string]Requirement, len(rules))
	for k, v := range rules {
		out[k] = v
	}
	return out
}

// Requirement is one rule's entry of CONTRACT.md section 3
// (`- **SU-2** Presenting a spent reference ...`).
type Requirement struct {
	// Rule is the rule ID ("SU-2").
	Rule string
	// Sentence is the first sentence of the entry (FirstSentence).
	Sentence string
	// Text is the whole entry, markdown as written.
	Text string
	// Section is the GitHub anchor of the heading above the entry
	// ("single-use-su" for "### Single use (SU)").
	Section string
}

// ruleEntry matches a rule's list item in CONTRACT.md.
var ruleEntry = regexp.MustCompile(`^- \*\*([A-Z]{1,2}-[0-9]+)\*\*\s+(.+)$`)

// Parse extracts every rule entry of CONTRACT.md, in file order.
// An entry is one line `- **RULE-ID** text`; its section is the nearest
// heading above it. A rule ID listed twice, or an entry with no sentence,
// is an error naming the line.
func Parse(md []byte) ([]Requirement, error) {
	var out []Requirement
	seen := map[string]int{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \r")
		if h, ok := strings.CutPrefix(line, "#"); ok {
			section = Slug(strings.TrimLeft(h, "#"))
			continue
		}
		m := ruleEntry.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if prev, dup := seen[m[1]]; dup {
			return nil, fmt.Errorf("contract: CONTRACT.md line %d: rule %s already listed on line %d", n, m[1], prev)
		}
		seen[m[1]] = n
		text := strings.TrimSpace(m[2])
		s := FirstSentence(text)
		if s == "" {
			return nil, fmt.Errorf("contract: CONTRACT.md line %d: rule %s has no sentence", n, m[1])
		}
		out = append(out, Requirement{Rule: m[1], Sentence: s, Text: text, Section: section})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("contract: read CONTRACT.md: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("contract: CONTRACT.md lists no rule (want lines `- **SU-1** ...`)")
	}
	return out, nil
}

// FirstSentence returns the first sentence of a rule entry: the text up to
// and including the first '.' that is outside `code` and parentheses and
// is followed by whitespace and a capital letter, '(' or '`' (or ends the
// text). Abbreviations "e.g." and "i.e." never end a sentence. Whitespace
// runs are folded to one space.
func FirstSentence(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	rs := []rune(text)
	inCode, depth := false, 0
	for i, r := range rs {
		switch r {
		case '`':
			inCode = !inCode
		case '(':
			if !inCode {
				depth++
			}
		case ')':
			if !inCode && depth > 0 {
				depth--
			}
		case '.':
			if inCode || depth > 0 {
				continue
			}
			if i+1 == len(rs) {
				return string(rs)
			}
			if rs[i+1] != ' ' || i+2 >= len(rs) {
				continue
			}
			next := rs[i+2]
			if !unicode.IsUpper(next) && next != '(' && next != '`' {
				continue
			}
			before := strings.ToLower(string(rs[max(0, i-3):i]))
			if strings.HasSuffix(before, "e.g") || strings.HasSuffix(before, "i.e") {
				continue
			}
			return string(rs[:i+1])
		}
	}
	return string(rs)
}

// Slug is GitHub's anchor for a markdown heading: lower case, letters,
// digits, '-' and '_' kept, spaces turned into '-', everything else
// dropped ("Single use (SU)" -> "single-use-su").
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
