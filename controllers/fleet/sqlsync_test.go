package fleet_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv/services"
)

// TestExternalAttributeSyncFromPostgres reads a real PostgreSQL table through the controller and the Collector
// controller applies the rows (the DSN asks for the simple protocol, which the source overrides). The write
// attempts themselves are proven statement by statement against the same database in internal/fleet/extsync.
func TestExternalAttributeSyncFromPostgres(t *testing.T) {
	dsn := os.Getenv("QUARTET_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		services.Missing(t, "PostgreSQL", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	table := fmt.Sprintf("eas_ctrl_%d", time.Now().UnixNano())
	_, err = conn.Exec(ctx, "CREATE TABLE "+table+" (collector text, rack text, dc text)")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+table) })

	g := NewWithT(t)
	ns := newNamespace(t)
	id := ns + "-edge"
	_, err = conn.Exec(ctx, "INSERT INTO "+table+" VALUES ($1, 'r9', 'fra'), ('other', 'r1', 'ams')", id)
	g.Expect(err).NotTo(HaveOccurred())
	sync := runSQLSync(t, ns, id, fleetv1alpha1.SQLDriverPostgres, dsn+"&default_query_exec_mode=simple_protocol", table,
		map[string]string{"rack": "r9", "datacenter": "fra"})
	s := &fleetv1alpha1.ExternalAttributeSync{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sync), s)).To(Succeed())
	g.Expect(s.Status.LastSuccessTime).NotTo(BeNil())

	g.Expect(strings.Contains(syncCondition(g, client.ObjectKeyFromObject(sync), fleetv1alpha1.ConditionReady).Message, "1 applied")).To(BeTrue())
}

// TestExternalAttributeSyncFromMariaDB is the same path against this machine's MariaDB: the DSN asks for
// multiStatements, which the source forces off, and the Collector controller applies the rows.
func TestExternalAttributeSyncFromMariaDB(t *testing.T) {
	dsn := os.Getenv("QUARTET_TEST_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	db, err := sql.Open("mysql", dsn)
	if err == nil {
		err = db.Ping()
	}
	if err != nil {
		services.Missing(t, "MariaDB/MySQL", err)
	}
	defer func() { _ = db.Close() }()
	table := fmt.Sprintf("eas_ctrl_%d", time.Now().UnixNano())
	_, err = db.Exec("CREATE TABLE " + table + " (collector varchar(128), rack varchar(64), dc varchar(64))")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })

	g := NewWithT(t)
	ns := newNamespace(t)
	id := ns + "-edge"
	_, err = db.Exec("INSERT INTO "+table+" VALUES (?, 'r7', 'ber'), ('other', 'r1', 'ams')", id)
	g.Expect(err).NotTo(HaveOccurred())
	runSQLSync(t, ns, id, fleetv1alpha1.SQLDriverMySQL, dsn+"?multiStatements=true", table, map[string]string{"rack": "r7", "datacenter": "ber"})
}

// sqlInventorySync is an ExternalAttributeSync "inventory" of ns reading collector, rack and dc from table with
// driver, through Secret "db".
func sqlInventorySync(ns string, driver fleetv1alpha1.SQLDriver, table string) *fleetv1alpha1.ExternalAttributeSync {
	return &fleetv1alpha1.ExternalAttributeSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inventory"},
		Spec: fleetv1alpha1.ExternalAttributeSyncSpec{
			Source: fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindSQL, SecretRef: &fleetv1alpha1.SecretReference{Name: "db"},
				SQL: &fleetv1alpha1.SQLSource{Driver: driver, Query: "SELECT collector, rack, dc FROM " + table}},
			Schedule: "*/30 * * * *",
			Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`collector.id=~"` + ns + `-.*"`}},
			Mapping: fleetv1alpha1.AttributeMapping{CollectorIDField: "collector",
				AttributeFields: map[string]string{"rack": "rack", "datacenter": "dc"}, RequiredKeys: []string{"rack"}},
		}}
}

// runSQLSync registers collector id in Fleet and as Collector "edge" of ns, runs sqlInventorySync over table
// (one row for id, one for another collector) with dsn, and waits until Fleet holds want for id with the
// status counting 2 records seen and 1 applied.
func runSQLSync(t *testing.T, ns, id string, driver fleetv1alpha1.SQLDriver, dsn, table string, want map[string]string) *fleetv1alpha1.ExternalAttributeSync {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	srv.PutCollector(&collectorv1.Collector{Id: id})
	g.Expect(env.Client.Create(ctx, &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: fleetv1alpha1.CollectorSpec{ID: id}})).To(Succeed())
	sqlSecret(t, ns, dsn)
	sync := sqlInventorySync(ns, driver, table)
	g.Expect(env.Client.Create(ctx, sync)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(want))
	}).Should(Succeed())
	s := &fleetv1alpha1.ExternalAttributeSync{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sync), s)).To(Succeed())
	g.Expect(s.Status.RecordsSeen).To(BeEquivalentTo(2))
	g.Expect(s.Status.RecordsApplied).To(BeEquivalentTo(1))
	return sync
}

// TestExternalAttributeSyncSQLThroughTheGuard: a SQL source dials through the SSRF guard like an HTTP one. A DSN
// naming the metadata address or a Unix socket fails the run without a connection; no database is needed.
func TestExternalAttributeSyncSQLThroughTheGuard(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for name, dsn := range map[string]string{
		"metadata":    "postgres://postgres@169.254.169.254:5432/x?sslmode=disable&connect_timeout=5",
		"unix-socket": "host=/var/run/postgresql user=postgres dbname=test",
	} {
		ns := newNamespace(t)
		sqlSecret(t, ns, dsn)
		sync := sqlInventorySync(ns, fleetv1alpha1.SQLDriverPostgres, "inventory")
		g.Expect(env.Client.Create(ctx, sync)).To(Succeed())
		g.Eventually(func(g Gomega) {
			c := syncCondition(g, client.ObjectKeyFromObject(sync), fleetv1alpha1.ConditionReady)
			g.Expect(c.Reason).To(Equal(fleetv1alpha1.ReasonSourceFailed))
			g.Expect(c.Message).To(ContainSubstring("blocked by the SSRF guard"), name)
		}).Should(Succeed())
	}
}
