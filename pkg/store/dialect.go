package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The two kinds of results database. SQLite is the embedded default: one
// file, nothing to run. PostgreSQL is the shared store a fleet of runners
// (CI jobs on short-lived machines, several clusters) writes into, so
// `history`, change points and `compare --fail-on` see every team's runs.
// Both hold the same schema, built by the same migrations; the SQL differs
// only where the two dialects do, and that is all in this file.

// dialect is what differs between the two databases.
type dialect struct {
	name   string // "sqlite" or "postgres", also the database/sql driver name
	driver string
	// serial is the type of an auto-numbered primary key column.
	serial string
	// unique reports whether err is a unique-constraint violation.
	unique func(error) bool
}

var (
	sqliteDialect = &dialect{name: "sqlite", driver: "sqlite", serial: "INTEGER PRIMARY KEY AUTOINCREMENT",
		unique: func(err error) bool {
			var se *sqlite.Error
			return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
		}}
	postgresDialect = &dialect{name: "postgres", driver: "pgx", serial: "BIGSERIAL PRIMARY KEY",
		unique: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "23505" // unique_violation
		}}
)

// IsPostgres reports whether a --db value names a PostgreSQL database (a
// postgres:// or postgresql:// URL) rather than a SQLite file.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

func dialectOf(db string) *dialect {
	if IsPostgres(db) {
		return postgresDialect
	}
	return sqliteDialect
}

// rebind turns the ? placeholders the queries are written with into
// PostgreSQL's $1, $2, …; the queries hold no ? inside a string literal.
func (d *dialect) rebind(q string) string {
	if d != postgresDialect || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// redact is a database name fit for messages and listings: a URL's
// password is replaced, a file path stays as it is.
func redact(db string) string {
	if !IsPostgres(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	return u.Redacted()
}

// openPostgres connects to a PostgreSQL results database and migrates it.
// A database that cannot be reached or refuses the credentials is a
// one-line error naming it (password redacted) and nothing is written:
// the connection is checked before any migration runs.
func openPostgres(dsn string, target int) (*DB, error) {
	name := redact(dsn)
	if _, err := pgconn.ParseConfig(dsn); err != nil {
		var pe *pgconn.ParseConfigError
		reason := err.Error()
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			reason = pe.Unwrap().Error() // its own text quotes the URL, password and all
		}
		return nil, errkind.Errorf(ErrInvalid, "--db %s: not a usable PostgreSQL URL: %s", name, reason)
	}
	sdb, err := sql.Open(postgresDialect.driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w: %w", name, ErrUnreachable, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sdb.PingContext(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("open results database %s: %w: %s", name, ErrUnreachable, pgReason(err))
	}
	// Several runners write at once; each process needs only a few.
	sdb.SetMaxOpenConns(4)
	return migrated(&DB{db: sdb, path: dsn, d: postgresDialect}, target)
}

// ErrInvalid is matched by errors about a --db value that cannot name a
// database at all (a malformed URL): input the user fixes (exit 2).
var ErrInvalid = errors.New("invalid results database")

// ErrUnreachable is wrapped when a PostgreSQL results database cannot be
// connected to: not running, wrong address, refused credentials.
var ErrUnreachable = errors.New("cannot connect")

// pgReason is the server's own words for a failed connection, on one
// line: the driver joins one error per address tried (and per TLS
// attempt), often the same text again.
func pgReason(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !slices.Contains(parts, line) {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}
