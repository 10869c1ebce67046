package extsync

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
	"github.com/quartet-dev/quartet-operator/internal/testenv/services"
)

// The databases of this machine (trust auth / root without password). Override with QUARTET_TEST_POSTGRES_DSN
// and QUARTET_TEST_MYSQL_DSN.
var (
	postgresDSN = envOr("QUARTET_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	mysqlDSN    = envOr("QUARTET_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// sqlAdmin is a writable connection for setting up and checking the test table.
type sqlAdmin interface {
	exec(t *testing.T, q string)
	count(t *testing.T, table string) int
}

type pgAdmin struct{ c *pgx.Conn }

func (a pgAdmin) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := a.c.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (a pgAdmin) count(t *testing.T, table string) int {
	var n int
	if err := a.c.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

type myAdmin struct{ db *sql.DB }

func (a myAdmin) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := a.db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (a myAdmin) count(t *testing.T, table string) int {
	var n int
	if err := a.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

type attack struct {
	name, query string
	// slow marks a query that must be stopped by the statement timeout.
	slow bool
}

// attacks are queries a text check could be fooled into passing (or that an attacker sends straight to the
// runner); each must fail without changing the table.
func attacks(table string, mysql bool) []attack {
	sleep := "SELECT pg_sleep(60)"
	if mysql {
		sleep = "SELECT SLEEP(60) AS s FROM " + table
	}
	return []attack{
		{"select then delete", fmt.Sprintf("SELECT id FROM %s; DELETE FROM %s", table, table), false},
		{"comment then delete", fmt.Sprintf("/* */ DELETE FROM %s", table), false},
		{"data-modifying CTE", fmt.Sprintf("WITH x AS (DELETE FROM %s RETURNING *) SELECT * FROM x", table), false},
		{"commit then insert", fmt.Sprintf("COMMIT; INSERT INTO %s (id, rack) VALUES ('evil', 'x')", table), false},
		{"update", fmt.Sprintf("UPDATE %s SET rack = 'evil'", table), false},
		{"create table", fmt.Sprintf("CREATE TABLE %s_evil (id int)", table), false},
		{"sleep", sleep, true},
	}
}

func runAttacks(t *testing.T, admin sqlAdmin, driver fleetv1alpha1.SQLDriver, dsns map[string]string, table string) {
	for dsnName, dsn := range dsns {
		for _, a := range attacks(table, driver == fleetv1alpha1.SQLDriverMySQL) {
			t.Run(dsnName+"/"+a.name, func(t *testing.T) {
				g := NewWithT(t)
				if !a.slow {
					// Admission refuses it too; the run below shows the database refuses it without that check.
					g.Expect(CheckSelectQuery(driver, a.query)).NotTo(Succeed())
				}
				start := time.Now()
				recs, err := QuerySQL(context.Background(), driver, dsn, a.query, SQLOptions{StatementTimeout: time.Second})
				g.Expect(err).To(HaveOccurred(), "got %d records", len(recs))
				g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "must stop at the statement timeout")
				t.Logf("%s → %v", a.query, err)
				g.Expect(admin.count(t, table)).To(Equal(3))
				changed := "SELECT count(*) FROM " + table + " WHERE rack = 'evil' OR id = 'evil'"
				created := "SELECT count(*) FROM information_schema.tables WHERE table_name = '" + table + "_evil'"
				for _, q := range []string{changed, created} {
					var n int
					switch ad := admin.(type) {
					case pgAdmin:
						g.Expect(ad.c.QueryRow(context.Background(), q).Scan(&n)).To(Succeed())
					case myAdmin:
						g.Expect(ad.db.QueryRow(q).Scan(&n)).To(Succeed())
					}
					g.Expect(n).To(BeZero(), q)
				}
			})
		}
	}
}

func TestPostgresSourceIsReadOnly(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, postgresDSN)
	if err != nil {
		services.Missing(t, "PostgreSQL", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	admin := pgAdmin{conn}
	table := fmt.Sprintf("eas_inventory_%d", time.Now().UnixNano())
	admin.exec(t, "CREATE TABLE "+table+" (id text PRIMARY KEY, rack text, weight numeric, seen timestamptz)")
	t.Cleanup(func() { _, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+table+", "+table+"_evil") })
	admin.exec(t, "INSERT INTO "+table+" VALUES ('c1','r1',1.5,'2026-01-02T03:04:05Z'), ('c2','r2',NULL,NULL), ('c3','r3',2,NULL)")

	g := NewWithT(t)
	recs, err := QuerySQL(ctx, fleetv1alpha1.SQLDriverPostgres, postgresDSN, "SELECT id, rack, weight, seen FROM "+table+" ORDER BY id", SQLOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	res := Map(recs, fleetv1alpha1.AttributeMapping{CollectorIDField: "id", AttributeFields: map[string]string{"rack": "rack", "weight": "weight", "seen": "seen"}},
		func(string) bool { return true })
	g.Expect(res.Attributes).To(Equal(map[string]map[string]string{
		"c1": {"rack": "r1", "weight": "1.5", "seen": "2026-01-02T03:04:05Z"},
		"c2": {"rack": "r2"},
		"c3": {"rack": "r3", "weight": "2"},
	}))

	// The row cap fails the run rather than applying a partial result.
	_, err = QuerySQL(ctx, fleetv1alpha1.SQLDriverPostgres, postgresDSN, "SELECT id FROM "+table, SQLOptions{MaxRows: 2})
	g.Expect(err).To(MatchError(ContainSubstring("more than 2 rows")))

	runAttacks(t, admin, fleetv1alpha1.SQLDriverPostgres, map[string]string{
		"default": postgresDSN,
		// A DSN asking for the simple protocol (which runs ;-separated statements) is overridden.
		"simple-protocol-dsn": postgresDSN + "&default_query_exec_mode=simple_protocol",
		// A DSN turning default read-only off changes nothing: the transaction is explicitly READ ONLY.
		"read-write-dsn": postgresDSN + "&default_transaction_read_only=off",
	}, table)
}

func TestMySQLSourceIsReadOnly(t *testing.T) {
	db, err := sql.Open("mysql", mysqlDSN)
	if err == nil {
		err = db.Ping()
	}
	if err != nil {
		services.Missing(t, "MySQL/MariaDB", err)
	}
	defer func() { _ = db.Close() }()
	admin := myAdmin{db}
	table := fmt.Sprintf("eas_inventory_%d", time.Now().UnixNano())
	admin.exec(t, "CREATE TABLE "+table+" (id varchar(64) PRIMARY KEY, rack varchar(64), weight decimal(5,2))")
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table + ", " + table + "_evil") })
	admin.exec(t, "INSERT INTO "+table+" VALUES ('c1','r1',1.5), ('c2','r2',NULL), ('c3','r3',2)")

	g := NewWithT(t)
	recs, err := QuerySQL(context.Background(), fleetv1alpha1.SQLDriverMySQL, mysqlDSN, "SELECT id, rack, weight FROM "+table+" ORDER BY id", SQLOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	res := Map(recs, fleetv1alpha1.AttributeMapping{CollectorIDField: "id", AttributeFields: map[string]string{"rack": "rack", "weight": "weight"}},
		func(string) bool { return true })
	g.Expect(res.Attributes).To(Equal(map[string]map[string]string{
		"c1": {"rack": "r1", "weight": "1.50"},
		"c2": {"rack": "r2"},
		"c3": {"rack": "r3", "weight": "2.00"},
	}))
	_, err = QuerySQL(context.Background(), fleetv1alpha1.SQLDriverMySQL, mysqlDSN, "SELECT id FROM "+table, SQLOptions{MaxRows: 2})
	g.Expect(err).To(MatchError(ContainSubstring("more than 2 rows")))

	runAttacks(t, admin, fleetv1alpha1.SQLDriverMySQL, map[string]string{
		"default": mysqlDSN,
		// multiStatements=true in the DSN is overridden.
		"multi-statement-dsn": mysqlDSN + "?multiStatements=true",
	}, table)
}

// TestSQLDialsThroughTheGuard: with the guard's dialer, a database on a blocked address (loopback here) or
// behind a Unix socket is refused before any byte is sent, for both drivers; with the address allowed, the
// same DSN works.
func TestSQLDialsThroughTheGuard(t *testing.T) {
	blocked := SQLOptions{Dial: netguard.New().DialContext}
	for _, tc := range []struct {
		name   string
		driver fleetv1alpha1.SQLDriver
		dsn    string
		want   string
	}{
		{"postgres on loopback", fleetv1alpha1.SQLDriverPostgres, postgresDSN, "127.0.0.1 is loopback"},
		{"postgres socket", fleetv1alpha1.SQLDriverPostgres, "host=/var/run/postgresql user=postgres dbname=test", `network "unix"`},
		{"mysql on loopback", fleetv1alpha1.SQLDriverMySQL, mysqlDSN, "127.0.0.1 is loopback"},
		{"mysql socket", fleetv1alpha1.SQLDriverMySQL, "root@unix(/run/mysqld/mysqld.sock)/test", `network "unix"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := QuerySQL(context.Background(), tc.driver, tc.dsn, "SELECT 1 AS one", blocked)
			g.Expect(err).To(MatchError(And(ContainSubstring("blocked by the SSRF guard"), ContainSubstring(tc.want))))
		})
	}

	allowed := SQLOptions{Dial: netguard.New(netguard.AllowPrefixesForTesting(netip.MustParsePrefix("127.0.0.1/32"))).DialContext}
	for driver, dsn := range map[fleetv1alpha1.SQLDriver]string{fleetv1alpha1.SQLDriverPostgres: postgresDSN, fleetv1alpha1.SQLDriverMySQL: mysqlDSN} {
		recs, err := QuerySQL(context.Background(), driver, dsn, "SELECT 1 AS one", allowed)
		if err != nil {
			services.Missing(t, string(driver), err)
		}
		NewWithT(t).Expect(recs).To(HaveLen(1))
	}
}
