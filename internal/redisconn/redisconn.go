// Package redisconn builds the Redis client both binaries use, from a URL
// and, optionally, a list of Sentinels or the seed nodes of a Redis
// Cluster: the one place where a client is made, so the origin and the edge
// reach Redis the same way, both follow a Sentinel failover, and both find
// each sale's keys on the cluster node that holds its hash slot.
package redisconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Options says how to reach the Redis that holds flashgate's keys.
type Options struct {
	// URL is a redis:// or rediss:// URL. Without Sentinels it names the
	// server; with them its host is ignored and only its username,
	// password, db number, TLS and query options (pool_size, timeouts)
	// apply, to the data nodes.
	URL string
	// Sentinels are the host:port addresses of Redis Sentinels; empty means
	// URL names the one server. Any one that answers is enough to start;
	// the client learns the others from it.
	Sentinels []string
	// MasterName is the name the Sentinels monitor the primary under;
	// required with Sentinels.
	MasterName string
	// SentinelPassword is the Sentinels' own requirepass; "" = none.
	SentinelPassword string
	// Cluster are host:port addresses of Redis Cluster nodes to learn the
	// cluster from; empty means no cluster. With them, as with Sentinels,
	// URL gives only the credentials, TLS and options (its db must be 0).
	// Every script's keys share one sale's hash tag, so each runs on the
	// node that holds the sale.
	Cluster []string
	// PoolSize is the connection pool's size when the URL sets no
	// pool_size; 0 leaves go-redis's default (10 per CPU).
	PoolSize int
}

// Validate reports the first thing wrong with o, never printing a password.
func (o Options) Validate() error {
	ropts, err := ParseURL(o.URL)
	if err != nil {
		return err
	}
	if len(o.Cluster) > 0 {
		switch {
		case len(o.Sentinels) > 0:
			return errors.New("Sentinels and a Redis Cluster exclude each other: name one")
		case ropts.Network == "unix":
			return errors.New("with a Redis Cluster the Redis URL must be redis:// or rediss://, not a unix socket")
		case ropts.DB != 0:
			return errors.New("a Redis Cluster has only db 0: drop the db number from the Redis URL")
		}
		for _, addr := range o.Cluster {
			if err := checkAddr("cluster node", addr); err != nil {
				return err
			}
		}
		return nil
	}
	if len(o.Sentinels) == 0 {
		return nil
	}
	if ropts.Network == "unix" {
		return errors.New("with Sentinels the Redis URL must be redis:// or rediss://, not a unix socket")
	}
	if o.MasterName == "" {
		return errors.New("with Sentinels a master name is required")
	}
	for _, addr := range o.Sentinels {
		if err := checkAddr("sentinel", addr); err != nil {
			return err
		}
	}
	return nil
}

// ParseSentinels splits a comma-separated list of Sentinel addresses,
// dropping blanks, and checks each is host:port. "" gives none.
func ParseSentinels(list string) ([]string, error) { return parseAddrs("sentinel", list) }

// ParseCluster splits a comma-separated list of Redis Cluster node
// addresses as ParseSentinels does.
func ParseCluster(list string) ([]string, error) { return parseAddrs("cluster node", list) }

func parseAddrs(what, list string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(list, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		if err := checkAddr(what, part); err != nil {
			return nil, err
		}
		out = append(out, part)
	}
	return out, nil
}

func checkAddr(what, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf("%s address %q is not host:port", what, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%s address %q: port must be 1-65535", what, addr)
	}
	return nil
}

// New returns a client for o: a plain client when there are no Sentinels
// and no cluster; go-redis's failover client with Sentinels, which asks
// them for the primary, drops its connections to a demoted one when a
// Sentinel announces +switch-master, and dials the new one; its cluster
// client with cluster nodes, which sends each command (and each pipelined
// script) to the node holding its keys' slot and follows MOVED and ASK.
// Every call obeys its context's deadline (ContextTimeoutEnabled).
//
// Scripts run through redis.Script (EVALSHA, then EVAL on NOSCRIPT) cope
// with a promoted replica's empty script cache; hand-rolled EVALSHA does
// not.
func New(o Options) (redis.UniversalClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ropts, _ := ParseURL(o.URL) // checked by Validate
	ropts.ContextTimeoutEnabled = true
	if ropts.PoolSize == 0 {
		ropts.PoolSize = o.PoolSize
	}
	if len(o.Cluster) == 0 && len(o.Sentinels) == 0 {
		return redis.NewClient(ropts), nil
	}
	// Sentinels or a cluster: the data nodes take the URL's credentials,
	// TLS, timeouts and pool (per node), and go-redis picks the client.
	u := &redis.UniversalOptions{
		ClientName: ropts.ClientName,
		Protocol:   ropts.Protocol,
		Username:   ropts.Username,
		Password:   ropts.Password,
		DB:         ropts.DB,
		TLSConfig:  ropts.TLSConfig,

		MaxRetries:            ropts.MaxRetries,
		MinRetryBackoff:       ropts.MinRetryBackoff,
		MaxRetryBackoff:       ropts.MaxRetryBackoff,
		DialTimeout:           ropts.DialTimeout,
		ReadTimeout:           ropts.ReadTimeout,
		WriteTimeout:          ropts.WriteTimeout,
		ContextTimeoutEnabled: ropts.ContextTimeoutEnabled,

		PoolFIFO:                ropts.PoolFIFO,
		PoolSize:                ropts.PoolSize,
		PoolTimeout:             ropts.PoolTimeout,
		MinIdleConns:            ropts.MinIdleConns,
		MaxIdleConns:            ropts.MaxIdleConns,
		MaxActiveConns:          ropts.MaxActiveConns,
		MaxConcurrentDials:      ropts.MaxConcurrentDials,
		PipelinePoolSize:        ropts.PipelinePoolSize,
		PipelineReadBufferSize:  ropts.PipelineReadBufferSize,
		PipelineWriteBufferSize: ropts.PipelineWriteBufferSize,
		ConnMaxIdleTime:         ropts.ConnMaxIdleTime,
		ConnMaxLifetime:         ropts.ConnMaxLifetime,
		ConnMaxLifetimeJitter:   ropts.ConnMaxLifetimeJitter,
	}
	if len(o.Cluster) > 0 {
		u.Addrs, u.IsClusterMode = o.Cluster, true
	} else {
		u.Addrs, u.MasterName, u.SentinelPassword = o.Sentinels, o.MasterName, o.SentinelPassword
	}
	return redis.NewUniversalClient(u), nil
}

// ParseURL is redis.ParseURL with errors that never show the URL's
// password: they name the URL redacted, and a URL that does not parse at
// all gets no detail (url.Parse's own, such as `invalid port ":pa" after
// host`, may quote a piece of a password holding a '#', '?' or '/').
func ParseURL(raw string) (*redis.Options, error) {
	if _, err := url.Parse(raw); err != nil {
		return nil, fmt.Errorf("redis url %s: not a URL (a password's @ : / ? # and %% must be percent-encoded)", Redact(raw))
	}
	ropts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: %w", Redact(raw), err)
	}
	return ropts, nil
}

// Redact returns raw with any password replaced by "xxxxx", for errors and
// logs; of a URL too broken to parse, everything up to its last "@" goes.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(unparseable url)"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "xxxxx" + rest[at:]
	}
	return scheme + "://" + rest
}

// Settings are a binary's Redis settings as its configuration names them:
// the URL, and the Sentinels (a comma-separated host:port list, empty for
// none) with the master's name and the Sentinels' own password.
type Settings struct {
	URL              string
	Sentinels        string
	MasterName       string
	SentinelPassword string
	Cluster          string // comma-separated host:port of Redis Cluster nodes; empty for none
}

// FromSettings checks a binary's Redis settings and returns the Options to
// connect with, pool of poolSize unless the URL sets pool_size. Errors name
// the environment variable at fault.
func FromSettings(s Settings, poolSize int) (Options, error) {
	sentinels, err := ParseSentinels(s.Sentinels)
	if err != nil {
		return Options{}, fmt.Errorf("config: FLASHGATE_REDIS_SENTINELS: %w", err)
	}
	cluster, err := ParseCluster(s.Cluster)
	if err != nil {
		return Options{}, fmt.Errorf("config: FLASHGATE_REDIS_CLUSTER: %w", err)
	}
	o := Options{URL: s.URL, Sentinels: sentinels, MasterName: s.MasterName,
		SentinelPassword: s.SentinelPassword, Cluster: cluster, PoolSize: poolSize}
	if err := o.Validate(); err != nil {
		return Options{}, fmt.Errorf("config: %w", err)
	}
	return o, nil
}
