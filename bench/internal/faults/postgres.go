package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashgate/flashgate/internal/childproc"
	"github.com/flashgate/flashgate/internal/freeport"
)

// DefaultPostgresBin is where Debian keeps initdb and postgres.
const DefaultPostgresBin = "/usr/lib/postgresql/15/bin"

// pgCluster is a Postgres cluster of the harness's own on a free port,
// trust auth for user postgres, TCP only. Postgres refuses to run as root:
// as root, it runs as the system user postgres (or flashgate-pg, the user
// deploy/local/services.sh creates), as the scripts do.
type pgCluster struct {
	port int
	data string
	proc *childproc.Proc
}

// newPgCluster runs initdb into dir/postgres; it does not start the server.
func newPgCluster(ctx context.Context, bin, dir string) (*pgCluster, error) {
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	ports, err := freeport.Ports(1)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	data := filepath.Join(dir, "postgres")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "postgres.log")
	if err := os.WriteFile(logFile, nil, 0o644); err != nil {
		return nil, err
	}
	if cred != nil {
		// The folder above must be reachable by that user, the data folder its own.
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "--auth=trust", "-U", "postgres",
		"-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// fsync off: the harness stops Postgres cleanly (a fast shutdown writes
	// everything) and the machine is shared; commits still wait for the WAL
	// write, so what Postgres acknowledged is what the checks read.
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"}
	return &pgCluster{port: port, data: data,
		proc: &childproc.Proc{Name: "postgres", Path: filepath.Join(bin, "postgres"), Args: args, Env: childEnv(), Log: logFile, Credential: cred}}, nil
}

// postgresCredential is nil when not root, else the user to run as.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "flashgate-pg"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and Postgres refuses root: create a user postgres (apt-get install postgresql does) or run as another user")
}

// url is the URL of database db.
func (c *pgCluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// start starts the server and waits until it takes queries.
func (c *pgCluster) start(ctx context.Context) error {
	if err := c.proc.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.url("postgres"))
		if err == nil {
			err = conn.Ping(cctx)
			conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if !c.proc.Running() {
			return fmt.Errorf("postgres exited:\n%s", c.proc.Tail(15))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("postgres on port %d not ready: %w", c.port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop is a fast shutdown (SIGINT): clients are cut off, what was committed
// is kept.
func (c *pgCluster) stop() { c.proc.Stop(syscall.SIGINT, 30*time.Second) }

// createDB creates database name.
func (c *pgCluster) createDB(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}
