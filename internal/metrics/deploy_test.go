package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The Grafana dashboard and the Prometheus alert rules of deploy/ name the metrics of this
// package. A name or a label the services do not expose gives an empty panel, or an alert that
// can never fire, and nothing else would notice: these tests read deploy/ and check every
// walletgl_ name, label matcher and grouping label against what the code registers.

const (
	dashboardFile  = "../../deploy/grafana/walletgl.json"
	alertsFile     = "../../deploy/prometheus/alerts.yml"
	alertTestsFile = "../../deploy/prometheus/alerts_test.yml"
)

// exposed returns every series name a service exposes under walletgl_ (a histogram as its
// _bucket, _sum and _count) with the label names each carries, job and instance included (the
// scrape adds them).
func exposed(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := New("wallet")
	// Every vector gets a child and every collector something to report, so that Gather returns
	// every family; the check below makes sure none was forgotten.
	m.Relay.Published(2, 1, time.Millisecond)
	m.Relay.PublishError("broker")
	m.Relay.Stream(StreamState{Name: "WALLET_EVENTS", Messages: 5, Bytes: 5120, MaxMessages: -1, MaxBytes: 1 << 30},
		[]ReaderState{{Name: "gl", Pending: 2, AckPending: 1, Redelivered: 1}})
	m.Consumer.Processed("TransferCompleted.v1", 1, 1)
	m.Consumer.Failed("malformed")
	m.Consumer.Pending(3)
	m.Consumer.Batch(time.Millisecond)
	m.Consumer.Waiting(2, time.Minute)
	m.Consumer.Released()
	m.HTTP.Observe("POST /v1/transfers", "POST", 201, time.Millisecond)
	m.Wallet.Transfer("created")
	m.Wallet.Batch(4)
	m.GL.Posted(time.Now().Add(-time.Second), time.Now())
	m.Sample(func(context.Context) (OutboxSample, error) {
		return OutboxSample{Rows: map[string]int64{"pending": 1, "dead_letter": 1}, OldestPending: time.Second}, nil
	})
	m.SampleInbox(1000, func(context.Context) (int64, error) { return 1, nil })
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable") // never connects
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	m.Pool("main", pool)

	families, err := m.reg.Gather()
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	gathered := map[string]bool{}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "walletgl_") {
			continue
		}
		gathered[name] = true
		labels := map[string]bool{"job": true, "instance": true}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = true
		}
		require.True(t, labels["service"], "%s carries the service label", name)
		if f.GetType() == dto.MetricType_HISTOGRAM {
			bucket := maps.Clone(labels)
			bucket["le"] = true
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = bucket, labels, labels
			continue
		}
		out[name] = labels
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		m.reg.Describe(descs)
		close(descs)
	}()
	described := 0
	for d := range descs {
		match := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, match, d.String())
		if strings.HasPrefix(match[1], "walletgl_") {
			described++
			require.True(t, gathered[match[1]], "%s is registered but was not gathered: give it a value in exposed", match[1])
		}
	}
	require.GreaterOrEqual(t, described, 18, "the registry describes the pipeline's metrics")
	return out
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	metricName = regexp.MustCompile(`\bwalletgl_[a-zA-Z0-9_]*`)
	selector   = regexp.MustCompile(`(walletgl_[a-zA-Z0-9_]*)\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	// instanceScoped is every use of a walletgl_ metric, with its matchers when it has any.
	instanceScoped = regexp.MustCompile(`(walletgl_[a-zA-Z0-9_]*)(\{[^}]*\})?`)
)

// problems lists what expr names that the services do not expose: a walletgl_ name, a label
// matched on a metric that has no such label, a grouping label no walletgl_ metric of expr has.
func problems(expr string, known map[string]map[string]bool) []string {
	var out []string
	bare := quoted.ReplaceAllString(expr, `""`) // label values and label_replace's arguments are not names
	inExpr := map[string]bool{}
	for _, name := range metricName.FindAllString(bare, -1) {
		if known[name] == nil {
			out = append(out, "unknown metric "+name)
			continue
		}
		maps.Copy(inExpr, known[name])
	}
	for _, sel := range selector.FindAllStringSubmatch(bare, -1) {
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			if labels := known[sel[1]]; labels != nil && !labels[m[1]] {
				out = append(out, fmt.Sprintf("%s has no label %s", sel[1], m[1]))
			}
		}
	}
	if len(inExpr) == 0 {
		return out // no walletgl_ metric (up): its labels are not ours to check
	}
	for _, g := range grouping.FindAllStringSubmatch(bare, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !inExpr[l] {
				out = append(out, fmt.Sprintf("no metric of the expression has the label %s to group by", l))
			}
		}
	}
	return out
}

func TestTheCheckOfNamesCatchesWhatItIsFor(t *testing.T) {
	known := exposed(t)
	for expr, want := range map[string]string{
		`rate(walletgl_transfer_total[5m])`:                                          "unknown metric walletgl_transfer_total",
		`walletgl_commit_to_posted_seconds > 1`:                                      "unknown metric walletgl_commit_to_posted_seconds", // a histogram's name alone
		`walletgl_outbox_rows{state="dead_letter"} > 0`:                              "walletgl_outbox_rows has no label state",
		`sum by (service, reason) (rate(walletgl_transfers_total[5m]))`:              "no metric of the expression has the label reason to group by",
		`histogram_quantile(0.99, sum by (le) (rate(walletgl_transfers_total[5m])))`: "no metric of the expression has the label le to group by",
	} {
		require.Contains(t, problems(expr, known), want, expr)
	}
	for _, expr := range []string{
		`max by (service, status) (walletgl_outbox_rows{status="dead_letter", service=~"w.*"})`,
		`histogram_quantile(0.99, sum by (service, route, le) (rate(walletgl_http_request_seconds_bucket[5m])))`,
		`label_replace(up{job=~"walletgl-(wallet|gl)"}, "service", "$1", "job", "walletgl-(.*)") == 0`,
	} {
		require.Empty(t, problems(expr, known), expr)
	}
}

type dashboard struct {
	SchemaVersion int     `json:"schemaVersion"`
	UID           string  `json:"uid"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name, Type, Query string
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int                   `json:"id"`
	Type       string                `json:"type"`
	Title      string                `json:"title"`
	Datasource map[string]string     `json:"datasource"`
	GridPos    struct{ X, W, H int } `json:"gridPos"`
	Targets    []struct {
		Expr       string            `json:"expr"`
		Datasource map[string]string `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d), "the dashboard is JSON")
	return d
}

// exprs returns every query of the dashboard's panels, by panel title.
func (d dashboard) exprs() map[string][]string {
	out := map[string][]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, target := range p.Targets {
				out[p.Title] = append(out[p.Title], target.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

func TestDashboard(t *testing.T) {
	known := exposed(t)
	d := readDashboard(t)
	require.GreaterOrEqual(t, d.SchemaVersion, 36)
	require.NotEmpty(t, d.UID)
	require.Len(t, d.Templating.List, 2)
	require.Equal(t, []string{"datasource", "datasource", "prometheus"},
		[]string{d.Templating.List[0].Name, d.Templating.List[0].Type, d.Templating.List[0].Query}, "a Prometheus data source variable")
	require.Equal(t, []string{"instance", "query"}, []string{d.Templating.List[1].Name, d.Templating.List[1].Type}, "an instance variable")
	require.Empty(t, problems(d.Templating.List[1].Query, known), "the instance variable's query")

	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			require.False(t, ids[p.ID], "panel id %d is unique", p.ID)
			ids[p.ID] = true
			require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, p.Title)
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			require.Equal(t, "${datasource}", p.Datasource["uid"], "%s uses the data source variable", p.Title)
			require.NotEmpty(t, p.Targets, p.Title)
			for _, target := range p.Targets {
				require.NotEmpty(t, target.Expr, p.Title)
				require.Equal(t, "${datasource}", target.Datasource["uid"], p.Title)
			}
		}
	}
	walk(d.Panels)

	used := map[string]bool{}
	n := 0
	for title, exprs := range d.exprs() {
		for _, expr := range exprs {
			n++
			require.Empty(t, problems(expr, known), "panel %q: %s", title, expr)
			for _, sel := range instanceScoped.FindAllStringSubmatch(expr, -1) {
				require.Contains(t, sel[2], `instance=~"$instance"`, "panel %q: %s is narrowed to the chosen instances", title, sel[1])
			}
			for _, name := range metricName.FindAllString(expr, -1) {
				used[name] = true
			}
		}
	}
	require.GreaterOrEqual(t, n, 20, "the dashboard's queries were found")
	for _, name := range []string{
		"walletgl_transfers_total", "walletgl_consumer_processed_total", "walletgl_commit_to_posted_seconds_bucket",
		"walletgl_outbox_rows", "walletgl_outbox_oldest_pending_seconds", "walletgl_outbox_oldest_unacknowledged_seconds",
		"walletgl_consumer_pending_messages", "walletgl_consumer_failed_total", "walletgl_inbox_duplicates_total",
		"walletgl_relay_publish_errors_total", "walletgl_http_requests_total", "walletgl_http_request_seconds_bucket",
		"walletgl_stream_messages", "walletgl_stream_max_messages", "walletgl_stream_bytes", "walletgl_stream_max_bytes",
		"walletgl_stream_consumer_pending_messages", "walletgl_stream_consumer_ack_pending_messages",
		"walletgl_stream_consumer_redelivered_messages", "walletgl_relay_held_back", "walletgl_inbox_failed_events",
	} {
		require.True(t, used[name], "the dashboard shows %s", name)
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, v), path)
}

func TestAlertRules(t *testing.T) {
	known := exposed(t)
	var rules ruleFile
	readYAML(t, alertsFile, &rules)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "only alerts in %s: %s", alertsFile, r.Expr)
			alerts = append(alerts, r.Alert)
			require.Empty(t, problems(r.Expr, known), "%s: %s", r.Alert, r.Expr)
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.Contains(t, r.Annotations["description"], "`{{ $labels.service }} ", "%s names the command an operator runs", r.Alert)
		}
	}
	for _, want := range []string{"WalletglOutboxStuck", "WalletglConsumerLagGrowing", "WalletglDeadLetters", "WalletglInboxEventsFailed", "WalletglRelayPublishErrors"} {
		require.Contains(t, alerts, want)
	}

	// Every alert has a unit test where it fires and one where it stays quiet, and the tests feed
	// the rules series the services expose.
	var tests ruleTests
	readYAML(t, alertTestsFile, &tests)
	require.Equal(t, []string{filepath.Base(alertsFile)}, tests.RuleFiles)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			require.Empty(t, problems(s.Series, known), "%s: %s", tc.Name, s.Series)
		}
		for _, a := range tc.AlertRuleTest {
			require.Contains(t, alerts, a.Alertname, tc.Name)
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		require.True(t, fires[a], "a test where %s fires", a)
		require.True(t, quiet[a], "a test where %s stays quiet", a)
	}
}

// TestDashboardQueriesParse hands the dashboard's queries to promtool as recording rules, which
// it parses as PromQL. It is skipped where promtool is not installed, unless PROMTOOL names it
// (make check-deploy).
func TestDashboardQueriesParse(t *testing.T) {
	name, required := os.LookupEnv("PROMTOOL")
	if !required {
		name = "promtool"
	}
	promtool, err := exec.LookPath(name)
	if err != nil {
		if required {
			t.Fatalf("PROMTOOL=%s: %v", name, err)
		}
		t.Skip("promtool is not installed (Debian: apt-get install prometheus)")
	}
	exprs := readDashboard(t).exprs()
	titles := slices.Sorted(maps.Keys(exprs))
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, title := range titles {
		for j, expr := range exprs[title] {
			expr = strings.ReplaceAll(expr, "$__rate_interval", "5m") // Grafana's variable
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel%d_%d", i, j), Expr: expr})
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	msg, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	require.NoError(t, err, "promtool check rules on the dashboard's queries:\n%s", msg)
	require.Contains(t, string(msg), fmt.Sprintf("SUCCESS: %d rules found", len(rules)))
}
