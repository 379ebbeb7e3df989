// Package reports turns the outcomes of conformance cases into verdicts per
// rule, per level and overall, and writes them for people and for CI, all
// from one Results value: results.json (WriteJSON) and results.yaml
// (WriteYAML, the same keys), a JUnit XML file (WriteJUnit), a single
// self-contained report.html (WriteHTML: verdict banners, rule table linked
// to the contract text, failures with transcripts and reproduce commands,
// handoff latency histograms as inline SVG), one terminal line per rule,
// and a process exit code. A certification run adds a Certificate
// (IssueCertificate) and a submission bundle (WriteBundle: PRODUCT.yaml,
// README.md, results.yaml, junit.xml, report.html, SHA256SUMS) that
// VerifyBundle re-checks.
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
// library and yaml.v3, never the conformance suite or an engine, so any
// runner (the in-process Ginkgo run, plain go test, the simulator) can feed
// it; what it must know about the contract (the level table a bundle must
// satisfy, each rule's sentence) is handed to it. Subpackage headless
// renders report.html in headless Chromium for tests.
//
// Typical use:
//
//	res := reports.Summarize(cases, rulesByLevel)
//	res.Tool, res.Target = "baton check", profile.Name
//	_ = reports.WriteJSON(filepath.Join(dir, "results.json"), res)
//	_ = reports.WriteYAML(filepath.Join(dir, "results.yaml"), res)
//	_ = reports.WriteJUnit(filepath.Join(dir, "junit.xml"), res)
//	_ = reports.WriteHTML(filepath.Join(dir, "report.html"), res)
//	for _, l := range res.Lines() { fmt.Println(l) }
//	os.Exit(reports.ExitCode(res))
package reports
