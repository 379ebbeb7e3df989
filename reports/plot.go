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
	plotWidth   = 640
	plotHeight  = 260
	plotLeft    = 56
	plotRight   = 16
	plotTop     = 40
	plotBottom  = 44
	plotBins    = 24
	plotMinSpan = 1.0 // ms: the x axis spans at least this much
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
// series: publish and consume latencies (ms) side by side in each of
// plotBins equal bins from 0 to a rounded maximum, with p50/p99 per phase
// in the title. Topologies come in the order E+PD, E+P+D, others; none
// gives nil. The SVGs are self-contained (no external reference).
func LatencyHistogramSVGs(series []LatencySeries) []template.HTML {
	byTopo := map[string]map[string][]float64{}
	for _, s := range series {
		if len(s.SamplesMs) == 0 {
			continue
		}
		if byTopo[s.Topology] == nil {
			byTopo[s.Topology] = map[string][]float64{}
		}
		byTopo[s.Topology][s.Phase] = append(byTopo[s.Topology][s.Phase], s.SamplesMs...)
	}
	topos := make([]string, 0, len(byTopo))
	for t := range byTopo {
		topos = append(topos, t)
	}
	topologyOrder(topos)
	var out []template.HTML
	for _, t := range topos {
		out = append(out, histogramSVG(t, byTopo[t]))
	}
	return out
}

// histogramSVG draws one topology's phases.
func histogramSVG(topology string, phases map[string][]float64) template.HTML {
	names := make([]string, 0, len(phases))
	for p := range phases {
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool { return phaseRank(names[i]) < phaseRank(names[j]) })

	maxMs := 0.0
	for _, s := range phases {
		for _, v := range s {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				maxMs = math.Max(maxMs, v)
			}
		}
	}
	span := niceCeil(math.Max(maxMs, plotMinSpan))
	binMs := span / plotBins
	counts := map[string][]int{}
	maxCount := 1
	for _, p := range names {
		c := make([]int, plotBins)
		for _, v := range phases[p] {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				continue
			}
			i := int(v / binMs)
			if i >= plotBins {
				i = plotBins - 1
			}
			c[i]++
			maxCount = max(maxCount, c[i])
		}
		counts[p] = c
	}

	innerW := float64(plotWidth - plotLeft - plotRight)
	innerH := float64(plotHeight - plotTop - plotBottom)
	x := func(ms float64) float64 { return plotLeft + ms/span*innerW }
	y := func(n int) float64 { return plotTop + innerH - float64(n)/float64(maxCount)*innerH }

	var b strings.Builder
	var title []string
	for _, p := range names {
		s := phases[p]
		title = append(title, fmt.Sprintf("%s n=%d p50 %s ms p99 %s ms", p, len(s), fmtMs(Quantile(s, 0.5)), fmtMs(Quantile(s, 0.99))))
	}
	label := fmt.Sprintf("%s handoff latency: %s", topology, strings.Join(title, "; "))
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-topology="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		template.HTMLEscapeString(topology), plotWidth, plotHeight, plotWidth, plotHeight, template.HTMLEscapeString(label))
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(label))
	fmt.Fprintf(&b, `<text x="%d" y="16" class="plot-title">%s handoff latency</text>`, plotLeft, template.HTMLEscapeString(topology))
	fmt.Fprintf(&b, `<text x="%d" y="32" class="plot-sub">%s</text>`, plotLeft, template.HTMLEscapeString(strings.Join(title, "; ")))
	// Axes and ticks.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="axis"/>`, plotLeft, y(0), plotWidth-plotRight, y(0))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" class="axis"/>`, plotLeft, plotTop, plotLeft, y(0))
	for i := 0; i <= 4; i++ {
		ms := span * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/><text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`,
			x(ms), y(0), x(ms), y(0)+4, x(ms), y(0)+16, fmtMs(ms))
	}
	for _, n := range []int{0, (maxCount + 1) / 2, maxCount} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="tick" text-anchor="end">%d</text>`, plotLeft-6, y(n)+4, n)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">latency (ms)</text>`, plotLeft+innerW/2, plotHeight-6)
	fmt.Fprintf(&b, `<text x="14" y="%.1f" class="tick" text-anchor="middle" transform="rotate(-90 14 %.1f)">calls</text>`, plotTop+innerH/2, plotTop+innerH/2)
	// Bars: each bin split between the phases.
	slot := innerW / plotBins
	barW := slot / float64(max(1, len(names)))
	for pi, p := range names {
		for i, n := range counts[p] {
			if n == 0 {
				continue
			}
			bx := plotLeft + float64(i)*slot + float64(pi)*barW
			fmt.Fprintf(&b, `<rect class="bar" data-phase="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s-%s ms: %d</title></rect>`,
				esc(p), bx+0.5, y(n), math.Max(barW-1, 0.5), y(0)-y(n), phaseColor(p), esc(p), fmtMs(float64(i)*binMs), fmtMs(float64(i+1)*binMs), n)
		}
	}
	// Legend.
	for pi, p := range names {
		lx := plotWidth - plotRight - 110
		ly := plotTop + 4 + pi*16
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="tick">%s</text>`, lx, ly, phaseColor(p), lx+14, ly+9, esc(p))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
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
