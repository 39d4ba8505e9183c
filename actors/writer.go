package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/holdfast/holdfast/persistence"
)

// writer runs beside a shard actor and does the journal's blocking work — append with
// fsync, compaction — one job at a time, reporting back by message so the actor never
// blocks on I/O. While it writes one batch the actor fills the next: group commit.
type writer struct {
	journal persistence.Journal
	jobs    chan writeJob
	exited  chan struct{}
	once    sync.Once
	err     error
}

type writeJob struct {
	records []persistence.Record // append these, or
	compact uint64               // compact segments up to this lsn (when records is nil), or
	barrier bool                 // prove the journal still this writer's (barrier.go)
	gen     uint64
	done    chan error // buffered: the result, also for a synchronous wait at stop
}

func startWriter(j persistence.Journal, root *actor.RootContext, pid *actor.PID) *writer {
	w := &writer{journal: j, jobs: make(chan writeJob, 4), exited: make(chan struct{})}
	go func() {
		defer close(w.exited)
		for job := range w.jobs {
			if job.barrier {
				w.barrier(job, func(err error) { root.Send(pid, &barrierDone{gen: job.gen, err: err}) })
				continue
			}
			if job.records == nil {
				// Compaction failing only leaves old segments behind; it never
				// endangers acknowledged writes, so it does not halt the shard.
				_ = j.Compact(job.compact)
				continue
			}
			if pj, ok := j.(persistence.Pipelined); ok {
				// The journal reports each batch in order, from its own goroutine, while
				// this one hands it the next.
				pj.AppendAsync(job.records, func(err error) {
					job.done <- err
					root.Send(pid, &batchDone{gen: job.gen, err: err})
				})
				continue
			}
			err := j.Append(job.records)
			job.done <- err
			root.Send(pid, &batchDone{gen: job.gen, err: err})
		}
	}()
	return w
}

// stop waits for queued jobs to finish and closes the journal.
func (w *writer) stop() error {
	w.once.Do(func() {
		close(w.jobs)
		<-w.exited
		w.err = w.journal.Close()
	})
	return w.err
}
