// Package node holds the Node.js example; this test keeps its package.json honest.
package node

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// minMajor is the lowest Node major version an engines range admits, for the forms npm
// packages use here (">=18", ">= 18.0.0", ">= 22.x").
func minMajor(t *testing.T, r string) int {
	t.Helper()
	m := regexp.MustCompile(`^>=\s*(\d+)`).FindStringSubmatch(r)
	if m == nil {
		t.Fatalf("engines %q: not a >= range", r)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Every locked package runs on the Node the example says it needs: its engines never ask
// for a newer major than package.json's (@nats-io/nuid 3 wants Node 22 where the example
// said 18).
func TestLockedPackagesRunOnTheStatedNode(t *testing.T) {
	var pkg struct {
		Engines struct{ Node string } `json:"engines"`
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
			Engines any    `json:"engines"`
		} `json:"packages"`
	}
	for file, v := range map[string]any{"package.json": &pkg, "package-lock.json": &lock} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	stated := minMajor(t, pkg.Engines.Node)
	for name, p := range lock.Packages {
		e, ok := p.Engines.(map[string]any)
		if !ok {
			continue
		}
		if r, ok := e["node"].(string); ok && minMajor(t, r) > stated {
			t.Errorf("%s %s needs node %s; package.json says %s", name, p.Version, r, pkg.Engines.Node)
		}
	}
}
