package extsync

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestParseSchedule(t *testing.T) {
	base := time.Date(2026, 3, 1, 10, 7, 30, 0, time.UTC)
	cases := []struct {
		in      string
		next    time.Time
		wantErr string
	}{
		{"15m", base.Add(15 * time.Minute), ""},
		{"10s", base.Add(10 * time.Second), ""},
		{"1h30m", base.Add(90 * time.Minute), ""},
		{"*/10 * * * *", time.Date(2026, 3, 1, 10, 10, 0, 0, time.UTC), ""},
		{"0 3 * * *", time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC), ""},
		{"30 10 1 3 *", time.Date(2027, 3, 1, 10, 30, 0, 0, time.UTC).AddDate(-1, 0, 0), ""},
		{"5s", time.Time{}, "shorter than"},
		{"-1m", time.Time{}, "shorter than"},
		{"@hourly", time.Time{}, "neither a Go duration"},
		{"TZ=UTC 0 3 * * *", time.Time{}, "6 fields"},
		{"0 0 3 * * *", time.Time{}, "6 fields"},
		{"61 * * * *", time.Time{}, "cron expression"},
		{"", time.Time{}, "0 fields"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			s, err := ParseSchedule(tc.in)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Next(base)).To(Equal(tc.next))
		})
	}
}

func TestCheckSelectQuery(t *testing.T) {
	pg, my := fleetv1alpha1.SQLDriverPostgres, fleetv1alpha1.SQLDriverMySQL
	cases := []struct {
		q       string
		wantErr string
		driver  fleetv1alpha1.SQLDriver
	}{
		{"SELECT id, rack FROM inventory", "", ""},
		{"select id from inventory;", "", ""},
		{"  -- the inventory\nSELECT id FROM inventory WHERE note = 'drop; delete'", "", ""},
		{"WITH r AS (SELECT id FROM inventory) SELECT * FROM r", "", ""},
		{`SELECT "update" FROM inventory`, "", ""},
		{"SELECT $tag$ delete; $tag$ AS x", "", pg},
		{"SELECT updated_at, last_insert_id FROM t", "", ""},
		{"SELECT id FROM inventory; DELETE FROM inventory", "single statement", ""},
		{"/* */ DELETE FROM inventory", "must start with SELECT", ""},
		{"/* SELECT */ DELETE FROM inventory", "must start with SELECT", ""},
		{"/* nested /* */ SELECT */ DELETE FROM t", "must start with SELECT", pg},
		{"WITH x AS (DELETE FROM inventory RETURNING *) SELECT * FROM x", "DELETE is not allowed", ""},
		{"COMMIT; INSERT INTO inventory VALUES (1)", "single statement", ""},
		{"SELECT * INTO copy FROM inventory", "INTO is not allowed", ""},
		{"SELECT * FROM inventory FOR UPDATE", "UPDATE is not allowed", ""},
		{"WITH a AS (VALUES (1)) TABLE a", "must contain a SELECT", ""},
		{"SELECT 'unterminated", "unterminated", ""},
		{"SELECT 1 /* open", "unterminated", ""},
		{"SELECT $q$ open", "unterminated", pg},
		{`SELECT 'a\'; DELETE FROM t; SELECT '`, "backslashes", ""},
		{"", "empty", ""},
		{"-- only a comment", "empty", ""},
		{"select 1 # mysql comment ; delete", "", my},
		// MySQL: "--" needs a space after it to start a comment, and /*! */ is executed.
		{"SELECT 1--1 INTO OUTFILE '/tmp/x'", "INTO is not allowed", my},
		{"SELECT 1 -- INTO OUTFILE '/tmp/x'", "", my},
		{"SELECT 1 /*! INTO DUMPFILE '/tmp/x' */", "executable comments", my},
		{"SELECT 1 /*M! INTO DUMPFILE '/tmp/x' */", "executable comments", my},
		{"SELECT /*+ MAX_EXECUTION_TIME(1) */ 1", "executable comments", my},
		{"SELECT 1 /*! INTO DUMPFILE '/tmp/x' */", "", pg},
		// PostgreSQL reads # as an operator, so the rest is a second statement there.
		{"select 1 # ; delete from t", "single statement", pg},
		// MySQL has no dollar quotes and no nested comments.
		{"SELECT $a$ ; DELETE FROM t $a$", "single statement", my},
		{"/* a /* b */ DELETE FROM t", "must start with SELECT", my},
		{"SELECT 1 /* a /* b */ ; DELETE FROM t */", "", pg},
	}
	for _, tc := range cases {
		drivers := []fleetv1alpha1.SQLDriver{pg, my}
		if tc.driver != "" {
			drivers = []fleetv1alpha1.SQLDriver{tc.driver}
		}
		for _, d := range drivers {
			t.Run(string(d)+"/"+tc.q, func(t *testing.T) {
				err := CheckSelectQuery(d, tc.q)
				if tc.wantErr == "" {
					NewWithT(t).Expect(err).NotTo(HaveOccurred())
				} else {
					NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				}
			})
		}
	}
}

// FuzzCheckSelectQuery: no panic, and an accepted query never has a statement separator before its end outside
// quotes — checked by appending a write: "<accepted>; DELETE …" must always be refused.
func FuzzCheckSelectQuery(f *testing.F) {
	for _, s := range []string{"SELECT 1", "SELECT 'a;b'", "WITH x AS (SELECT 1) SELECT * FROM x", "SELECT $a$x$a$", "/* c */ SELECT 1"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, q string, mysql bool) {
		d := fleetv1alpha1.SQLDriverPostgres
		if mysql {
			d = fleetv1alpha1.SQLDriverMySQL
		}
		if CheckSelectQuery(d, q) != nil {
			return
		}
		if err := CheckSelectQuery(d, q+"\n; DELETE FROM t"); err == nil {
			// Only possible when the suffix was swallowed by a comment or literal that the accepted query left
			// open — which the scanner refuses — or by a line comment, which hides it from the server too.
			if !hasLineComment(q, mysql) {
				t.Fatalf("%q accepted, and so was the query with a DELETE appended", q)
			}
		}
	})
}

// hasLineComment reports whether q holds something the driver reads as a line comment.
func hasLineComment(q string, mysql bool) bool {
	if !mysql {
		return strings.Contains(q, "--")
	}
	rs := []rune(q)
	for i := range rs {
		if rs[i] == '#' || (rs[i] == '-' && i+1 < len(rs) && rs[i+1] == '-' && lineCommentStarts(rs, i, true)) {
			return true
		}
	}
	return false
}

func TestExtractRecords(t *testing.T) {
	cases := []struct {
		name, doc, path string
		want            int
		wantErr         string
	}{
		{"root array", `[{"id":"a"},{"id":"b"}]`, "", 2, ""},
		{"nested", `{"data":{"collectors":[{"id":"a"}]}}`, "data.collectors", 1, ""},
		{"empty array", `{"items":[]}`, "items", 0, ""},
		{"root not array", `{"id":"a"}`, "", 0, "the document root is not an array"},
		{"path missing", `{"data":{}}`, "data.collectors", 0, `no field "collectors"`},
		{"path through scalar", `{"data":3}`, "data.collectors", 0, "not inside an object"},
		{"element not object", `[1]`, "", 0, "record 0 is not an object"},
		{"not json", `<html>`, "", 0, "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			recs, err := ExtractRecords([]byte(tc.doc), tc.path)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(recs).To(HaveLen(tc.want))
		})
	}
}

func TestMap(t *testing.T) {
	recs, err := ExtractRecords([]byte(`[
		{"host":{"id":"c1"},"rack":"r1","dc":"fra","weight":1.5,"active":true},
		{"host":{"id":"c2"},"rack":"r2","dc":null},
		{"host":{"id":"c3"},"dc":"ams"},
		{"host":{"id":""},"rack":"r9"},
		{"rack":"r8"},
		{"host":{"id":"c4"},"rack":"r4"},
		{"host":{"id":"c1"},"rack":"r1b"},
		{"host":{"id":"c5"},"rack":"`+strings.Repeat("x", 1025)+`"}
	]`), "")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	m := fleetv1alpha1.AttributeMapping{
		CollectorIDField: "host.id",
		AttributeFields:  map[string]string{"rack": "rack", "dc": "dc", "weight": "weight", "active": "active"},
		RequiredKeys:     []string{"rack"},
	}
	res := Map(recs, m, func(id string) bool { return id != "c4" })
	g := NewWithT(t)
	g.Expect(res.Seen).To(Equal(8))
	// c3 lacks rack, "" and missing IDs, c5's value is too long: 4 skipped. c4 is not selected (not applied,
	// not skipped). c1 twice, c2 once: 3 applied.
	g.Expect(res.Skipped).To(Equal(4))
	g.Expect(res.Applied).To(Equal(3))
	g.Expect(res.Attributes).To(Equal(map[string]map[string]string{
		"c1": {"rack": "r1b", "dc": "fra", "weight": "1.5", "active": "true"},
		"c2": {"rack": "r2"},
	}))
}

func TestOwned(t *testing.T) {
	g := NewWithT(t)
	owned, err := Owned(map[string]map[string]string{"b": {"k": "v"}, "a": {"k": "w"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owned).To(Equal([]fleetv1alpha1.OwnedAttributes{
		{CollectorID: "a", Attributes: map[string]string{"k": "w"}}, {CollectorID: "b", Attributes: map[string]string{"k": "v"}}}))

	many := map[string]map[string]string{}
	for i := range fleetv1alpha1.MaxOwnedCollectors + 1 {
		many[strings.Repeat("c", 1+i%7)+string(rune('a'+i%26))+time.Duration(i).String()] = map[string]string{"k": "v"}
	}
	_, err = Owned(many)
	g.Expect(err).To(MatchError(ErrTooManyOwned))

	big := map[string]map[string]string{}
	for i := range 600 {
		big[time.Duration(i).String()] = map[string]string{"k": strings.Repeat("v", 1000)}
	}
	_, err = Owned(big)
	g.Expect(err).To(MatchError(ContainSubstring("bytes")))
}
