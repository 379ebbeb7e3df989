package reports

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// EngineIdentity is what one endpoint of a run said about itself when the
// harness probed it: GetServerInfo's engine name and version and
// ServerInfo.extra["baton.preset"], GetModelInfo's model id. The
// cross-implementation matrix (Matrix) names a run's producer and
// consumer implementations by EngineName.
type EngineIdentity struct {
	// Role is the profile's endpoint key ("producer", "consumer", "baseline", ...).
	Role string `json:"role" yaml:"role"`
	// Address is the endpoint's host:port.
	Address string `json:"address" yaml:"address"`
	// EngineName and EngineVersion are ServerInfo.engine_name and engine_version.
	EngineName    string `json:"engine_name" yaml:"engine_name"`
	EngineVersion string `json:"engine_version,omitempty" yaml:"engine_version,omitempty"` // "" when the engine gave none
	// Model is ModelInfo.model_id ("" when the engine gave none).
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
	// Preset is ServerInfo.extra["baton.preset"] ("" when absent).
	Preset string `json:"preset,omitempty" yaml:"preset,omitempty"`
}

// Engine returns the identity recorded for role, or false.
func (r Results) Engine(role string) (EngineIdentity, bool) {
	for _, e := range r.Engines {
		if e.Role == role {
			return e, true
		}
	}
	return EngineIdentity{}, false
}

// MatrixCell is one run of the cross-implementation matrix: the producer
// (E) of one implementation handing off to the consumer (PD) of another,
// with the consumer implementation's aggregated engine as the baseline.
type MatrixCell struct {
	// Producer and Consumer name the implementations (EngineIdentity.EngineName).
	Producer string `json:"producer" yaml:"producer"`
	Consumer string `json:"consumer" yaml:"consumer"` // the consumer's, whose baseline the cell uses
	// Verdict is the run's verdict (Results.Verdict).
	Verdict Outcome `json:"verdict" yaml:"verdict"`
	// Rules maps a rule ID to its verdict in this run.
	Rules map[string]Outcome `json:"rules" yaml:"rules"`
	// Messages maps a rule ID to the message of its verdict, for rules that
	// did not pass (the reason a rule is not applicable for a mixed pair is
	// here too).
	Messages map[string]string `json:"messages,omitempty" yaml:"messages,omitempty"`
	// Source is where the run's results were read from ("" when built in memory).
	Source string `json:"source,omitempty" yaml:"source,omitempty"`
}

// Matrix is the cross-implementation matrix, in the manner of gRPC's
// interop matrix: producer implementation x consumer implementation ->
// verdict per rule.
type Matrix struct {
	// Producers and Consumers are the implementations on each axis, sorted.
	Producers []string `json:"producers" yaml:"producers"`
	Consumers []string `json:"consumers" yaml:"consumers"` // the consumer axis
	// Rules are every rule that appears in some cell, in the order of the
	// first run that reports it.
	Rules []string `json:"rules" yaml:"rules"`
	// Cells are the runs, sorted by producer then consumer.
	Cells []MatrixCell `json:"cells" yaml:"cells"`
	// Verdict is the worst cell verdict.
	Verdict Outcome `json:"verdict" yaml:"verdict"`
}

// MatrixCellOf makes the cell of one run from its results. The producer
// and consumer implementations are the engine names the run recorded for
// its "producer" and "consumer" endpoints (Results.Engines).
//
// Errors: the results recorded no identity for the producer or the
// consumer (a run made by a baton that did not record engines).
func MatrixCellOf(r Results, source string) (MatrixCell, error) {
	p, okP := r.Engine("producer")
	c, okC := r.Engine("consumer")
	if !okP || !okC || p.EngineName == "" || c.EngineName == "" {
		return MatrixCell{}, fmt.Errorf("reports: matrix: results %s record no engine name for its producer and consumer (run by a baton that predates the matrix?)", orUnnamed(source))
	}
	cell := MatrixCell{Producer: p.EngineName, Consumer: c.EngineName, Verdict: r.Verdict, Rules: map[string]Outcome{}, Messages: map[string]string{}, Source: source}
	for _, rr := range r.Rules {
		cell.Rules[rr.Rule] = Worst(cell.Rules[rr.Rule], rr.Outcome)
		if rr.Outcome != Passed && rr.Message != "" {
			if _, seen := cell.Messages[rr.Rule]; !seen {
				cell.Messages[rr.Rule] = rr.Message
			}
		}
	}
	return cell, nil
}

func orUnnamed(s string) string {
	if s == "" {
		return "(in memory)"
	}
	return s
}

// BuildMatrix assembles the matrix from its cells (MatrixCellOf), one per
// producer x consumer pair, and from the rule order of runs (the first
// run's rule order first; rules only later runs report follow).
//
// Errors: two cells for one pair; no cell at all.
func BuildMatrix(cells []MatrixCell, ruleOrder [][]string) (Matrix, error) {
	if len(cells) == 0 {
		return Matrix{}, fmt.Errorf("reports: matrix: no runs")
	}
	m := Matrix{}
	seen := map[[2]string]string{}
	for _, c := range cells {
		k := [2]string{c.Producer, c.Consumer}
		if prev, dup := seen[k]; dup {
			return Matrix{}, fmt.Errorf("reports: matrix: two runs for producer %s x consumer %s (%s and %s)", c.Producer, c.Consumer, orUnnamed(prev), orUnnamed(c.Source))
		}
		seen[k] = c.Source
		if !slices.Contains(m.Producers, c.Producer) {
			m.Producers = append(m.Producers, c.Producer)
		}
		if !slices.Contains(m.Consumers, c.Consumer) {
			m.Consumers = append(m.Consumers, c.Consumer)
		}
		m.Verdict = Worst(m.Verdict, c.Verdict)
	}
	sort.Strings(m.Producers)
	sort.Strings(m.Consumers)
	for _, order := range ruleOrder {
		for _, r := range order {
			if !slices.Contains(m.Rules, r) {
				m.Rules = append(m.Rules, r)
			}
		}
	}
	for _, c := range cells {
		var extra []string
		for r := range c.Rules {
			if !slices.Contains(m.Rules, r) {
				extra = append(extra, r)
			}
		}
		sort.Strings(extra)
		m.Rules = append(m.Rules, extra...)
	}
	m.Cells = append([]MatrixCell(nil), cells...)
	sort.Slice(m.Cells, func(i, j int) bool {
		if m.Cells[i].Producer != m.Cells[j].Producer {
			return m.Cells[i].Producer < m.Cells[j].Producer
		}
		return m.Cells[i].Consumer < m.Cells[j].Consumer
	})
	return m, nil
}

// MatrixFromResults is BuildMatrix over runs' results, each with the
// place it was read from.
func MatrixFromResults(runs []Results, sources []string) (Matrix, error) {
	cells := make([]MatrixCell, 0, len(runs))
	orders := make([][]string, 0, len(runs))
	for i, r := range runs {
		src := ""
		if i < len(sources) {
			src = sources[i]
		}
		c, err := MatrixCellOf(r, src)
		if err != nil {
			return Matrix{}, err
		}
		cells = append(cells, c)
		var order []string
		for _, rr := range r.Rules {
			order = append(order, rr.Rule)
		}
		orders = append(orders, order)
	}
	return BuildMatrix(cells, orders)
}

// Cell returns the run of producer x consumer, or false.
func (m Matrix) Cell(producer, consumer string) (MatrixCell, bool) {
	for _, c := range m.Cells {
		if c.Producer == producer && c.Consumer == consumer {
			return c, true
		}
	}
	return MatrixCell{}, false
}

// matrixMark is a rule outcome as one short cell of a text table.
func matrixMark(o Outcome) string {
	switch o {
	case Passed:
		return "PASS"
	case Failed:
		return "FAIL"
	case Error:
		return "ERR"
	case NotApplicable:
		return "N/A"
	case NotVerifiable:
		return "N/V"
	case "":
		return "-"
	}
	return string(o)
}

// WriteText writes the matrix as a terminal table: one row per rule, one
// column per producer x consumer pair (producer first), then one verdict
// row, then the reason of each not-applicable, failed or error cell:
//
//	rule  go>go  go>python  python>go  python>python
//	SU-2  PASS   PASS       PASS       PASS
//	B-1   PASS   N/A        N/A        PASS
//	...
func (m Matrix) WriteText(w io.Writer) error {
	var b strings.Builder
	head := []string{"rule"}
	for _, c := range m.Cells {
		head = append(head, c.Producer+">"+c.Consumer)
	}
	rows := [][]string{head}
	for _, r := range m.Rules {
		row := []string{r}
		for _, c := range m.Cells {
			row = append(row, matrixMark(c.Rules[r]))
		}
		rows = append(rows, row)
	}
	verdict := []string{"verdict"}
	for _, c := range m.Cells {
		verdict = append(verdict, string(c.Verdict))
	}
	rows = append(rows, verdict)
	widths := make([]int, len(head))
	for _, row := range rows {
		for i, s := range row {
			widths[i] = max(widths[i], len(s))
		}
	}
	for _, row := range rows {
		for i, s := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			if i == len(row)-1 {
				b.WriteString(s)
			} else {
				fmt.Fprintf(&b, "%-*s", widths[i], s)
			}
		}
		b.WriteByte('\n')
	}
	b.WriteString("(columns: producer>consumer; the baseline is the consumer implementation's aggregated engine)\n")
	for _, c := range m.Cells {
		for _, r := range m.Rules {
			if o := c.Rules[r]; o == NotApplicable || o == Failed || o == Error || o == NotVerifiable {
				fmt.Fprintf(&b, "%s>%s %s %s: %s\n", c.Producer, c.Consumer, r, o, strings.TrimPrefix(c.Messages[r], string(o)+": "))
			}
		}
	}
	fmt.Fprintf(&b, "matrix verdict: %s (%d producers x %d consumers)\n", m.Verdict, len(m.Producers), len(m.Consumers))
	_, err := io.WriteString(w, b.String())
	return err
}
