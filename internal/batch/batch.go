// Package batch coalesces concurrent calls into batches: each of a few
// workers takes a waiting item, adds the items already queued and, for a
// short linger, those that arrive, up to a cap, and runs them together (one
// Redis pipeline, one Postgres write). Under load one round trip carries
// many calls; on an idle system a call waits at most the linger.
//
// A Batcher knows nothing of answers: callers keep their own reply
// channels in their items, and the run function answers them.
package batch

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("batch: closed")

// Options shape a Batcher.
type Options struct {
	// Workers is how many batches may run at once; below 1 means 1.
	// Items that arrive while every worker is busy wait and ride together
	// in the next batch.
	Workers int
	// MaxBatch caps the items of one batch; below 1 means 1.
	MaxBatch int
	// Linger is how long a worker that holds a batch waits for more items
	// before it runs the batch; 0 or less runs it with the items already
	// queued, without waiting.
	Linger time.Duration
	// Queue is how many submitted items may wait for a worker before
	// Submit blocks; 0 or less means Workers × MaxBatch.
	Queue int
}

// Batcher runs items of type T in batches; it is safe for concurrent use.
type Batcher[T any] struct {
	opts Options
	run  func(batch []T)
	// mu guards closed and the closing of items: Submit sends under the
	// read lock, so once Close holds the write lock no send is in
	// progress and items can be closed. An item Submit accepted is
	// therefore always run.
	mu      sync.RWMutex
	closed  bool
	items   chan T
	workers sync.WaitGroup
}

// New starts the workers; run is called with each batch, in the order the
// items were submitted, from one worker at a time per batch (batches of
// different workers run concurrently). The batch slice is reused once run
// returns: run must not keep it. Close stops the workers.
func New[T any](opts Options, run func(batch []T)) *Batcher[T] {
	opts.Workers = max(opts.Workers, 1)
	opts.MaxBatch = max(opts.MaxBatch, 1)
	if opts.Queue <= 0 {
		opts.Queue = opts.Workers * opts.MaxBatch
	}
	b := &Batcher[T]{opts: opts, run: run, items: make(chan T, opts.Queue)}
	b.workers.Add(opts.Workers)
	for range opts.Workers {
		go b.work()
	}
	return b
}

// Submit queues item for a batch. It returns ErrClosed after Close, and
// ctx's error if ctx ends while the queue is full; otherwise the item will
// be run, even if Close is called meanwhile.
func (b *Batcher[T]) Submit(ctx context.Context, item T) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	select {
	case b.items <- item:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close refuses further items, runs every item already submitted, and
// returns once the workers have stopped. Calling it again waits the same.
func (b *Batcher[T]) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.items)
	}
	b.mu.Unlock()
	b.workers.Wait()
}

func (b *Batcher[T]) work() {
	defer b.workers.Done()
	batch := make([]T, 0, b.opts.MaxBatch)
	var linger *time.Timer
	if b.opts.Linger > 0 {
		linger = time.NewTimer(b.opts.Linger)
		linger.Stop()
	}
	for first := range b.items {
		batch = b.fill(append(batch, first), linger)
		b.run(batch)
		clear(batch) // let the items go once answered
		batch = batch[:0]
	}
}

// fill adds to batch the items already queued and, with a linger timer,
// those arriving before it fires, up to MaxBatch.
func (b *Batcher[T]) fill(batch []T, linger *time.Timer) []T {
	var timeout <-chan time.Time
	if linger != nil {
		linger.Reset(b.opts.Linger)
		defer linger.Stop()
		timeout = linger.C
	}
	for len(batch) < b.opts.MaxBatch {
		it, ok := b.next(timeout)
		if !ok {
			return batch
		}
		batch = append(batch, it)
	}
	return batch
}

// next takes a queued item, or waits for one until timeout fires (nil: not
// at all); false when it has none. After Close the queue still yields what
// was submitted before it; a closed, empty queue yields nothing at once.
func (b *Batcher[T]) next(timeout <-chan time.Time) (T, bool) {
	select {
	case it, ok := <-b.items:
		return it, ok
	default:
	}
	var none T
	if timeout == nil {
		return none, false
	}
	select {
	case it, ok := <-b.items:
		return it, ok
	case <-timeout:
		return none, false
	}
}
