package reports

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
)

// Histogram geometry of LatencyHistogramSVG (SVG user units, pixels at 1x).
const (
	plotWidth  = 640
	plotHeight = 260
	plotLeft   = 56
	plotRight  = 16
	plotTop    = 40
	plotBottom = 44
)

// phaseColors are the bar colours of each handoff phase.
var phaseColors = map[string]string{PhasePublish: "#2f6fb3", PhaseConsume: "#d9822b"}

// topologyOrder orders plots: E+PD, E+P+D, then others alphabetically.
func topologyOrder(ts []string) {
	rank := func(t string) int {
		switch t {
		case "E+PD":
			return 0
		case "E+P+D":
			return 1
		}
		return 2
	}
	sort.Slice(ts, func(i, j int) bool {
		if rank(ts[i]) != rank(ts[j]) {
			return rank(ts[i]) < rank(ts[j])
		}
		return ts[i] < ts[j]
	})
}

// LatencyHistogramSVGs renders one inline SVG histogram per topology of
// series: publish and consume latencies (ms) side by side in bins of equal
// width on a logarithmic axis (histogramBinsPerDecade per decade, from the
// decade below the fastest call to the decade above the slowest, so a
// 1 ms consume and a 2 s publish both show their shape), with p50/p99 per
// phase in the title. Samples that are not positive numbers are not drawn.
// Topologies come in the order E+PD, E+P+D, others; none gives nil. The
// SVGs are self-contained (no external reference).
func LatencyHistogramSVGs(series []LatencySeries) []template.HTML {
	byTopo, topos := seriesByTopology(series)
	var out []template.HTML
	for _, t := range topos {
		phases := map[string][]float64{}
		for p, s := range byTopo[t] {
			phases[p] = s.samples
		}
		out = append(out, histogramSVG(t, phases))
	}
	return out
}

// LatencyTimelineSVGs renders one inline SVG per topology of series: each
// call's latency (ms, logarithmic axis) at the time it started (seconds
// since the run began, LatencySeries.AtMs), one dot per call, so slow
// phases of a run (a restart, the Faults level's delayed replies) show.
// Series without times are left out; none gives nil.
func LatencyTimelineSVGs(series []LatencySeries) []template.HTML {
	byTopo, topos := seriesByTopology(series)
	var out []template.HTML
	for _, t := range topos {
		timed := map[string]timedSamples{}
		for p, s := range byTopo[t] {
			if len(s.at) == len(s.samples) && len(s.at) > 0 {
				timed[p] = s
			}
		}
		if len(timed) > 0 {
			out = append(out, timelineSVG(t, timed))
		}
	}
	return out
}

// timedSamples are one phase's latencies and, when known, start times.
type timedSamples struct{ samples, at []float64 }

// seriesByTopology groups series by topology and phase (samples of one
// phase appended in order) and orders the topologies.
func seriesByTopology(series []LatencySeries) (map[string]map[string]timedSamples, []string) {
	byTopo := map[string]map[string]timedSamples{}
	for _, s := range series {
		if len(s.SamplesMs) == 0 {
			continue
		}
		if byTopo[s.Topology] == nil {
			byTopo[s.Topology] = map[string]timedSamples{}
		}
		ts := byTopo[s.Topology][s.Phase]
		ts.samples = append(ts.samples, s.SamplesMs...)
		if len(s.AtMs) == len(s.SamplesMs) {
			ts.at = append(ts.at, s.AtMs...)
		} else {
			ts.at = nil
		}
		byTopo[s.Topology][s.Phase] = ts
	}
	topos := make([]string, 0, len(byTopo))
	for t := range byTopo {
		topos = append(topos, t)
	}
	topologyOrder(topos)
	return byTopo, topos
}

// histogramBinsPerDecade is the number of histogram bins per factor of 10.
const histogramBinsPerDecade = 5

// logSpan is a logarithmic axis: whole decades from lo to hi (10^lo ms to
// 10^hi ms), at least one.
type logSpan struct{ lo, hi float64 }

// logSpanOf covers every positive sample of phases.
func logSpanOf(phases map[string][]float64) logSpan {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range phases {
		for _, v := range s {
			if drawable(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return logSpan{0, 1}
	}
	sp := logSpan{math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))}
	if sp.hi <= sp.lo {
		sp.hi = sp.lo + 1
	}
	return sp
}

// frac is where ms lies on the span, 0 (10^lo) to 1 (10^hi).
func (sp logSpan) frac(ms float64) float64 { return (math.Log10(ms) - sp.lo) / (sp.hi - sp.lo) }

// decades are the span's tick values in ms.
func (sp logSpan) decades() []float64 {
	var out []float64
	for d := sp.lo; d <= sp.hi; d++ {
		out = append(out, math.Pow(10, d))
	}
	return out
}

// drawable: a latency a log axis can show.
func drawable(v float64) bool { return v > 0 && !math.IsNaN(v) && !math.IsInf(v, 0) }

// histogramSVG draws one topology's phases.
func histogramSVG(topology string, phases map[string][]float64) template.HTML {
	names := phaseNames(phases)
	span := logSpanOf(phases)
	bins := int(span.hi-span.lo) * histogramBinsPerDecade
	counts := map[string][]int{}
	maxCount := 1
	for _, p := range names {
		c := make([]int, bins)
		for _, v := range phases[p] {
			if !drawable(v) {
				continue
			}
			i := int(span.frac(v) * float64(bins))
			i = min(max(i, 0), bins-1)
			c[i]++
			maxCount = max(maxCount, c[i])
		}
		counts[p] = c
	}
	binEdge := func(i int) float64 { return math.Pow(10, span.lo+float64(i)/histogramBinsPerDecade) }

	innerW := float64(plotWidth - plotLeft - plotRight)
	innerH := float64(plotHeight - plotTop - plotBottom)
	x := func(ms float64) float64 { return plotLeft + span.frac(ms)*innerW }
	y := func(n int) float64 { return plotTop + innerH - float64(n)/float64(maxCount)*innerH }

	var b strings.Builder
	title := quantileTitle(names, phases)
	label := fmt.Sprintf("%s handoff latency (log scale): %s", topology, title)
	svgOpen(&b, "plot", topology, label)
	fmt.Fprintf(&b, `<text x="%d" y="16" class="plot-title">%s handoff latency</text>`, plotLeft, esc(topology))
	fmt.Fprintf(&b, `<text x="%d" y="32" class="plot-sub">%s</text>`, plotLeft, esc(title))
	// Axes and ticks: one per decade on x.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="axis"/>`, plotLeft, y(0), plotWidth-plotRight, y(0))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" class="axis"/>`, plotLeft, plotTop, plotLeft, y(0))
	for _, ms := range span.decades() {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/><text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`,
			x(ms), y(0), x(ms), y(0)+4, x(ms), y(0)+16, fmtMs(ms))
	}
	for _, n := range []int{0, (maxCount + 1) / 2, maxCount} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="tick" text-anchor="end">%d</text>`, plotLeft-6, y(n)+4, n)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">latency (ms, log scale)</text>`, plotLeft+innerW/2, plotHeight-6)
	fmt.Fprintf(&b, `<text x="14" y="%.1f" class="tick" text-anchor="middle" transform="rotate(-90 14 %.1f)">calls</text>`, plotTop+innerH/2, plotTop+innerH/2)
	// Bars: each bin split between the phases.
	slot := innerW / float64(bins)
	barW := slot / float64(max(1, len(names)))
	for pi, p := range names {
		for i, n := range counts[p] {
			if n == 0 {
				continue
			}
			bx := plotLeft + float64(i)*slot + float64(pi)*barW
			fmt.Fprintf(&b, `<rect class="bar" data-phase="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s-%s ms: %d</title></rect>`,
				esc(p), bx+0.5, y(n), math.Max(barW-1, 0.5), y(0)-y(n), phaseColor(p), esc(p), fmtMs(binEdge(i)), fmtMs(binEdge(i+1)), n)
		}
	}
	legend(&b, names)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// timelineSVG draws one topology's calls over the run's time.
func timelineSVG(topology string, phases map[string]timedSamples) template.HTML {
	lat := map[string][]float64{}
	endS := 0.0
	for p, s := range phases {
		lat[p] = s.samples
		for _, at := range s.at {
			if !math.IsNaN(at) && !math.IsInf(at, 0) {
				endS = math.Max(endS, at/1000)
			}
		}
	}
	names := phaseNames(lat)
	span := logSpanOf(lat)
	endS = niceCeil(math.Max(endS, 1))
	innerW := float64(plotWidth - plotLeft - plotRight)
	innerH := float64(plotHeight - plotTop - plotBottom)
	x := func(s float64) float64 { return plotLeft + s/endS*innerW }
	y := func(ms float64) float64 { return plotTop + innerH - span.frac(ms)*innerH }

	var b strings.Builder
	label := fmt.Sprintf("%s handoff latency over the run (log scale): %s", topology, quantileTitle(names, lat))
	svgOpen(&b, "plot timeline", topology, label)
	fmt.Fprintf(&b, `<text x="%d" y="16" class="plot-title">%s handoff latency over the run</text>`, plotLeft, esc(topology))
	fmt.Fprintf(&b, `<text x="%d" y="32" class="plot-sub">each dot one call that answered OK, at the time it started</text>`, plotLeft)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`, plotLeft, plotTop+int(innerH), plotWidth-plotRight, plotTop+int(innerH))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`, plotLeft, plotTop, plotLeft, plotTop+int(innerH))
	for _, ms := range span.decades() {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`, plotLeft-6, y(ms)+4, fmtMs(ms))
	}
	for i := 0; i <= 4; i++ {
		sec := endS * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`, x(sec), plotTop+innerH+16, fmtMs(sec))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">time since the run started (s)</text>`, plotLeft+innerW/2, plotHeight-6)
	fmt.Fprintf(&b, `<text x="14" y="%.1f" class="tick" text-anchor="middle" transform="rotate(-90 14 %.1f)">ms (log)</text>`, plotTop+innerH/2, plotTop+innerH/2)
	for _, p := range names {
		s := phases[p]
		for i, v := range s.samples {
			at := s.at[i] / 1000
			if !drawable(v) || math.IsNaN(at) || at < 0 {
				continue
			}
			fmt.Fprintf(&b, `<circle class="dot" data-phase="%s" cx="%.1f" cy="%.1f" r="2" fill="%s" fill-opacity="0.7"/>`, esc(p), x(at), y(v), phaseColor(p))
		}
	}
	legend(&b, names)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// phaseNames orders the phases of a plot: publish, consume, others.
func phaseNames(phases map[string][]float64) []string {
	names := make([]string, 0, len(phases))
	for p := range phases {
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool {
		if phaseRank(names[i]) != phaseRank(names[j]) {
			return phaseRank(names[i]) < phaseRank(names[j])
		}
		return names[i] < names[j]
	})
	return names
}

// quantileTitle is "publish n=5 p50 12 ms p99 30 ms; consume ...".
func quantileTitle(names []string, phases map[string][]float64) string {
	var title []string
	for _, p := range names {
		s := phases[p]
		title = append(title, fmt.Sprintf("%s n=%d p50 %s ms p99 %s ms", p, len(s), fmtMs(Quantile(s, 0.5)), fmtMs(Quantile(s, 0.99))))
	}
	return strings.Join(title, "; ")
}

// svgOpen starts a plot's <svg> with its accessible label.
func svgOpen(b *strings.Builder, class, topology, label string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" class="%s" data-topology="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		class, esc(topology), plotWidth, plotHeight, plotWidth, plotHeight, esc(label))
	fmt.Fprintf(b, `<title>%s</title>`, esc(label))
}

// legend draws the phases' swatches in the top right corner.
func legend(b *strings.Builder, names []string) {
	for pi, p := range names {
		lx := plotWidth - plotRight - 110
		ly := plotTop + 4 + pi*16
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="tick">%s</text>`, lx, ly, phaseColor(p), lx+14, ly+9, esc(p))
	}
}

// esc escapes s for SVG text and attribute values.
func esc(s string) string { return template.HTMLEscapeString(s) }

func phaseRank(p string) int {
	switch p {
	case PhasePublish:
		return 0
	case PhaseConsume:
		return 1
	}
	return 2
}

func phaseColor(p string) string {
	if c, ok := phaseColors[p]; ok {
		return c
	}
	return "#777777"
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// fmtMs prints milliseconds with up to 3 significant decimals ("0.25", "12", "1.5").
func fmtMs(ms float64) string {
	if math.IsNaN(ms) {
		return "-"
	}
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0f", ms)
	case ms >= 10:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", ms), "0"), ".")
	default:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", ms), "0"), ".")
	}
}
