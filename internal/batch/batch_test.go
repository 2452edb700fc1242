package batch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/batch"
)

// recorder keeps the batches a Batcher ran, copied (the Batcher reuses
// its slices), and can hold the first run until released.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	ran     chan struct{} // a value per run, when not nil
	hold    chan struct{} // runs wait for it to close, when not nil
}

func (r *recorder) run(b []int) {
	if r.hold != nil {
		<-r.hold
	}
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(b))
	r.mu.Unlock()
	if r.ran != nil {
		r.ran <- struct{}{}
	}
}

func (r *recorder) got() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func submit(t *testing.T, b *batch.Batcher[int], items ...int) {
	t.Helper()
	for _, it := range items {
		if err := b.Submit(context.Background(), it); err != nil {
			t.Fatalf("Submit(%d) = %v", it, err)
		}
	}
}

// A worker busy with one batch lets the items behind it gather: the next
// batches carry them in the order they came, MaxBatch at a time.
func TestBatchesKeepOrderUpToMaxBatch(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	r := &recorder{}
	first := true
	b := batch.New(batch.Options{Workers: 1, MaxBatch: 4, Queue: 16}, func(items []int) {
		if first {
			first = false
			close(started)
			<-release
		}
		r.run(items)
	})
	submit(t, b, 1)
	<-started
	submit(t, b, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	close(release)
	b.Close()
	want := [][]int{{1}, {2, 3, 4, 5}, {6, 7, 8, 9}, {10}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", got, want)
	}
}

// With a linger, a batch waits for items that arrive soon after its
// first; without one, a lone item runs at once.
func TestLinger(t *testing.T) {
	t.Parallel()
	t.Run("gathers late items", func(t *testing.T) {
		t.Parallel()
		r := &recorder{ran: make(chan struct{}, 10)}
		const linger = 300 * time.Millisecond
		b := batch.New(batch.Options{Workers: 1, MaxBatch: 10, Linger: linger}, r.run)
		defer b.Close()
		start := time.Now()
		submit(t, b, 1)
		time.Sleep(linger / 10)
		submit(t, b, 2)
		<-r.ran
		if waited := time.Since(start); waited < linger {
			t.Errorf("batch ran after %v, want it to linger %v", waited, linger)
		}
		if got := r.got(); !slices.EqualFunc(got, [][]int{{1, 2}}, slices.Equal) {
			t.Errorf("batches = %v, want [[1 2]]: the second item rides with the first", got)
		}
	})
	t.Run("a full batch does not wait", func(t *testing.T) {
		t.Parallel()
		r := &recorder{ran: make(chan struct{}, 10)}
		b := batch.New(batch.Options{Workers: 1, MaxBatch: 3, Linger: time.Hour}, r.run)
		defer b.Close()
		submit(t, b, 1, 2, 3)
		select {
		case <-r.ran:
		case <-time.After(10 * time.Second):
			t.Fatal("a full batch waited for its linger")
		}
	})
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		r := &recorder{ran: make(chan struct{}, 10)}
		b := batch.New(batch.Options{Workers: 1, MaxBatch: 10}, r.run)
		defer b.Close()
		submit(t, b, 1)
		select {
		case <-r.ran:
		case <-time.After(10 * time.Second):
			t.Fatal("a lone item without linger was not run")
		}
		if got := r.got(); !slices.EqualFunc(got, [][]int{{1}}, slices.Equal) {
			t.Errorf("batches = %v, want [[1]]", got)
		}
	})
}

// Close runs every item submitted before it, then returns; later items are
// refused.
func TestCloseRunsWhatWasQueued(t *testing.T) {
	t.Parallel()
	r := &recorder{hold: make(chan struct{})}
	b := batch.New(batch.Options{Workers: 2, MaxBatch: 8, Queue: 100, Linger: time.Hour}, r.run)
	var want []int
	for i := range 100 {
		want = append(want, i)
	}
	submit(t, b, want...)
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while batches were still waiting to run")
	case <-time.After(50 * time.Millisecond):
	}
	close(r.hold)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the batches could run")
	}
	var ran []int
	for _, bt := range r.got() {
		if len(bt) > 8 {
			t.Errorf("a batch of %d items, want at most 8", len(bt))
		}
		ran = append(ran, bt...)
	}
	slices.Sort(ran)
	if !slices.Equal(ran, want) {
		t.Errorf("Close ran items %v, want each of 0..99 once", ran)
	}
	if err := b.Submit(context.Background(), 100); !errors.Is(err, batch.ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
	b.Close() // a second Close returns at once
}

// Submit into a full queue gives up when its context ends; the item is not
// run.
func TestSubmitGivesUpOnAFullQueue(t *testing.T) {
	t.Parallel()
	r := &recorder{hold: make(chan struct{})}
	b := batch.New(batch.Options{Workers: 1, MaxBatch: 1, Queue: 1}, r.run)
	// The worker takes 1 and waits on hold; 2 then fills the queue (its
	// Submit blocks until the worker has taken 1).
	submit(t, b, 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.Submit(ctx, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit into a full queue = %v, want the context's deadline", err)
	}
	close(r.hold)
	b.Close()
	if got, want := r.got(), [][]int{{1}, {2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches = %v, want %v: the refused item must not run", got, want)
	}
}

// Submits racing Close: every item Submit accepted runs exactly once, and
// every other one was refused with ErrClosed.
func TestSubmitRacingClose(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ran := map[int]int{}
	b := batch.New(batch.Options{Workers: 3, MaxBatch: 16, Linger: 100 * time.Microsecond}, func(items []int) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			ran[it]++
		}
	})
	const submitters, each = 8, 500
	accepted := make([][]int, submitters)
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				item := s*each + i
				err := b.Submit(context.Background(), item)
				switch {
				case err == nil:
					accepted[s] = append(accepted[s], item)
				case errors.Is(err, batch.ErrClosed):
					return
				default:
					t.Errorf("Submit(%d) = %v, want nil or ErrClosed", item, err)
					return
				}
			}
		}()
	}
	time.Sleep(time.Millisecond)
	b.Close()
	wg.Wait()
	total := 0
	for _, items := range accepted {
		for _, it := range items {
			total++
			if ran[it] != 1 {
				t.Errorf("accepted item %d ran %d times, want once", it, ran[it])
			}
		}
	}
	if len(ran) != total {
		t.Errorf("%d items ran, want the %d accepted", len(ran), total)
	}
}
