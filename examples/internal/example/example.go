// Package example is what every example program shares, so that each main.go shows
// only its own use of Holdfast: the -server and -tenant flags, the NATS connection and
// the client, the interrupt, and an exit status that counts -help as success.
package example

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
)

// Run is an example's body: its arguments, and where it prints.
type Run func(ctx context.Context, args []string, out io.Writer) error

// Main runs an example until it ends or is interrupted, and exits 1 with its error.
func Main(name string, run Run) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) { // -help printed the usage: success
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Flags is an example's flag set with the two flags every example has.
type Flags struct {
	*flag.FlagSet
	name   string
	server *string
	tenant *string
}

// NewFlags starts an example's flag set, with tenant as -tenant's default; the example
// adds its own flags to the result.
func NewFlags(name, tenant string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return &Flags{
		FlagSet: fs,
		name:    name,
		server:  fs.String("server", nats.DefaultURL, "NATS server URL"),
		tenant:  fs.String("tenant", tenant, "Holdfast tenant"),
	}
}

// Start parses args (unless the example has parsed them already, to choose opts),
// connects to -server as this example, makes a client of -tenant
// with opts, and bounds ctx by timeout; done closes all of it.
func (f *Flags) Start(ctx context.Context, args []string, timeout time.Duration, opts ...client.Option) (hf *client.Client, _ context.Context, done func(), err error) {
	if !f.Parsed() {
		if err := f.Parse(args); err != nil {
			return nil, nil, nil, err
		}
	}
	nc, err := nats.Connect(*f.server, nats.Name("holdfast example "+f.name))
	if err != nil {
		return nil, nil, nil, err
	}
	hf, err = client.New(nc, append([]client.Option{client.WithTenant(*f.tenant)}, opts...)...)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return hf, ctx, func() { cancel(); nc.Close() }, nil
}
