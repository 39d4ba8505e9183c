// Command journalfeed measures, on JetStream alone, the two ways a cluster can store a
// write and its events (docs/design.md, "What the events cost, and the feed as the
// journal"):
//
//   - today: each shard appends its batch to a stream of its own (R3, fenced by the
//     stream's expected last sequence) and then publishes the batch's events, one message
//     each with a message id, into a second R3 stream;
//   - feed: every shard appends to one R3 stream, its batch and the events as one atomic
//     batch (Nats-Batch-Id), fenced by the expected last sequence of its own subject.
//
// Three nats-servers run in this process, clustered over loopback with JetStream
// fsyncing every write (as Holdfast's embedded cluster does). Each shard has one writer
// with one append in flight; the events of a batch ride in the same append (feed) or
// follow it asynchronously (today), as Holdfast's publisher does.
//
//	go run ./bench/journalfeed --mode today,feed --duration 8s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	modes := flag.String("mode", "today,feed", "comma-separated: today, atomic, feed")
	shards := flag.Int("shards", 8, "writers, one per shard")
	entries := flag.Int("entries", 4, "entries per journal batch")
	events := flag.Int("events", 2, "events per entry")
	duration := flag.Duration("duration", 8*time.Second, "how long each mode runs")
	rounds := flag.Int("rounds", 1, "run the modes this many times, in turn")
	flag.Parse()
	dir, err := os.MkdirTemp("", "journalfeed")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	for r := 1; r <= *rounds; r++ {
		for _, mode := range strings.Split(*modes, ",") {
			w := workload{shards: *shards, entries: *entries, events: *events, duration: *duration}
			res, err := run(mode, fmt.Sprintf("%s/%s-%d", dir, mode, r), w)
			if err != nil {
				fail(err)
			}
			fmt.Printf("round %d %-6s %s\n", r, mode, res)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "journalfeed:", err)
	os.Exit(1)
}

type workload struct {
	shards, entries, events int
	duration                time.Duration
}

// result is what one mode did: batches appended (each entries long), and the latency
// of an append as its writer saw it.
type result struct {
	batches int64
	took    time.Duration
	lat     []time.Duration
	entries int
}

func (r result) String() string {
	slices.Sort(r.lat)
	p := func(q float64) time.Duration {
		if len(r.lat) == 0 {
			return 0
		}
		return r.lat[int(q*float64(len(r.lat)-1))]
	}
	perS := float64(r.batches) / r.took.Seconds()
	return fmt.Sprintf("%8.0f batches/s %8.0f entries/s   append p50 %v p99 %v",
		perS, perS*float64(r.entries), p(0.5).Round(time.Microsecond), p(0.99).Round(time.Microsecond))
}

// cluster starts three clustered nats-servers with JetStream under dir.
func cluster(dir string) ([]*server.Server, error) {
	const base = 24300
	var servers []*server.Server
	for i := range 3 {
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(base+100+j))
			}
		}
		o := &server.Options{ServerName: "n" + strconv.Itoa(i), Host: "127.0.0.1", Port: base + i,
			JetStream: true, StoreDir: fmt.Sprintf("%s/n%d", dir, i), SyncAlways: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "jf", Host: "127.0.0.1", Port: base + 100 + i},
			Routes:  server.RoutesFromStr(strings.Join(routes, ","))}
		s, err := server.NewServer(o)
		if err != nil {
			return nil, err
		}
		go s.Start()
		servers = append(servers, s)
	}
	for _, s := range servers {
		if !s.ReadyForConnections(10 * time.Second) {
			return nil, errors.New("a server did not start")
		}
	}
	return servers, nil
}

func run(mode, dir string, w workload) (result, error) {
	servers, err := cluster(dir)
	if err != nil {
		return result{}, err
	}
	defer func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}()
	conns := make([]*nats.Conn, len(servers))
	for i, s := range servers {
		if conns[i], err = nats.Connect(s.ClientURL()); err != nil {
			return result{}, err
		}
		defer conns[i].Close()
	}
	js, err := jetstream.New(conns[0])
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var writer func(k int, nc *nats.Conn) (func() error, error)
	switch mode {
	case "today":
		writer, err = today(ctx, js, w)
	case "feed":
		writer, err = feed(ctx, js, w)
	case "atomic":
		writer, err = atomic(ctx, js, w)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return result{}, err
	}
	appends := make([]func() error, w.shards)
	for k := range w.shards {
		if appends[k], err = writer(k, conns[k%len(conns)]); err != nil {
			return result{}, err
		}
	}
	return drive(appends, w)
}

// drive runs each shard's appends one after another for the workload's duration, all
// shards at once.
func drive(appends []func() error, w workload) (result, error) {
	res := result{entries: w.entries}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(appends))
	start := time.Now()
	stop := start.Add(w.duration)
	for k, appendOnce := range appends {
		wg.Go(func() {
			var lat []time.Duration
			for time.Now().Before(stop) {
				t := time.Now()
				if err := appendOnce(); err != nil {
					errs <- fmt.Errorf("shard %d: %w", k, err)
					return
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.batches += int64(len(lat))
			mu.Unlock()
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	select {
	case err := <-errs:
		return res, err
	default:
	}
	return res, nil
}

// payloads of a batch: one record message of entries × 100 bytes, and events of 300
// bytes (a Holdfast event is some 250–400 bytes of JSON).
var (
	record = make([]byte, 100)
	event  = []byte(strings.Repeat("e", 300))
)

// today: a stream per shard fenced by its last sequence; events into one more stream,
// published without waiting, with a message id.
func today(ctx context.Context, js jetstream.JetStream, w workload) (func(int, *nats.Conn) (func() error, error), error) {
	if err := createStream(ctx, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Replicas: 3,
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		return nil, err
	}
	return func(k int, nc *nats.Conn) (func() error, error) {
		wjs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
		if err != nil {
			return nil, err
		}
		journal, err := shardJournal(ctx, js, wjs, k, w)
		if err != nil {
			return nil, err
		}
		n := 0
		return func() error {
			if err := journal(); err != nil {
				return err
			}
			for range w.entries * w.events {
				n++
				if _, err := wjs.PublishMsgAsync(&nats.Msg{Subject: "ev.t.events.lease.reserved", Data: event},
					jetstream.WithMsgID(strconv.Itoa(k)+"-"+strconv.Itoa(n))); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}, nil
}

// atomic: today's journal, a stream per shard; each batch's events follow it into a
// second stream as one atomic batch, sent by a goroutine of the shard's that keeps one
// such batch in flight and puts everything queued meanwhile into the next (up to
// maxAtomic messages), each event with its message id.
func atomic(ctx context.Context, js jetstream.JetStream, w workload) (func(int, *nats.Conn) (func() error, error), error) {
	if err := createStream(ctx, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Replicas: 3,
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute, AllowAtomicPublish: true}); err != nil {
		return nil, err
	}
	return func(k int, nc *nats.Conn) (func() error, error) {
		wjs, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		journal, err := shardJournal(ctx, js, wjs, k, w)
		if err != nil {
			return nil, err
		}
		queued := make(chan int, 1<<16) // events to send, by count
		go sendAtomic(k, nc, queued)
		return func() error {
			if err := journal(); err != nil {
				return err
			}
			queued <- w.entries * w.events
			return nil
		}, nil
	}, nil
}

// sendAtomic sends shard k's events as atomic batches, one in flight, each taking what
// was queued meanwhile (up to maxAtomic messages).
func sendAtomic(k int, nc *nats.Conn, queued chan int) {
	n, batch := 0, 0
	for first := range queued {
		count := first
		for more := true; more && count < maxAtomic; {
			select {
			case c, ok := <-queued:
				if !ok {
					more = false
				}
				count += c
			default:
				more = false
			}
		}
		batch++
		id := strconv.Itoa(k) + "-b" + strconv.Itoa(batch)
		for i := 1; i <= count; i++ {
			n++
			m := nats.NewMsg("ev.t.events.lease.reserved")
			m.Data = event
			m.Header.Set("Nats-Msg-Id", strconv.Itoa(k)+"-"+strconv.Itoa(n))
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
			if i < count {
				if nc.PublishMsg(m) != nil {
					return
				}
				continue
			}
			m.Header.Set("Nats-Batch-Commit", "1")
			resp, err := nc.RequestMsg(m, 5*time.Second)
			if err != nil {
				fmt.Fprintln(os.Stderr, "events batch:", err)
				return
			}
			if _, err := pubAckSeq(resp.Data); err != nil {
				fmt.Fprintln(os.Stderr, "events batch:", err)
				return
			}
		}
	}
}

// maxAtomic is the most messages one atomic batch takes (nats-server's default bound is
// 1,000).
const maxAtomic = 512

// feed: one stream; each append is an atomic batch of the record and the events, fenced
// by the expected last sequence of the shard's subject.
func feed(ctx context.Context, js jetstream.JetStream, w workload) (func(int, *nats.Conn) (func() error, error), error) {
	if err := createStream(ctx, js, jetstream.StreamConfig{Name: "FEED", Subjects: []string{"j.*", "ev.>"}, Replicas: 3,
		Storage: jetstream.FileStorage, AllowAtomicPublish: true}); err != nil {
		return nil, err
	}
	return func(k int, nc *nats.Conn) (func() error, error) {
		subj := "j." + strconv.Itoa(k)
		var last uint64
		n := 0
		rec := slices.Repeat(record, w.entries)
		msgs := 1 + w.entries*w.events
		return func() error {
			n++
			id := strconv.Itoa(k) + "-" + strconv.Itoa(n)
			for i := 1; i <= msgs; i++ {
				m := nats.NewMsg("ev.t.events.lease.reserved")
				m.Data = event
				if i == 1 {
					m.Subject, m.Data = subj, rec
					m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(last, 10))
				}
				m.Header.Set("Nats-Batch-Id", id)
				m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
				if i < msgs {
					if err := nc.PublishMsg(m); err != nil {
						return err
					}
					continue
				}
				m.Header.Set("Nats-Batch-Commit", "1")
				resp, err := nc.RequestMsg(m, 5*time.Second)
				if err != nil {
					return err
				}
				seq, err := pubAckSeq(resp.Data)
				if err != nil {
					return err
				}
				last = seq - uint64(msgs-1) // the record is the batch's first message
			}
			return nil
		}, nil
	}, nil
}

// shardJournal creates shard k's own journal stream, as today's layout keeps it, and
// returns what appends one batch's record to it: fenced by the stream's last sequence,
// as a shard's owner appends, over wjs (the shard's own connection).
func shardJournal(ctx context.Context, js, wjs jetstream.JetStream, k int, w workload) (func() error, error) {
	subj := "j." + strconv.Itoa(k)
	if err := createStream(ctx, js, jetstream.StreamConfig{Name: "J_" + strconv.Itoa(k), Subjects: []string{subj},
		Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	var last uint64
	rec := slices.Repeat(record, w.entries)
	return func() error {
		ack, err := wjs.PublishMsg(context.Background(), &nats.Msg{Subject: subj, Data: rec},
			jetstream.WithExpectLastSequence(last))
		if err != nil {
			return err
		}
		last = ack.Sequence
		return nil
	}, nil
}

// createStream creates a stream, trying again while the cluster elects its meta leader.
func createStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.CreateStream(actx, cfg)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pubAckSeq reads the sequence of a PubAck, or its error.
func pubAckSeq(b []byte) (uint64, error) {
	var ack struct {
		Seq   uint64 `json:"seq"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &ack); err != nil {
		return 0, fmt.Errorf("unreadable PubAck %s: %w", b, err)
	}
	if ack.Error != nil {
		return 0, errors.New(ack.Error.Description)
	}
	return ack.Seq, nil
}
