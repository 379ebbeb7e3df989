// Command gen regenerates conformance/conformance.yaml, baton's test list,
// from the contract (CONTRACT.md) and the case registry (package testlist).
// Run it from the repository root:
//
//	go run ./conformance/testlist/gen [-contract ../shared/spec/CONTRACT.md] [-out conformance/conformance.yaml]
//
// It exits 1 when the specs and the registry disagree (a rule of a level
// missing from CONTRACT.md, a contract rule in no level), naming each
// problem.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/baton-dev/baton/conformance/testlist"
)

func main() {
	contract := flag.String("contract", "../shared/spec/CONTRACT.md", "the contract to read rule sentences from")
	out := flag.String("out", "conformance/conformance.yaml", "the test list to write")
	copyTo := flag.String("copy", "internal/contract/CONTRACT.md", "where to write the compiled-in copy of the contract (\"\" = none)")
	wire := flag.String("wire", "../shared/spec/WIRE.md", "the wire facts to copy beside it, so a clone has what a vendor implements against (\"\" = none)")
	wireTo := flag.String("wire-copy", "internal/contract/WIRE.md", "where to write the copy of the wire facts")
	flag.Parse()
	md, err := os.ReadFile(*contract)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	l, err := testlist.Build(md)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	raw, err := testlist.Marshal(l)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, raw, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if *copyTo != "" {
		if err := os.WriteFile(*copyTo, md, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Printf("gen: wrote %s\n", *copyTo)
	}
	if *wire != "" {
		w, err := os.ReadFile(*wire)
		if err == nil {
			err = os.WriteFile(*wireTo, w, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Printf("gen: wrote %s\n", *wireTo)
	}
	cases := 0
	for _, r := range l.Rules {
		cases += len(r.Cases)
	}
	fmt.Printf("gen: wrote %s: %d rules, %d cases\n", *out, len(l.Rules), cases)
}
