package serve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
)

// recorder is an App that notes what happened to it, in order, beside the
// listeners' drains.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) note(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) Start()                     { r.note("start") }
func (r *recorder) Stop(context.Context) error { r.note("stop"); return nil }

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, ",")
}

// TestRunDrainsInOrder: the app starts after the listeners open; when ctx
// ends, a request in flight on the public listener finishes while the admin
// listener still answers (it drains after the public one), and the app
// stops last.
func TestRunDrainsInOrder(t *testing.T) {
	app := &recorder{}
	inFlight := make(chan struct{})
	publicAddr, adminAddr := httpreadtest.FreeAddr(t), httpreadtest.FreeAddr(t)
	public := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		close(inFlight)
		time.Sleep(200 * time.Millisecond) // Run is draining this listener now
		if _, body, err := fasthttp.Get(nil, "http://"+adminAddr+"/"); err == nil && string(body) == "admin" {
			app.note("admin answers while public drains")
		}
		ctx.SetBodyString("done")
	}}
	admin := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("admin") }}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), app, 5*time.Second,
			Listener{"public", publicAddr, public}, Listener{"admin", adminAddr, admin})
	}()
	answered := make(chan string, 1)
	go func() {
		for {
			if _, body, err := fasthttp.Get(nil, "http://"+publicAddr+"/"); err == nil {
				answered <- string(body)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	<-inFlight
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := <-answered; got != "done" {
		t.Errorf("the request in flight at shutdown got %q, want its answer", got)
	}
	if got, want := app.String(), "start,admin answers while public drains,stop"; got != want {
		t.Errorf("events %s, want %s", got, want)
	}
}

// TestRunListenFailure: when a listener cannot open, the others are closed
// and the app stops without having started.
func TestRunListenFailure(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	app := &recorder{}
	free := httpreadtest.FreeAddr(t)
	err = Run(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), app, time.Second,
		Listener{"public", free, &fasthttp.Server{}}, Listener{"admin", taken.Addr().String(), &fasthttp.Server{}})
	if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Fatalf("Run = %v, want a listen error naming %s", err, taken.Addr())
	}
	if got := app.String(); got != "stop" {
		t.Errorf("events %q, want only stop", got)
	}
	ln, err := net.Listen("tcp", free)
	if err != nil {
		t.Errorf("the listener that did open was left open: %v", err)
	} else {
		ln.Close()
	}
}
