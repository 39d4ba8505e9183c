//go:build unix

package harness

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Target is what a round drives and the nemesis hurts: one holdfast process (Server), or
// the nodes of a cluster (Cluster).
type Target interface {
	URL() string
	URLGen() int
	Running() bool
	Start() error
	Stop(timeout time.Duration) bool
	Kill()
	Pause()
	Resume()
	PID() int
	Crashes() []string
	SetClockOffset(d time.Duration) error
	SetFail(mode string) error
	ClearFail() error
	Healthz(ctx context.Context) (int, string, error)
	ShardMetric(ctx context.Context, name string) (map[uint32]float64, error)
	LogTail() string
}

var (
	_ Target = (*Server)(nil)
	_ Target = (*Cluster)(nil)
)

// Cluster is the holdfast nodes of a cluster on one NATS deployment. Its faults hit one
// node at a time, in turn (kill, pause, stop); its reads see the cluster as a whole.
type Cluster struct {
	Nodes []*Server
	url   string
	// Net, when set, is the network between the cluster's NATS servers, which the
	// partition faults cut; ClientURLs then place client i on server i mod n.
	Net        Partitioner
	ClientURLs []string

	mu     sync.Mutex
	next   int
	victim *Server
}

// NewCluster prepares nodes (not started) with the given per-node configs; url is the
// NATS deployment every node and client uses.
func NewCluster(url string, cfgs []ServerConfig) (*Cluster, error) {
	urls := make([]string, len(cfgs))
	for i := range urls {
		urls[i] = url
	}
	return NewClusterOn(url, urls, cfgs)
}

// NewClusterOn is NewCluster with node i connected to nodeURLs[i] only (its own NATS
// server: a partition puts the node on its server's side).
func NewClusterOn(url string, nodeURLs []string, cfgs []ServerConfig) (*Cluster, error) {
	c := &Cluster{url: url}
	for i, cfg := range cfgs {
		cfg.Extra = append(append([]string(nil), cfg.Extra...), "--nats", nodeURLs[i], "--node", fmt.Sprintf("n%d", i+1), "--journal", "jetstream")
		s, err := NewServer(cfg)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	return c, nil
}

// pick chooses the next node a fault hits.
func (c *Cluster) pick() *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.victim = c.Nodes[c.next%len(c.Nodes)]
	c.next++
	return c.victim
}

func (c *Cluster) last() *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.victim == nil {
		return c.Nodes[0]
	}
	return c.victim
}

// URL is the NATS deployment's.
func (c *Cluster) URL() string { return c.url }

// ClientURL places client i on one server (ClientURLs), or on the deployment.
func (c *Cluster) ClientURL(i int) string {
	if len(c.ClientURLs) == 0 {
		return c.url
	}
	return c.ClientURLs[i%len(c.ClientURLs)]
}

// Partitioner cuts and heals the links between a cluster's NATS servers (natstest.Net).
type Partitioner interface {
	Isolate(i int)
	Cut(i, j int)
	CutOneWay(from, to int)
	Heal()
}

// URLGen never changes: the deployment outlives the nodes.
func (c *Cluster) URLGen() int { return 0 }

// Running reports whether every node runs.
func (c *Cluster) Running() bool {
	for _, n := range c.Nodes {
		if !n.Running() {
			return false
		}
	}
	return true
}

// Start starts every node that is not running.
func (c *Cluster) Start() error {
	for _, n := range c.Nodes {
		if !n.Running() {
			if err := n.Start(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stop stops with SIGTERM the next node in turn during a round (it hands its shards
// over), or every node when all are to stop (after a round: the final restart).
func (c *Cluster) Stop(timeout time.Duration) bool {
	return c.pick().Stop(timeout)
}

// StopAll stops every node with SIGTERM.
func (c *Cluster) StopAll(timeout time.Duration) bool {
	clean := true
	for _, n := range c.Nodes {
		clean = n.Stop(timeout) && clean
	}
	return clean
}

// Kill kills the next node in turn with SIGKILL.
func (c *Cluster) Kill() { c.pick().Kill() }

// Pause stops the next node in turn with SIGSTOP.
func (c *Cluster) Pause() { c.pick().Pause() }

// Resume resumes every node.
func (c *Cluster) Resume() {
	for _, n := range c.Nodes {
		n.Resume()
	}
}

// PID is the last victim's.
func (c *Cluster) PID() int { return c.last().PID() }

// Crashes lists every node's unexpected exits.
func (c *Cluster) Crashes() []string {
	var out []string
	for i, n := range c.Nodes {
		for _, s := range n.Crashes() {
			out = append(out, fmt.Sprintf("n%d: %s", i+1, s))
		}
	}
	return out
}

// SetClockOffset moves every node's test clock (a cluster shard's slot clock runs from
// its claim, so this shows that a node's wall clock does not matter).
func (c *Cluster) SetClockOffset(d time.Duration) error {
	for _, n := range c.Nodes {
		if err := n.SetClockOffset(d); err != nil {
			return err
		}
	}
	return nil
}

// SetFail and ClearFail drive the file journal's faults, which a cluster's JetStream
// journal does not have: they are accepted and change nothing.
func (c *Cluster) SetFail(string) error { return nil }
func (c *Cluster) ClearFail() error     { return nil }

// Healthz is the first running node's.
func (c *Cluster) Healthz(ctx context.Context) (int, string, error) {
	for _, n := range c.Nodes {
		if n.Running() {
			return n.Healthz(ctx)
		}
	}
	return 0, "", fmt.Errorf("no node running")
}

// ShardMetric merges a per-shard metric over the nodes, the highest value per shard: a
// shard's published position only grows, whichever node reported it.
func (c *Cluster) ShardMetric(ctx context.Context, name string) (map[uint32]float64, error) {
	out := map[uint32]float64{}
	var lastErr error
	got := false
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		m, err := n.ShardMetric(ctx, name)
		if err != nil {
			lastErr = err
			continue
		}
		got = true
		for k, v := range m {
			out[k] = max(out[k], v)
		}
	}
	if !got {
		return nil, lastErr
	}
	return out, nil
}

// LogTail is every node's last lines.
func (c *Cluster) LogTail() string {
	s := ""
	for i, n := range c.Nodes {
		s += fmt.Sprintf("--- n%d\n%s\n", i+1, n.LogTail())
	}
	return s
}
