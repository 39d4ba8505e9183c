package server

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// metricName matches a metric named in a PromQL expression or a rule's text.
var metricName = regexp.MustCompile(`\b(?:holdfast|process|go)_[a-z0-9_]+\b`)

// The Grafana dashboard and the Prometheus rules in deploy/ name only metrics that a
// running server exposes on /metrics: a renamed metric fails here, not on an operator's
// empty panel or an alert that can never fire.
func TestDashboardAndRulesNameExistingMetrics(t *testing.T) {
	cfg := testConfig(t.TempDir())
	srv, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	cl := connectClient(t, srv.URL())
	ctx := context.Background()
	// The series that exist only once there is something to count: a request's code,
	// the fullest pools and ranges.
	if r, err := cl.CreatePool(ctx, "gpu-mem", 10); err != nil || r.Code != messages.CodeOK {
		t.Fatalf("pool.create: %v %v", r, err)
	}
	if r, err := cl.CreateRange(ctx, "vxlan", 1, 100, ""); err != nil || r.Code != messages.CodeOK {
		t.Fatalf("range.create: %v %v", r, err)
	}
	if r, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "h", TTL: time.Minute, Members: []*messages.Member{client.PoolUnits("gpu-mem", 4)}}); err != nil || r.Code != messages.CodeOK {
		t.Fatalf("lease.reserve: %v %v", r, err)
	}

	var families map[string]string
	deadline := time.Now().Add(10 * time.Second)
	for {
		families = scrapeFamilies(t, srv.MetricsURL()+"/metrics")
		if families["holdfast_pool_fill_ratio"] != "" && families["holdfast_range_fill_ratio"] != "" {
			break // the fullest pools and ranges are refreshed once a second
		}
		if time.Now().After(deadline) {
			t.Fatal("no holdfast_pool_fill_ratio or holdfast_range_fill_ratio after a pool and a range were created")
		}
		time.Sleep(200 * time.Millisecond)
	}
	exists := func(name string) bool {
		if families[name] != "" {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && (families[base] == "histogram" || families[base] == "summary") {
				return true
			}
		}
		return false
	}

	dashboard := dashboardExprs(t, "../deploy/grafana/holdfast.json")
	rules, err := os.ReadFile("../deploy/prometheus/holdfast.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []struct {
		file  string
		texts []string
	}{
		{"deploy/grafana/holdfast.json", dashboard},
		{"deploy/prometheus/holdfast.rules.yml", []string{string(rules)}},
	} {
		named := map[string]bool{}
		for _, text := range src.texts {
			for _, n := range metricName.FindAllString(text, -1) {
				named[n] = true
			}
		}
		if len(named) < 5 {
			t.Fatalf("%s names only %d metrics: is it the file it should be?", src.file, len(named))
		}
		var missing []string
		for n := range named {
			if !exists(n) {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s names metrics /metrics does not have: %s", src.file, strings.Join(missing, ", "))
		}
	}
}

// scrapeFamilies reads the metric families of a /metrics page: name → type.
func scrapeFamilies(t *testing.T, url string) map[string]string {
	t.Helper()
	_, body := httpGet(t, url)
	out := map[string]string{}
	for line := range strings.SplitSeq(body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

// dashboardExprs loads a Grafana dashboard, checks the shape Grafana needs (a title, a
// uid, panels each with a type and a place on the grid), and returns every query
// expression and description, which must each be there for a panel with queries.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	}
	type panel struct {
		ID          int               `json:"id"`
		Type        string            `json:"type"`
		Title       string            `json:"title"`
		Description string            `json:"description"`
		GridPos     map[string]int    `json:"gridPos"`
		Targets     []target          `json:"targets"`
		Panels      []json.RawMessage `json:"panels"`
	}
	var d struct {
		Title         string  `json:"title"`
		UID           string  `json:"uid"`
		SchemaVersion int     `json:"schemaVersion"`
		Panels        []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion == 0 || len(d.Panels) == 0 {
		t.Fatalf("%s: title %q, uid %q, schemaVersion %d, %d panels", path, d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	var texts []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if p.Type == "" || p.Title == "" || p.GridPos["w"] == 0 || p.GridPos["h"] == 0 || ids[p.ID] {
			t.Errorf("%s: panel %d %q: needs a type, a title, a grid place and a unique id", path, p.ID, p.Title)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s: panel %q query %s has no expression", path, p.Title, tg.RefID)
			}
			texts = append(texts, tg.Expr)
		}
		texts = append(texts, p.Description)
	}
	return texts
}
