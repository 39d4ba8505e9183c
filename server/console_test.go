package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/messages"
)

// The console is the page at / of the metrics listener: a plain GET answers it, with
// its assets, offline.
func TestConsolePageIsServed(t *testing.T) {
	srv, err := Start(context.Background(), testConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	for path, want := range map[string]string{
		"/": "<title>Holdfast</title>", "/ui/app.js": "EventSource", "/ui/style.css": "font-family",
		"/api/status": `"shards":[`, "/metrics": "holdfast_build_info",
	} {
		code, body := httpGet(t, srv.MetricsURL()+path)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, %.200q has no %q", path, code, body, want)
		}
		if strings.Contains(body, "://cdn") || strings.Contains(body, "https://") {
			t.Errorf("GET %s: the page loads something from the network", path)
		}
	}
}

// chromium finds a Chromium to drive: $HOLDFAST_CHROMIUM, or Debian's on the path.
func chromium() string {
	if p := os.Getenv("HOLDFAST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// The console in a real browser (headless Chromium): the page loads and shows each
// shard's owner, a pool's fill follows a reserve, and an event appears in the live tail.
// HOLDFAST_SCREENSHOT=file.png also saves a picture of the page.
func TestConsoleInABrowser(t *testing.T) {
	browser := chromium()
	if browser == "" && os.Getenv("HOLDFAST_REQUIRE_BROWSER") != "" {
		t.Fatal("HOLDFAST_REQUIRE_BROWSER is set and no Chromium was found (HOLDFAST_CHROMIUM, chromium on the path)")
	}
	if browser == "" {
		t.Skip("no Chromium on this machine (apt-get install chromium; .ci/run installs it): the console's browser test did not run")
	}
	srv, err := Start(context.Background(), testConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	cl := connectClient(t, srv.URL())

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1100))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first action starts the browser: its context has no deadline of its own (one
	// would stop the browser when it passes); the waits below have one.
	if _, err := chromedp.Run(bctx, chromedp.Navigate(srv.MetricsURL()+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	// text polls the page until the element's text satisfies ok.
	text := func(sel string, ok func(string) bool, what string) string {
		t.Helper()
		var got string
		for {
			s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`) || {}).textContent || ""`))
			if err == nil && ok(s) {
				return s
			}
			got = s
			if ctx.Err() != nil {
				t.Fatalf("%s: %s shows %q", what, sel, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	owner := text(`#shards tbody tr[data-shard="1"] td.owner`, func(s string) bool { return s != "" && s != "no owner" }, "shard 1's owner")
	t.Logf("shard 1 is served by %q", owner)

	if r, err := cl.CreatePool(ctx, "gpu-mem", 10); err != nil || r.Code != messages.CodeOK {
		t.Fatalf("pool.create: %v %v", r, err)
	}
	text(`#pools tbody tr[data-id="default/gpu-mem"] td.fill`, func(s string) bool { return strings.Contains(s, "0.0%") }, "the new pool's fill")
	held, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "trainer-7", TTL: time.Minute, Members: []*messages.Member{client.PoolUnits("gpu-mem", 4)}})
	if err != nil || held.Code != messages.CodeOK {
		t.Fatalf("lease.reserve: %v %v", held, err)
	}
	text(`#pools tbody tr[data-id="default/gpu-mem"] td.fill`, func(s string) bool { return strings.Contains(s, "40.0%") }, "the pool's fill after a reserve of 4 of 10")

	if r, err := cl.CreateResource(ctx, "seat-14C"); err != nil || r.Code != messages.CodeOK {
		t.Fatalf("resource.create: %v %v", r, err)
	}
	text(`#events`, func(s string) bool { return strings.Contains(s, "seat-14C") }, "the events tail after a resource.create")

	// The lookup box: the lease by its id, as its tenant, then as another tenant, who
	// learns nothing of it.
	lookup := func(tenant, id string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#lookup-tenant`), tenant),
			chromedp.SetValue(chromedp.CSS(`#lookup-kind`), "lease"), chromedp.SetValue(chromedp.CSS(`#lookup-q`), id),
			chromedp.SetJavascriptAttribute(chromedp.CSS(`#lookup-result`), "textContent", ""),
			chromedp.Click(chromedp.CSS(`#lookup button`))); err != nil {
			t.Fatal(err)
		}
		return text(`#lookup-result`, func(s string) bool { return strings.Contains(s, `"code"`) }, "the lookup's answer")
	}
	// It reads as an operator reads a lease: its holder, and times where the reply has
	// slots (the raw reply stays one click away).
	year := strconv.Itoa(time.Now().UTC().Year())
	if got := lookup("default", held.Lease.GetLeaseId()); !strings.Contains(got, "holder trainer-7") ||
		!strings.Contains(got, "allocated  "+year) || !strings.Contains(got, "expires    "+year) || !strings.Contains(got, "members    gpu-mem ×4") {
		t.Fatalf("lease lookup as its tenant: %s", got)
	}
	if got := lookup("acme", held.Lease.GetLeaseId()); !strings.Contains(got, "lease_not_found") || strings.Contains(got, "trainer-7") {
		t.Fatalf("lease lookup as another tenant: %s", got)
	}
	// The shard table says what its lease counts are; each event says when it happened.
	text(`#shards thead`, func(s string) bool { return strings.Contains(s, "reserved / active / revoking") }, "the lease counts' legend")
	text(`#events li time`, func(s string) bool { return len(s) == len("15:04:05.000Z") && s[2] == ':' }, "an event's time")

	// A page opened now starts with the last few events, not an empty tail.
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.MetricsURL()+"/")); err != nil {
		t.Fatalf("reloading the page: %v", err)
	}
	text(`#events li.recent`, func(s string) bool { return s != "" }, "the tail's backfill")
	text(`#events`, func(s string) bool { return strings.Contains(s, "seat-14C") && strings.Contains(s, "trainer-7") }, "the tail's backfill")

	// The tail narrowed to tenant acme shows acme's events and nothing of default's.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#tail-tenant`), "acme"), chromedp.Click(chromedp.CSS(`#tail button`))); err != nil {
		t.Fatal(err)
	}
	text(`#tail-state`, func(s string) bool { return strings.Contains(s, "following acme") }, "the tail's state")
	time.Sleep(300 * time.Millisecond) // the new subscription is in place
	acme := connectClient(t, srv.URL(), client.WithTenant("acme"))
	if r, err := cl.CreateResource(ctx, "default-only"); err != nil || r.Code != messages.CodeOK {
		t.Fatalf("resource.create: %v %v", r, err)
	}
	if r, err := acme.CreateRange(ctx, "vxlan", 4096, 4195, ""); err != nil || r.Code != messages.CodeOK {
		t.Fatalf("range.create as acme: %v %v", r, err)
	}
	tail := text(`#events`, func(s string) bool { return strings.Contains(s, "vxlan") }, "acme's tail after its range.create")
	if strings.Contains(tail, "default-only") || strings.Contains(tail, "seat-14C") {
		t.Fatalf("acme's tail shows default's events: %s", tail)
	}
	for i := 0; i < 30; i++ {
		if r, err := acme.Reserve(ctx, client.ReserveRequest{Holder: "router-1", TTL: time.Minute,
			Members: []*messages.Member{client.RangeAny("vxlan")}}); err != nil || r.Code != messages.CodeOK {
			t.Fatalf("range allocation: %v %v", r, err)
		}
	}
	text(`#ranges tbody tr[data-id="acme/vxlan"] td.fill`, func(s string) bool { return strings.Contains(s, "30.0%") }, "the range's fill")

	// A headless browser's --screenshot of the page finishes: the live tail opens after
	// the load event (it kept the page loading for ever).
	shot := filepath.Join(t.TempDir(), "console.png")
	sctx, scancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer scancel()
	cmd := exec.CommandContext(sctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1100",
		"--screenshot="+shot, srv.MetricsURL()+"/")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Fatalf("no screenshot: %v", err)
	}

	if path := os.Getenv("HOLDFAST_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func jsString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `\'`) + "'"
}

// The console's API names what is wrong with a lookup, and bounds the live tails.
func TestConsoleAPIBounds(t *testing.T) {
	srv, err := Start(context.Background(), testConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	get := func(path string) (int, string) { return httpGet(t, srv.MetricsURL()+path) }
	for path, want := range map[string]string{
		"/api/lookup":                              "name a lease, a range and value, a holder or a label",
		"/api/lookup?range=vxlan&value=ten":        "value: a range lookup needs a value",
		"/api/lookup?tenant=no%20spaces&lease=0-1": "invalid tenant",
		"/api/events?tenant=no%20spaces":           "tenant: 1-64 chars",
	} {
		if code, body := get(path); code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %s, want 400 naming %q", path, code, body, want)
		}
	}
	if code, body := get("/api/lookup?lease=0-99"); code != 200 || !strings.Contains(body, "lease_not_found") {
		t.Errorf("lookup of a lease that is not there: %d %s", code, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	for i := 0; i <= 16; i++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.MetricsURL()+"/api/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, resp)
		if i < 16 && resp.StatusCode != 200 {
			t.Fatalf("tail %d: %d", i+1, resp.StatusCode)
		}
		if i < 16 {
			// The tail is established once its first line (the subject comment) is out.
			line := make([]byte, 1)
			if _, err := resp.Body.Read(line); err != nil {
				t.Fatal(err)
			}
		}
		if i == 16 && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("the 17th tail: %d, want 503", resp.StatusCode)
		}
	}
}

// In a cluster the console of one node shows every node and every shard's owner — those
// served elsewhere through cluster.status — and knows which shards are its own.
func TestConsoleShowsTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	url := natstest.Start(t, 1).URL()
	withConsole := func(c *Config) { c.MetricsListen = "127.0.0.1:0" }
	a := clusterNode(t, url, "n1", 4, 1, withConsole)
	defer a.Shutdown(context.Background())
	b := clusterNode(t, url, "n2", 4, 1)
	defer b.Shutdown(context.Background())
	owners := waitBalanced(t, a, 2)
	var st struct {
		Node    string `json:"node"`
		Cluster bool   `json:"cluster"`
		Nodes   []struct {
			Node   string   `json:"node"`
			Shards []uint32 `json:"shards"`
		} `json:"nodes"`
		Shards []struct {
			Shard uint32 `json:"shard"`
			Owner string `json:"owner"`
			Here  bool   `json:"here"`
		} `json:"shards"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := httpGet(t, a.MetricsURL()+"/api/status")
		if code != 200 {
			t.Fatalf("status: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		same := len(st.Shards) == len(owners)
		for i := range st.Shards {
			same = same && st.Shards[i].Owner == owners[i] && st.Shards[i].Here == (owners[i] == "n1")
		}
		if same && st.Cluster && st.Node == "n1" && len(st.Nodes) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("console status %s; owners %v", body, owners)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
