package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresBin is where Debian's postgresql-15 package puts initdb, pg_ctl and postgres.
const PostgresBin = "/usr/lib/postgresql/15/bin"

// DatabaseName is the database the api's tables live in, in the embedded cluster.
const DatabaseName = "cocoonbox"

// Role is the superuser initdb makes in the embedded cluster. Only the
// socket's directory (0700, the cluster's user) guards it: local trust.
const Role = "cocoonbox"

// Cluster is an embedded PostgreSQL 15 cluster under Dir, made from Debian's
// binaries: Dir/data (initdb's directory), Dir/run (the unix socket; no TCP),
// Dir/postgres.log. Its files belong to the system user User when the api
// runs as root, since PostgreSQL refuses to run as root; otherwise to the
// api's own user.
type Cluster struct {
	Dir  string
	User string
	// Fast trades durability for speed (initdb --no-sync, fsync off): test clusters only.
	Fast bool
	Log  *slog.Logger

	cred *syscall.Credential
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }
func (c *Cluster) runDir() string  { return filepath.Join(c.Dir, "run") }

// URL is the connection URL of the cluster's database over its unix socket.
func (c *Cluster) URL() string {
	return "postgres://" + Role + "@/" + DatabaseName + "?host=" + url.QueryEscape(c.runDir())
}

// Start makes the cluster on first use (initdb, then the database), starts
// it with pg_ctl and waits until it accepts connections. A cluster still
// running from an api that died is taken over: the caller holds the state
// directory's lock (see Lock), so no other api owns it.
func (c *Cluster) Start(ctx context.Context) error {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if err := c.prepare(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("embedded database: %w", err)
	}
	if err := c.writeSettings(); err != nil {
		return err
	}
	if c.run(ctx, "pg_ctl", "-D", c.dataDir(), "status") == nil {
		c.Log.Warn("embedded database was still running (an api stopped without stopping it); taking it over", "dir", c.Dir)
	} else {
		start := time.Now()
		if err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-l", filepath.Join(c.Dir, "postgres.log"), "-w", "-t", "60", "-s", "start"); err != nil {
			return fmt.Errorf("embedded database: pg_ctl start: %w (see %s)", err, filepath.Join(c.Dir, "postgres.log"))
		}
		c.Log.Info("embedded database started", "dir", c.Dir, "took", time.Since(start).Round(time.Millisecond))
	}
	return c.ensureDatabase(ctx)
}

// Stop stops the cluster (pg_ctl stop -m fast: open sessions are ended) and
// waits until it is down. It works on a Cluster that did not start it too
// (testcluster stop).
func (c *Cluster) Stop(ctx context.Context) error {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if _, _, err := c.credential(); err != nil {
		return err
	}
	if err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "fast", "-w", "-t", "60", "-s", "stop"); err != nil {
		return fmt.Errorf("embedded database: pg_ctl stop: %w", err)
	}
	c.Log.Info("embedded database stopped", "dir", c.Dir)
	return nil
}

// prepare resolves the cluster's user and makes Dir and its run directory
// theirs, checking first that they can reach Dir at all.
func (c *Cluster) prepare() error {
	if _, err := os.Stat(filepath.Join(PostgresBin, "pg_ctl")); err != nil {
		return fmt.Errorf("embedded database: PostgreSQL 15 is not installed (%s/pg_ctl missing; apt-get install postgresql-15, or `make setup`)", PostgresBin)
	}
	if sock := filepath.Join(c.runDir(), ".s.PGSQL.5432"); len(sock) > 107 {
		return fmt.Errorf("embedded database: the socket path %s is %d bytes, over the unix limit of 107: choose a shorter state_dir", sock, len(sock))
	}
	uid, gid, err := c.credential()
	if err != nil {
		return err
	}
	for _, d := range []string{c.Dir, c.runDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("embedded database: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("embedded database: %w", err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return fmt.Errorf("embedded database: %w", err)
		}
	}
	return searchable(filepath.Dir(c.Dir), uint32(uid), uint32(gid), c.User)
}

// credential resolves who runs PostgreSQL's programs: User when this
// process is root (PostgreSQL refuses root), else this process's user.
func (c *Cluster) credential() (uid, gid int, err error) {
	uid, gid = os.Getuid(), os.Getgid()
	if uid != 0 {
		return uid, gid, nil
	}
	u, err := user.Lookup(c.User)
	if err != nil {
		return 0, 0, fmt.Errorf("embedded database: the api runs as root and PostgreSQL refuses root, so it runs as database.system_user %q: %w", c.User, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if uid == 0 {
		return 0, 0, fmt.Errorf("embedded database: database.system_user %q is root; PostgreSQL refuses to run as root", c.User)
	}
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	return uid, gid, nil
}

// searchable checks that uid can enter every directory from / down to dir,
// so initdb's failure is told as the cause, not as "permission denied".
func searchable(dir string, uid, gid uint32, name string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("embedded database: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		m := fi.Mode().Perm()
		ok := m&0o001 != 0 || (st.Uid == uid && m&0o100 != 0) || (st.Gid == gid && m&0o010 != 0) || uid == 0
		if !ok {
			return fmt.Errorf("embedded database: the cluster's user %s cannot enter %s (mode %04o, owner uid %d): make it searchable (chmod o+x) or choose another state_dir", name, d, m, st.Uid)
		}
		if d == "/" {
			return nil
		}
	}
}

func (c *Cluster) initdb(ctx context.Context) error {
	start := time.Now()
	args := []string{"-D", c.dataDir(), "-U", Role, "--auth=trust", "--encoding=UTF8", "--locale=C"}
	if c.Fast {
		args = append(args, "--no-sync")
	}
	if err := c.run(ctx, "initdb", args...); err != nil {
		// A half-made data directory would make every later start fail: remove it.
		os.RemoveAll(c.dataDir())
		return fmt.Errorf("embedded database: initdb: %w", err)
	}
	c.Log.Info("embedded database created", "dir", c.dataDir(), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// writeSettings rewrites the settings the api owns (cocoonbox.conf, included
// from postgresql.conf) at every start, so a changed Dir or mode is taken up.
func (c *Cluster) writeSettings() error {
	conf := filepath.Join(c.dataDir(), "postgresql.conf")
	text, err := os.ReadFile(conf)
	if err != nil {
		return fmt.Errorf("embedded database: %w", err)
	}
	const include = "include_if_exists = 'cocoonbox.conf'\n"
	if !strings.Contains(string(text), include) {
		if err := c.writeFile(conf, append(text, "\n# cocoonbox-api's settings, rewritten at each start\n"+include...)); err != nil {
			return err
		}
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	settings := "listen_addresses = ''\n" +
		"unix_socket_directories = " + quote(c.runDir()) + "\n" +
		"unix_socket_permissions = 0700\n" +
		"max_connections = 200\n"
	if c.Fast {
		settings += "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
	}
	return c.writeFile(filepath.Join(c.dataDir(), "cocoonbox.conf"), []byte(settings))
}

// writeFile writes a file of the data directory with the cluster user's ownership.
func (c *Cluster) writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("embedded database: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("embedded database: %w", err)
		}
	}
	return nil
}

func (c *Cluster) ensureDatabase(ctx context.Context) error {
	u := "postgres://" + Role + "@/postgres?host=" + url.QueryEscape(c.runDir())
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("embedded database: connect: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", DatabaseName).Scan(&exists); err != nil {
		return fmt.Errorf("embedded database: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+DatabaseName); err != nil {
			return fmt.Errorf("embedded database: create database: %w", err)
		}
	}
	return nil
}

// run runs one of PostgreSQL's programs as the cluster's user; its error carries the program's output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(PostgresBin, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = []string{"PATH=" + PostgresBin + ":/usr/bin:/bin", "LC_ALL=C"}
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}
