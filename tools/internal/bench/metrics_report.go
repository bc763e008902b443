package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// The report's Metrics section, as text and as Markdown: the scrapes, what each metric did,
// what the metrics cost, and the plans of the scrape's queries.

// metricRows are the rows of the movement table: service, metric, start → end, change, verdict.
func (m *MetricsSection) metricRows() [][5]string {
	var rows [][5]string
	for _, mv := range m.Metrics {
		if mv.Verdict == "not this service's metric" {
			continue
		}
		change := ""
		switch {
		case mv.Type == "gauge" || mv.Type == "untyped":
			change = "range " + num(mv.Min) + " … " + num(mv.Max)
		case mv.Type != "":
			change = "+" + num(mv.Increase)
		}
		verdict := mv.Verdict
		if mv.Note != "" {
			verdict += "; " + mv.Note
		}
		span := ""
		if mv.Type != "" {
			span = num(mv.Start) + " → " + num(mv.End)
		}
		rows = append(rows, [5]string{mv.Service, mv.Name, span, change, verdict})
	}
	return rows
}

// summary counts the metrics that moved, stayed 0 as expected, and did not move.
func (m *MetricsSection) summary() string {
	var moved, quiet, stuck int
	var names []string
	for _, mv := range m.Metrics {
		switch {
		case mv.Moved:
			moved++
		case strings.HasPrefix(mv.Verdict, "stayed 0"):
			quiet++
		case mv.Verdict != "not this service's metric":
			stuck++
			names = append(names, mv.Service+" "+mv.Name)
		}
	}
	s := fmt.Sprintf("%d moved, %d stayed 0 (no such event in this run), %d did not move", moved, quiet, stuck)
	if len(names) > 0 {
		s += ": " + strings.Join(names, ", ")
	}
	return s
}

func (m *MetricsSection) scrapesText() string {
	var parts []string
	for _, c := range m.Scrapes {
		p := fmt.Sprintf("%s %d ok", c.Service, c.OK)
		if c.Failed > 0 {
			p += fmt.Sprintf(", %d failed (%s)", c.Failed, strings.Join(c.Errors, "; "))
		}
		if c.Restarts > 0 {
			p += fmt.Sprintf(", restarted %d× by the bench (its counters start again from 0: end is after the restart, the change counts both runs)", c.Restarts)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// overheadRows are what the metrics cost, as rows of what, figure, compared with.
func (m *MetricsSection) overheadRows() [][3]string {
	o := m.Overhead
	if o == nil {
		return nil
	}
	var rows [][3]string
	for _, c := range o.Scrapes {
		rows = append(rows, [3]string{"CPU per scrape: " + c.Service + ", " + c.Condition,
			fmt.Sprintf("%.0fµs in the service + %.0fµs in its database", c.ServiceUS, c.DatabaseUS),
			fmt.Sprintf("%.2f ms a scrape, %d bytes; %d back to back", c.WallMS, c.Bytes, c.Scrapes)})
	}
	if o.InstrumentationNS > 0 {
		rows = append(rows, [3]string{"instrumentation CPU per transfer", fmt.Sprintf("%.0f ns", o.InstrumentationNS),
			"every observation of both services, batches of one: " + o.InstrumentationCmd})
	}
	rows = append(rows, [3]string{"pipeline CPU per transfer (closed loop)", fmt.Sprintf("%.0fµs", o.PipelineUS),
		"wallet, gl, nats-server and both databases' backends"})
	for _, a := range o.At {
		verdict := "under 3%"
		if !a.WithinTarget {
			verdict = "OVER 3%"
		}
		instr := fmt.Sprintf("%.3f%%", a.InstrPercent)
		if !a.InstrumentKnown {
			instr = "not measured"
		}
		rows = append(rows, [3]string{fmt.Sprintf("overhead, scrapes every %s, %s loop at %.0f/s (scrape cost as the run left the outbox)", a.Interval, a.Phase, a.Rate),
			fmt.Sprintf("%.3f%% of pipeline CPU", a.TotalPercent),
			fmt.Sprintf("scrapes %.3f%% (%.2fµs/transfer) + instrumentation %s: %s", a.ScrapePercent, a.ScrapeUS, instr, verdict)})
	}
	for _, n := range o.Notes {
		rows = append(rows, [3]string{"note", n, ""})
	}
	return rows
}

// planRows are the scrape queries' plans: service, query, scans, verdict.
func (m *MetricsSection) planRows() [][4]string {
	var rows [][4]string
	for _, p := range m.Plans {
		verdict := "no sequential scan of outbox or inbox"
		if len(p.SeqScans) > 0 {
			verdict = "SEQUENTIAL SCAN: " + strings.Join(p.SeqScans, ", ")
		}
		if p.Workers > 0 {
			verdict += fmt.Sprintf("; PARALLEL: %d workers started per scrape", p.Workers)
		}
		stats := "never analyzed"
		if p.Analyzed {
			stats = "analyzed"
		}
		rows = append(rows, [4]string{p.Service, p.Query + " (" + p.Condition + ", " + stats + ")",
			fmt.Sprintf("%s; %.3f ms; outbox %d rows, %d acknowledged", countScans(p.Scans), p.ExecMS, p.Rows, p.Acked), verdict})
	}
	return rows
}

// print writes the Metrics section as aligned text.
func (m *MetricsSection) print(w io.Writer) {
	fmt.Fprintf(w, "\nmetrics (scraped every %s from the start to the end of the run: %s)\n", m.Interval, m.scrapesText())
	fmt.Fprintln(w, "  "+m.summary())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range m.metricRows() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r[0], r[1], r[2], r[3], r[4])
	}
	tw.Flush()
	fmt.Fprintln(w, "\nmetrics overhead")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range m.overheadRows() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r[0], r[1], r[2])
	}
	for _, r := range m.planRows() {
		fmt.Fprintf(tw, "  plan: %s %s\t%s\t%s\n", r[0], r[1], r[3], r[2])
	}
	tw.Flush()
	for _, n := range m.Notes {
		fmt.Fprintln(w, "  note:", n)
	}
}

// markdown writes the Metrics section as Markdown.
func (m *MetricsSection) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Metrics\n\nScraped every %s from the start to the end of the run: %s. %s.\n\n", m.Interval, m.scrapesText(), m.summary())
	b.WriteString("| service | metric | start → end | change | verdict |\n|---|---|---|---|---|\n")
	for _, r := range m.metricRows() {
		fmt.Fprintf(b, "| %s | `%s` | %s | %s | %s |\n", r[0], r[1], r[2], r[3], r[4])
	}
	b.WriteString("\n### Metrics overhead\n\n| measure | figure | compared with |\n|---|---|---|\n")
	for _, r := range m.overheadRows() {
		fmt.Fprintf(b, "| %s | %s | %s |\n", r[0], r[1], r[2])
	}
	if len(m.Plans) > 0 {
		b.WriteString("\n| service | scrape query | plan (EXPLAIN ANALYZE at the end of the run) | verdict |\n|---|---|---|---|\n")
		for _, r := range m.planRows() {
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
		}
	}
	for _, n := range m.Notes {
		fmt.Fprintf(b, "\n- %s", n)
	}
	if len(m.Notes) > 0 {
		b.WriteString("\n")
	}
}

// metricsTarget is the overhead target, at a production scrape interval and the closed
// loop's rate.
func metricsTarget(m *MetricsSection) (Target, bool) {
	if m == nil || m.Overhead == nil {
		return Target{}, false
	}
	for _, a := range m.Overhead.At {
		if a.Interval == productionInterval.String() && a.Phase == "closed" {
			return Target{Name: fmt.Sprintf("metrics overhead, scrapes every %s, of pipeline CPU per transfer", a.Interval),
				Figure: fmt.Sprintf("%.3f%% at %.0f/s", a.TotalPercent, a.Rate), Target: "< 3%",
				Value: a.TotalPercent, Met: a.WithinTarget, Known: a.InstrumentKnown && len(m.Overhead.Scrapes) >= 2}, true
		}
	}
	return Target{}, false
}

// num formats a metric's value: whole numbers without decimals, others with four digits.
func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// countScans lists each distinct scan once, with how many times the plan has it.
func countScans(scans []string) string {
	var order []string
	n := map[string]int{}
	for _, sc := range scans {
		if n[sc] == 0 {
			order = append(order, sc)
		}
		n[sc]++
	}
	parts := make([]string, 0, len(order))
	for _, sc := range order {
		if n[sc] > 1 {
			sc = fmt.Sprintf("%d× %s", n[sc], sc)
		}
		parts = append(parts, sc)
	}
	return strings.Join(parts, ", ")
}
