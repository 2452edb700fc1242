package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/delayproxy"
)

type options struct {
	listen, to, master string
	sentinels          []string
	delay, jitter      time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	var sentinels string
	fs := flag.NewFlagSet("delayproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "", "host:port to listen on (required)")
	fs.StringVar(&o.to, "to", "", "host:port to forward to")
	fs.StringVar(&sentinels, "sentinels", "", "comma-separated Sentinel host:ports: forward to the primary they name (instead of -to)")
	fs.StringVar(&o.master, "master", "flashgate", "the primary's name at the Sentinels")
	fs.DurationVar(&o.delay, "delay", 0, "delay added each way (one-way latency)")
	fs.DurationVar(&o.jitter, "jitter", 0, "each chunk's delay is drawn from [delay, delay+jitter]")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if sentinels != "" {
		o.sentinels = strings.Split(sentinels, ",")
	}
	switch {
	case fs.NArg() > 0:
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.listen == "":
		return options{}, errors.New("-listen is required")
	case (o.to == "") == (len(o.sentinels) == 0):
		return options{}, errors.New("give one of -to and -sentinels")
	case o.delay < 0 || o.jitter < 0:
		return options{}, errors.New("-delay and -jitter must not be negative")
	}
	for _, a := range append([]string{o.listen, o.to}, o.sentinels...) {
		if _, _, err := net.SplitHostPort(a); a != "" && err != nil {
			return options{}, fmt.Errorf("%q is not host:port: %w", a, err)
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	resolve := delayproxy.To(o.to)
	if len(o.sentinels) > 0 {
		var closeSentinels func()
		resolve, closeSentinels = primaryAt(o.sentinels, o.master, stderr)
		defer closeSentinels()
	}
	p, err := delayproxy.Listen(o.listen, resolve)
	if err != nil {
		return err
	}
	each := delayproxy.Delay{Min: o.delay, Max: o.delay + o.jitter}
	p.SetDelay(each, each)
	target := o.to
	if target == "" {
		target = "the primary " + o.master + " at " + strings.Join(o.sentinels, ",")
	}
	fmt.Fprintf(stderr, "delayproxy: %s → %s, %v–%v each way\n", p.Addr(), target, each.Min, each.Max)
	<-ctx.Done()
	return p.Close()
}

// primaryAt asks the Sentinels, in turn until one answers, where the primary
// named master is; when none does, it says so on stderr (the connection is
// then refused). closeAll closes its Sentinel clients.
func primaryAt(sentinels []string, master string, stderr io.Writer) (resolve delayproxy.Resolver, closeAll func()) {
	clients := make([]*redis.SentinelClient, len(sentinels))
	for i, addr := range sentinels {
		clients[i] = redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	}
	closeAll = func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	return func(ctx context.Context) (string, error) {
		var errs []error
		for i, c := range clients {
			hp, err := c.GetMasterAddrByName(ctx, master).Result()
			if err == nil && len(hp) == 2 {
				return net.JoinHostPort(hp[0], hp[1]), nil
			}
			errs = append(errs, fmt.Errorf("sentinel %s: %v", sentinels[i], err))
		}
		err := errors.Join(errs...)
		fmt.Fprintf(stderr, "delayproxy: no primary %s to forward to: %v\n", master, err)
		return "", err
	}, closeAll
}
