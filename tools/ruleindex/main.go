// Command ruleindex regenerates conformance/rules.yaml, the rule index:
// for every CONTRACT rule (conformance/conformance.yaml), every place it
// lives in this repository. Run it from the repository root:
//
//	go run ./tools/ruleindex [-out conformance/rules.yaml]     # make rule-index
//
// It reads the code: the suite's case registry and the mutant tables are
// imported (suite.Cases, mutants.All, mutants.InProcess, sim.Mutants,
// executorworld.Mutations); the property's actions and the simulator's
// checkers are found by parsing conformance/props and sim (go/parser); only
// the engine's decision functions are a hand-kept map (engine.go), whose
// every entry the test looks up. TestCommittedIndexIsCurrent fails when the
// committed file differs from what this produces, TestIndexPlacesExist
// when a place it lists does not exist.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "conformance/rules.yaml", "the index to write")
	candidates := flag.Bool("candidates", false, "print, for each rule, the engine functions whose string literals name it (help for keeping engine.go), and exit")
	flag.BoolVar(&allowNoEngine, "draft", false, "write the index even where engine.go names no decision for a rule")
	flag.Parse()
	if *candidates {
		if err := printCandidates("."); err != nil {
			fmt.Fprintln(os.Stderr, "ruleindex:", err)
			os.Exit(1)
		}
		return
	}
	idx, err := Build(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ruleindex:", err)
		os.Exit(1)
	}
	raw, err := Marshal(idx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ruleindex:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, raw, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "ruleindex:", err)
		os.Exit(1)
	}
	fmt.Printf("ruleindex: wrote %s: %d rules\n", *out, len(idx.Rules))
}
