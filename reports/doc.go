// Package reports turns the outcomes of conformance cases into verdicts per
// rule, per level and overall, and writes them for people and for CI: a
// results.json (Results, snake_case keys), a JUnit XML file, one terminal line
// per rule, and a process exit code.
//
// The vocabulary is CONTRACT.md "Outcomes of a check": passed, failed, error
// (the harness could not run the case), not applicable (the target does not
// serve the topology, role or backend the rule is about) and not verifiable
// (the rule applies but the target lacks an observable or hook the check
// needs). A rule's verdict is the worst of its cases'; `not applicable` never
// counts as passed, and a rule of a level that no case checked is `not
// verifiable`, never silently passed (CONTRACT section 5).
//
// The package is data first and stands alone: it imports only the standard
// library, never the conformance suite or an engine, so any runner (the
// in-process Ginkgo run, plain go test, the simulator) can feed it.
//
// Typical use:
//
//	res := reports.Summarize(cases, rulesByLevel)
//	res.Tool, res.Target = "baton check", profile.Name
//	_ = reports.WriteJSON(filepath.Join(dir, "results.json"), res)
//	_ = reports.WriteJUnit(filepath.Join(dir, "junit.xml"), res)
//	for _, l := range res.Lines() { fmt.Println(l) }
//	os.Exit(reports.ExitCode(res))
package reports
