package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// Every verb a client may send is complete in every layer: its row of the verb table,
// the kernel's row (a write: shape rules, applier, retry view) or a shard's answer (a read of shards), the bridge's
// endpoint, the Go client's method and the CLI's command. The test names what a verb
// lacks; that every code of a verb's row shows in a scenario is the kernel's
// TestScenarios.
func TestEveryVerbIsComplete(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, ctx: context.Background()}
	p, err := newParser(e, &cliRoot{})
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string]bool{}
	var walk func(prefix string, n *kong.Node)
	walk = func(prefix string, n *kong.Node) {
		for _, c := range n.Children {
			commands[strings.TrimSpace(prefix+" "+c.Name)] = true
			walk(prefix+" "+c.Name, c)
		}
	}
	walk("", p.Model.Node)
	cl := reflect.TypeOf(&client.Client{})
	for _, v := range contract.Verbs() {
		info := v.Info()
		var lacks []string
		if info.Object == "" || info.Action == "" || info.Kind == 0 || info.Target == 0 || info.Method == "" {
			lacks = append(lacks, "a complete row of the verb table")
		}
		switch {
		case v.IsWrite() && !kernel.Complete(v):
			lacks = append(lacks, "a kernel row (its shape rules, applier and retry view: kernel/verbs.go)")
		case v.IsRead() && info.Target != contract.TargetNone && !actors.Answers(v):
			lacks = append(lacks, "a shard's answer")
		}
		if !bridge.Serves(v) {
			lacks = append(lacks, "a bridge endpoint")
		}
		if _, ok := cl.MethodByName(info.Method); !ok {
			lacks = append(lacks, "the client method "+info.Method)
		}
		cmd := info.Object + " " + strings.ReplaceAll(info.Action, "_", "-")
		if !commands[cmd] {
			lacks = append(lacks, "the CLI command "+cmd)
		}
		if len(lacks) > 0 {
			t.Errorf("%s lacks %s", v, strings.Join(lacks, ", "))
		}
	}
}
