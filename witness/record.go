package witness

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idmint/idmint/internal/ctxcall"
	"github.com/idmint/idmint/sqldb"
)

// Recorder keeps named records written once: the first Record of a name
// creates it, and every later one returns what was recorded first. A
// region's identity lives in one beside its coordinator; a registry's
// claims of region indexes in another. Etcd, ZooKeeper, SQL and Dir
// implement it.
type Recorder interface {
	// Record creates the record name holding value unless it exists, and
	// returns what the record holds (value, or what was there before).
	Record(ctx context.Context, name, value string) (recorded string, err error)
	// Lookup returns the record's value; ok is false when there is none.
	Lookup(ctx context.Context, name string) (value string, ok bool, err error)
	// Forget deletes the record (retiring a region); no record is no error.
	Forget(ctx context.Context, name string) error
	// String names where the records are kept.
	String() string
}

// MaxRecordLen is the longest record value in bytes.
const MaxRecordLen = 1024

func checkRecord(name, value string) error {
	if err := ValidateSpace(name); err != nil {
		return err
	}
	if len(value) == 0 || len(value) > MaxRecordLen {
		return fmt.Errorf("witness: record %q: value of %d bytes (want 1 to %d)", name, len(value), MaxRecordLen)
	}
	return nil
}

// recordKey is where Etcd keeps a record: beside the marks ("…/marks/"
// becomes "…/records/"), escaped as a space is.
func (e *Etcd) recordKey(name string) string {
	return strings.TrimSuffix(e.prefix, "marks/") + "records/" + url.PathEscape(name)
}

// Record creates the key in one transaction if it does not exist.
func (e *Etcd) Record(ctx context.Context, name, value string) (string, error) {
	if err := checkRecord(name, value); err != nil {
		return "", err
	}
	k := e.recordKey(name)
	resp, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, value)).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return "", fmt.Errorf("witness: etcd: record %s: %w", k, err)
	}
	if resp.Succeeded {
		return value, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 { // deleted between the compare and the get: cannot be, one transaction
		return "", fmt.Errorf("witness: etcd: record %s: neither created nor found", k)
	}
	return string(kvs[0].Value), nil
}

// Lookup reads the key.
func (e *Etcd) Lookup(ctx context.Context, name string) (string, bool, error) {
	k := e.recordKey(name)
	resp, err := e.cli.Get(ctx, k)
	if err != nil {
		return "", false, fmt.Errorf("witness: etcd: read %s: %w", k, err)
	}
	if len(resp.Kvs) == 0 {
		return "", false, nil
	}
	return string(resp.Kvs[0].Value), true, nil
}

// Forget deletes the key.
func (e *Etcd) Forget(ctx context.Context, name string) error {
	k := e.recordKey(name)
	if _, err := e.cli.Delete(ctx, k); err != nil {
		return fmt.Errorf("witness: etcd: delete %s: %w", k, err)
	}
	return nil
}

// recordNode is where ZooKeeper keeps a record: beside the marks' root.
func (z *ZooKeeper) recordNode(name string) string {
	return strings.TrimSuffix(z.root, "/marks") + "/records/" + strings.ReplaceAll(url.PathEscape(name), "/", "%2F")
}

// Record creates the znode unless it exists.
func (z *ZooKeeper) Record(ctx context.Context, name, value string) (string, error) {
	if err := checkRecord(name, value); err != nil {
		return "", err
	}
	n := z.recordNode(name)
	for range 2 {
		_, err := ctxcall.Do(ctx, func() (string, error) { return z.conn.Create(n, []byte(value), 0, zk.WorldACL(zk.PermAll)) })
		switch {
		case err == nil:
			return value, nil
		case errors.Is(err, zk.ErrNodeExists):
			v, ok, err := z.Lookup(ctx, name)
			if err != nil {
				return "", err
			}
			if ok {
				return v, nil
			}
		case errors.Is(err, zk.ErrNoNode):
			p := ""
			for _, part := range strings.Split(strings.TrimPrefix(path.Dir(n), "/"), "/") {
				p = path.Join("/", p, part)
				_, err := ctxcall.Do(ctx, func() (string, error) { return z.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)) })
				if err != nil && !errors.Is(err, zk.ErrNodeExists) {
					return "", fmt.Errorf("witness: zookeeper: create %s: %w", p, err)
				}
			}
		default:
			return "", fmt.Errorf("witness: zookeeper: record %s: %w", n, err)
		}
	}
	return "", fmt.Errorf("witness: zookeeper: record %s did not settle", n)
}

// Lookup reads the znode (it is written once, so a lagging read is at
// worst "none yet").
func (z *ZooKeeper) Lookup(ctx context.Context, name string) (string, bool, error) {
	n := z.recordNode(name)
	type got struct {
		b  []byte
		ok bool
	}
	g, err := ctxcall.Do(ctx, func() (got, error) {
		b, _, err := z.conn.Get(n)
		if errors.Is(err, zk.ErrNoNode) {
			return got{}, nil
		}
		return got{b, err == nil}, err
	})
	if err != nil {
		return "", false, fmt.Errorf("witness: zookeeper: read %s: %w", n, err)
	}
	return string(g.b), g.ok, nil
}

// Forget deletes the znode.
func (z *ZooKeeper) Forget(ctx context.Context, name string) error {
	n := z.recordNode(name)
	_, err := ctxcall.Do(ctx, func() (struct{}, error) { return struct{}{}, z.conn.Delete(n, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("witness: zookeeper: delete %s: %w", n, err)
	}
	return nil
}

// Record inserts the row unless its name is taken (the primary key
// decides between two at once).
func (s *SQL) Record(ctx context.Context, name, value string) (string, error) {
	if err := checkRecord(name, value); err != nil {
		return "", err
	}
	bctx, cancel := s.db.Bound(ctx)
	_, err := s.db.ExecContext(bctx, s.db.Dialect.Rebind("INSERT INTO idmint_records (name, value) VALUES (?, ?)"), name, value)
	cancel()
	if err == nil {
		return value, nil
	}
	if !sqldb.IsDuplicate(err) {
		return "", fmt.Errorf("witness: %s: record %q: %w", s.url, name, err)
	}
	v, ok, err := s.Lookup(ctx, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("witness: %s: record %q: neither created nor found (deleted meanwhile?)", s.url, name)
	}
	return v, nil
}

// Lookup reads the row.
func (s *SQL) Lookup(ctx context.Context, name string) (string, bool, error) {
	bctx, cancel := s.db.Bound(ctx)
	defer cancel()
	var v string
	err := s.db.QueryRowContext(bctx, s.db.Dialect.Rebind("SELECT value FROM idmint_records WHERE name = ?"), name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("witness: %s: read record %q: %w", s.url, name, err)
	}
	return v, true, nil
}

// Forget deletes the row.
func (s *SQL) Forget(ctx context.Context, name string) error {
	bctx, cancel := s.db.Bound(ctx)
	defer cancel()
	if _, err := s.db.ExecContext(bctx, s.db.Dialect.Rebind("DELETE FROM idmint_records WHERE name = ?"), name); err != nil {
		return fmt.Errorf("witness: %s: delete record %q: %w", s.url, name, err)
	}
	return nil
}

// Dir keeps records as files in a directory (a node's data directory):
// one file per record, created by a hard link that fails when the name
// exists, so two processes cannot both create it.
type Dir struct{ dir string }

// NewDir returns the records kept in dir (created when missing).
func NewDir(dir string) *Dir { return &Dir{dir: dir} }

func (d *Dir) file(name string) string {
	return filepath.Join(d.dir, strings.ReplaceAll(url.PathEscape(name), "%", "_")+".record")
}

// Record writes a temporary file, syncs it and links it to its name.
func (d *Dir) Record(ctx context.Context, name, value string) (string, error) {
	if err := checkRecord(name, value); err != nil {
		return "", err
	}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return "", fmt.Errorf("witness: %w", err)
	}
	f, err := os.CreateTemp(d.dir, ".record-*")
	if err != nil {
		return "", fmt.Errorf("witness: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.WriteString(value)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("witness: write record %q in %s: %w", name, d.dir, err)
	}
	if err := os.Link(tmp, d.file(name)); err != nil {
		if errors.Is(err, os.ErrExist) {
			v, ok, err := d.Lookup(ctx, name)
			if err != nil {
				return "", err
			}
			if ok {
				return v, nil
			}
		}
		return "", fmt.Errorf("witness: record %q in %s: %w", name, d.dir, err)
	}
	if err := syncDir(d.dir); err != nil {
		return "", fmt.Errorf("witness: record %q in %s: %w", name, d.dir, err)
	}
	return value, nil
}

// Lookup reads the file.
func (d *Dir) Lookup(ctx context.Context, name string) (string, bool, error) {
	b, err := os.ReadFile(d.file(name))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("witness: read record %q: %w", name, err)
	}
	return string(b), true, nil
}

// Forget removes the file.
func (d *Dir) Forget(ctx context.Context, name string) error {
	if err := os.Remove(d.file(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("witness: delete record %q: %w", name, err)
	}
	return nil
}

// String names the directory.
func (d *Dir) String() string { return "data directory " + d.dir }
