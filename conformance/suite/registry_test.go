package suite

import (
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// funcName is the bare name of the function registered as c.Run ("SU2ReplayRejected").
func funcName(c Case) string {
	full := runtime.FuncForPC(reflect.ValueOf(c.Run).Pointer()).Name()
	return full[strings.LastIndex(full, ".")+1:]
}

var ruleID = regexp.MustCompile(`^[A-Z]+-[0-9]+$`)

func TestCasesRegistry(t *testing.T) {
	cs := Cases()
	if len(cs) == 0 {
		t.Fatal("Cases() = none")
	}
	levelOf := map[string]Level{}
	for lvl, rules := range RulesByLevel() {
		for _, r := range rules {
			if prev, dup := levelOf[r]; dup {
				t.Errorf("RulesByLevel lists %s under %s and %s", r, prev, lvl)
			}
			levelOf[r] = lvl
		}
	}
	for _, f := range FeatureRules() {
		levelOf[f.Rule] = LevelCore // checked at every level when declared
	}
	names := map[string]bool{}
	funcs := map[string]bool{}
	seenDestructive := false
	for i, c := range cs {
		if !ruleID.MatchString(c.Rule) {
			t.Errorf("case %d rule %q; want an ID like SU-2", i, c.Rule)
		}
		if !strings.HasPrefix(c.Name, c.Rule+" ") {
			t.Errorf("case %q does not start with its rule %q and a space", c.Name, c.Rule)
		}
		if names[c.Name] {
			t.Errorf("case name %q registered twice", c.Name)
		}
		names[c.Name] = true
		if c.Run == nil {
			t.Fatalf("case %q has no Run", c.Name)
		}
		fn := funcName(c)
		if !unicode.IsUpper(rune(fn[0])) {
			t.Errorf("case %q runs %s; want an exported function", c.Name, fn)
		}
		if funcs[fn] && !c.UnderFaults && !c.ViaPrefill {
			t.Errorf("function %s registered twice", fn)
		}
		funcs[fn] = true
		if want := strings.ReplaceAll(c.Rule, "-", ""); !strings.HasPrefix(fn, want) {
			t.Errorf("case %q runs %s; want a function named after its rule (%s...)", c.Name, fn, want)
		}
		if c.UnderFaults {
			if c.Level != LevelFaults || !slices.Contains(c.Labels, LabelNeedsFaultProxy) {
				t.Errorf("under-faults case %q: level %q, labels %v; want faults and %s", c.Name, c.Level, c.Labels, LabelNeedsFaultProxy)
			}
		} else if slices.Contains(c.Labels, LabelNeedsFaultProxy) {
			if c.Level != LevelFaults {
				t.Errorf("case %q needs the fault proxy at level %q; want faults", c.Name, c.Level)
			}
		} else if lvl, ok := levelOf[c.Rule]; !ok || lvl != c.Level {
			t.Errorf("case %q level %q; want %q from RulesByLevel", c.Name, c.Level, lvl)
		}
		if c.Destructive {
			seenDestructive = true
		} else if seenDestructive {
			t.Errorf("non-destructive case %q registered after a destructive one", c.Name)
		}
		for _, l := range c.Labels {
			if strings.ContainsAny(l, "&|!,()/") || strings.HasPrefix(l, ":") {
				t.Errorf("case %q label %q is not a valid Ginkgo label", c.Name, l)
			}
		}
	}
	for _, r := range RulesByLevel()[LevelCore] {
		if len(CasesForRule(r)) == 0 {
			t.Errorf("Core rule %s has no case", r)
		}
	}
	if !slices.Equal(Cases()[0].Labels, cs[0].Labels) || len(Cases()) != len(cs) {
		t.Errorf("Cases() is not stable across calls")
	}
}

func TestRulesByLevelMatchesContract(t *testing.T) {
	want := map[Level]string{
		LevelCore:      "SU-1 SU-2 SU-3 SU-4 SU-5 L-1 L-2 L-3 L-4 L-5 L-6 N-1 N-2 S-1 B-1 B-2 H-3 H-5",
		LevelLifecycle: "C-1 C-2 C-3 C-5 C-6 C-7 R-1 R-2 H-1 H-2 H-4 X-1 X-2 SU-6 S-2 S-4",
		LevelFaults:    "Q-1 Q-2 Q-3 Q-4 Q-5 Q-6 C-4 S-3 SE-3 SE-4 SE-5",
	}
	got := RulesByLevel()
	if len(got) != len(want) {
		t.Errorf("RulesByLevel has %d levels; want %d", len(got), len(want))
	}
	for lvl, rules := range want {
		if g := strings.Join(got[lvl], " "); g != rules {
			t.Errorf("RulesByLevel()[%s] = %s; want %s", lvl, g, rules)
		}
	}
	got[LevelCore][0] = "mutated"
	if RulesByLevel()[LevelCore][0] != "SU-1" {
		t.Errorf("RulesByLevel returns shared slices")
	}
}

func TestCasesForRuleUnknown(t *testing.T) {
	if cs := CasesForRule("Z-9"); len(cs) != 0 {
		t.Errorf("CasesForRule(Z-9) = %d cases; want none", len(cs))
	}
	if cs := CasesForRule(""); len(cs) != 0 {
		t.Errorf("CasesForRule(\"\") = %d cases; want none", len(cs))
	}
}
