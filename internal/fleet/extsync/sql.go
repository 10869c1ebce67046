package extsync

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// SQL source limits.
const (
	MaxRows = 10000
	// DefaultStatementTimeout is the database-side limit on the query.
	DefaultStatementTimeout = 10 * time.Second
)

// SQLOptions tune a SQL run.
type SQLOptions struct {
	// StatementTimeout is enforced by the database (statement_timeout, max_statement_time or
	// max_execution_time) and, with a margin, by the context.
	StatementTimeout time.Duration
	// MaxRows caps the rows read; more fails the run.
	MaxRows int
	// Dial opens every connection to the database (nil: a plain dialer). The operator passes its SSRF guard's
	// DialContext, so a DSN naming an in-cluster, link-local or loopback address, or a Unix socket, is refused
	// at the address actually dialled — whatever name the DSN used.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

func (o SQLOptions) withDefaults() SQLOptions {
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.MaxRows <= 0 {
		o.MaxRows = MaxRows
	}
	return o
}

// QuerySQL runs query on the database dsn names. It does not trust the text check: the query runs as the only
// statement of a read-only transaction, over the extended (prepared) protocol that accepts one statement, under
// a database-side timeout, and the transaction is always rolled back.
func QuerySQL(ctx context.Context, driver fleetv1alpha1.SQLDriver, dsn, query string, o SQLOptions) ([]Record, error) {
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.StatementTimeout+5*time.Second)
	defer cancel()
	switch driver {
	case fleetv1alpha1.SQLDriverPostgres:
		return queryPostgres(ctx, dsn, query, o)
	case fleetv1alpha1.SQLDriverMySQL:
		return queryMySQL(ctx, dsn, query, o)
	}
	return nil, fmt.Errorf("unknown SQL driver %q", driver)
}

func queryPostgres(ctx context.Context, dsn, query string, o SQLOptions) ([]Record, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("dsn is not a valid PostgreSQL connection string") // the parse error may echo the password
	}
	// The DSN may ask for the simple protocol, which runs several ;-separated statements: override it.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	cfg.RuntimeParams["application_name"] = "quartet-operator-external-attribute-sync"
	if o.Dial != nil {
		cfg.DialFunc = o.Dial // also used for every fallback host of a multi-host DSN
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", sanitize(err, dsn))
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("starting a read-only transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", o.StatementTimeout.Milliseconds())); err != nil {
		return nil, fmt.Errorf("setting statement_timeout: %w", err)
	}
	rows, err := tx.Query(ctx, query, pgx.QueryExecModeDescribeExec)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	names := make([]string, len(rows.FieldDescriptions()))
	for i, f := range rows.FieldDescriptions() {
		names[i] = f.Name
	}
	var out []Record
	for rows.Next() {
		if len(out) == o.MaxRows {
			return nil, fmt.Errorf("query returned more than %d rows", o.MaxRows)
		}
		vals, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("reading a row: %w", err)
		}
		rec := make(Record, len(names))
		for i, n := range names {
			rec[n] = vals[i]
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	return out, nil
}

func queryMySQL(ctx context.Context, dsn, query string, o SQLOptions) ([]Record, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("dsn is not a valid MySQL data source name")
	}
	// Whatever the DSN says: one statement per call, no client-side interpolation, no LOAD DATA LOCAL.
	cfg.MultiStatements = false
	cfg.InterpolateParams = false
	cfg.AllowAllFiles = false
	if o.Dial != nil {
		cfg.DialFunc = o.Dial
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("dsn: %w", err)
	}
	db := sql.OpenDB(connector)
	defer func() { _ = db.Close() }()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to MySQL: %w", sanitize(err, dsn))
	}
	defer func() { _ = conn.Close() }()
	var version string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	// MariaDB limits any statement with max_statement_time (seconds); MySQL limits SELECTs with
	// max_execution_time (milliseconds).
	timeoutStmt := fmt.Sprintf("SET SESSION max_execution_time = %d", o.StatementTimeout.Milliseconds())
	if strings.Contains(strings.ToLower(version), "mariadb") {
		timeoutStmt = fmt.Sprintf("SET SESSION max_statement_time = %.3f", o.StatementTimeout.Seconds())
	}
	if _, err := conn.ExecContext(ctx, timeoutStmt); err != nil {
		return nil, fmt.Errorf("setting the statement timeout: %w", err)
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("starting a read-only transaction: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// A prepared statement is parsed by the server as exactly one statement.
	stmt, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	defer func() { _ = stmt.Close() }()
	rows, err := stmt.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	defer func() { _ = rows.Close() }()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []Record
	for rows.Next() {
		if len(out) == o.MaxRows {
			return nil, fmt.Errorf("query returned more than %d rows", o.MaxRows)
		}
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("reading a row: %w", err)
		}
		rec := make(Record, len(names))
		for i, n := range names {
			rec[n] = vals[i]
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	return out, nil
}

// sanitize removes the DSN (and so any password in it) from a connection error.
func sanitize(err error, dsn string) error {
	msg := err.Error()
	if dsn != "" && strings.Contains(msg, dsn) {
		msg = strings.ReplaceAll(msg, dsn, "<dsn>")
	}
	return errors.New(msg)
}
