// Command jsleader prints which NATS server leads each JetStream stream named, or moves
// one stream's leadership to a given server: scripts/cluster-failover.sh uses it to kill
// the node whose embedded server leads the cluster bucket (or the events stream) and to
// keep that leadership off the node the bench is connected to.
//
//	go run ./scripts/jsleader URL STREAM...              one "STREAM SERVER" line each
//	go run ./scripts/jsleader URL -stepdown STREAM SERVER
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "jsleader:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: jsleader URL STREAM... | jsleader URL -stepdown STREAM SERVER")
	}
	nc, err := nats.Connect(args[0])
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if args[1] == "-stepdown" {
		if len(args) != 4 {
			return fmt.Errorf("-stepdown STREAM SERVER")
		}
		resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+args[2], fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, args[3]))
		if err != nil {
			return err
		}
		fmt.Println(string(resp.Data))
		return nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for _, name := range args[1:] {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil {
			return fmt.Errorf("%s: no cluster info (%v)", name, err)
		}
		fmt.Println(name, info.Cluster.Leader)
	}
	return nil
}
