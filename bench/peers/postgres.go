package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresSys is Debian's PostgreSQL with its defaults for durability (fsync on,
// synchronous_commit on). A lock is a row: an acquire inserts it, or takes it over when
// its holder's TTL has passed, returning a fencing token from a sequence; a release
// deletes the row only if it still carries that token.
type postgresSys struct {
	p    *proc
	port int
}

func (s *postgresSys) Procs() []*proc { return []*proc{s.p} }

const pgBin = "/usr/lib/postgresql/15/bin"

func startPostgres(ctx context.Context, dir string) (Locker, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	as := ""
	if os.Geteuid() == 0 {
		as = "postgres" // PostgreSQL refuses to run as root
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if as != "" {
		u, err := user.Lookup(as)
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(pgBin, "initdb"), "-D", data, "-U", "bench", "--auth", "trust")
	initdb.SysProcAttr = &syscall.SysProcAttr{}
	if as != "" {
		if err := runAs(initdb, as); err != nil {
			return nil, err
		}
	}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	p, err := start(dir, "postgres", as, filepath.Join(pgBin, "postgres"), "-D", data, "-p", fmt.Sprint(ports[0]), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=256MB",
		"-c", "fsync=on", "-c", "synchronous_commit=on")
	if err != nil {
		return nil, err
	}
	if err := waitPort(ctx, fmt.Sprintf("127.0.0.1:%d", ports[0]), 60*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	s := &postgresSys{p: p, port: ports[0]}
	c, err := s.conn(ctx)
	if err != nil {
		p.stop()
		return nil, err
	}
	defer c.Close(ctx)
	for _, q := range []string{
		`CREATE TABLE locks (res text PRIMARY KEY, token bigint NOT NULL, expires timestamptz NOT NULL)`,
		`CREATE SEQUENCE tokens`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			p.stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *postgresSys) conn(ctx context.Context) (*pgx.Conn, error) {
	var c *pgx.Conn
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if c, err = pgx.Connect(ctx, fmt.Sprintf("postgres://bench@127.0.0.1:%d/postgres", s.port)); err == nil {
			return c, nil
		}
	}
	return nil, err
}

func (s *postgresSys) Close()                           { s.p.stop() }
func (s *postgresSys) Setup(context.Context, int) error { return nil }

type pgClient struct{ c *pgx.Conn }

func (s *postgresSys) Client(ctx context.Context, _ int) (LockClient, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	return &pgClient{c: c}, nil
}

func (p *pgClient) Acquire(ctx context.Context, r string, ttl time.Duration) (any, bool, error) {
	var tok int64
	err := p.c.QueryRow(ctx, `INSERT INTO locks AS l (res, token, expires) VALUES ($1, nextval('tokens'), now() + $2 * interval '1 millisecond')
		ON CONFLICT (res) DO UPDATE SET token = EXCLUDED.token, expires = EXCLUDED.expires WHERE l.expires < now()
		RETURNING token`, r, ttl.Milliseconds()).Scan(&tok)
	if err == pgx.ErrNoRows {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return tok, true, nil
}

func (p *pgClient) Release(ctx context.Context, r string, tok any) error {
	_, err := p.c.Exec(ctx, `DELETE FROM locks WHERE res = $1 AND token = $2`, r, tok.(int64))
	return err
}

func (p *pgClient) Close() { p.c.Close(context.Background()) }
