package actors

// shardDispatcher runs one shard's mailbox on a dedicated goroutine. protoactor's
// default dispatcher starts a fresh goroutine each time a mailbox wakes, which costs a
// goroutine start and a stack growth per wake-up on a hot shard; a long-lived goroutine
// keeps its grown stack. The mailbox schedules at most one run at a time, so a channel
// of one is enough (a run that reschedules itself finds the channel empty).
type shardDispatcher struct {
	work chan func()
	done chan struct{}
}

func newShardDispatcher() *shardDispatcher {
	d := &shardDispatcher{work: make(chan func(), 1), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for fn := range d.work {
			fn()
		}
	}()
	return d
}

func (d *shardDispatcher) Schedule(fn func()) { d.work <- fn }

// Throughput is how many messages a run processes before yielding.
func (d *shardDispatcher) Throughput() int { return 512 }

func (d *shardDispatcher) stop() {
	close(d.work)
	<-d.done
}
