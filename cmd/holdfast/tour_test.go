package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/internal/testserver"
	"github.com/holdfast/holdfast/messages"
)

// tourBlocks returns the shell blocks of the README's tour, in order.
func tourBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "## A five-minute tour")
	if start < 0 {
		t.Fatal("README has no tour section")
	}
	s = s[start:]
	if end := strings.Index(s[1:], "\n## "); end >= 0 {
		s = s[:end+1]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(s, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) != 2 {
		t.Fatalf("the tour has %d shell blocks, want 2 (holdfast, nats)", len(blocks))
	}
	return blocks
}

// commandLines splits a block into commands: comments dropped, "&&" chains split.
func commandLines(block string) []string {
	var out []string
	for _, line := range strings.Split(block, "\n") {
		if i := strings.Index(line, "#"); i >= 0 && !strings.Contains(line[:i], "'") {
			line = line[:i]
		}
		for _, c := range strings.Split(line, "&&") {
			if c = strings.TrimSpace(c); c != "" {
				out = append(out, c)
			}
		}
	}
	return out
}

// TestReadmeTour runs the README's tour word for word against a fresh server (the same
// 8 shards as `holdfast serve`), adding only --server, and the bench line with a shorter
// --duration: every command must succeed, and the lease the tour names must be the one
// the reserve printed. Then the `nats req` lines, on another fresh server, as requests
// with the same subjects and payloads.
func TestReadmeTour(t *testing.T) {
	srv := testserver.Start(t)
	blocks := tourBlocks(t)
	for _, line := range commandLines(blocks[0]) {
		args := strings.Fields(line)
		if args[0] != "holdfast" {
			t.Fatalf("tour line %q does not run holdfast", line)
		}
		cmd := command(args[1])
		args = args[2:]
		if args[0] == "--scenario" || (len(args) > 1 && args[1] == "--scenario") {
			for i := range args {
				if args[i] == "--duration" {
					args[i+1] = "1s" // the load tool: shortened for the test
				}
			}
		}
		var out, errb bytes.Buffer
		e := &env{stdout: &out, stderr: &errb, ctx: context.Background()}
		if code := cmd(e, append(args, "--server", srv.URL)); code != exitOK {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", line, code, out.String(), errb.String())
		}
		if strings.Contains(line, "lease reserve") && !strings.Contains(out.String(), "lease 3-5\n") {
			t.Fatalf("%s: the tour says lease 3-5, the reserve printed:\n%s%s", line, out.String(), errb.String())
		}
		if strings.Contains(line, "watch --from-start") && !strings.Contains(errb.String(), "replayed") {
			t.Fatalf("%s: no 'replayed N, following live' line:\n%s", line, errb.String())
		}
	}

	// The nats CLI block is the same tour on its own fresh server.
	nc, err := nats.Connect(testserver.Start(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := regexp.MustCompile(`^nats req (\S+) '(.*)'$`)
	n := 0
	for _, line := range commandLines(blocks[1]) {
		m := req.FindStringSubmatch(line)
		if m == nil {
			continue // nats sub, nats micro ls: interactive
		}
		n++
		reply, err := nc.Request(m[1], []byte(m[2]), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		var r messages.Reply
		if err := messages.UnmarshalJSON(reply.Data, &r); err != nil || r.Code != messages.CodeOK {
			t.Fatalf("%s: %v %s", line, err, reply.Data)
		}
	}
	if n != 3 {
		t.Fatalf("%d nats req lines, want 3", n)
	}
}
