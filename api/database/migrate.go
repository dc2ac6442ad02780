package database

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Schema is one package's migrations: goose SQL files (NNNN_name.sql at the
// root of FS) and the package's own migration table, e.g. users_schema_migrations.
type Schema struct {
	Table string
	FS    fs.FS
}

// NewSchema is the schema of the migrations in dir of fsys (a package's
// embedded migrations/), kept in table. It panics on a bad dir: a build mistake.
func NewSchema(table string, fsys fs.FS, dir string) Schema {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("schema %s: %v", table, err))
	}
	return Schema{Table: table, FS: sub}
}

// Migrate brings every schema up to date, in the order given (a schema's
// tables may refer to those of the schemas before it). A PostgreSQL advisory
// lock makes apis starting at once on one server migrate one after another.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schemas ...Schema) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	for _, s := range schemas {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return fmt.Errorf("migrate %s: %w", s.Table, err)
		}
		p, err := goose.NewProvider(goose.DialectPostgres, db, s.FS,
			goose.WithTableName(s.Table), goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
		if err != nil {
			return fmt.Errorf("migrate %s: %w", s.Table, err)
		}
		if _, err := p.Up(ctx); err != nil {
			return fmt.Errorf("migrate %s: %w", s.Table, err)
		}
	}
	return nil
}
