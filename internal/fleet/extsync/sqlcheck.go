package extsync

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// forbiddenWords may not appear as a bare word anywhere in a query (outside string literals and quoted
// identifiers). The list is a first line of defence that explains the refusal at admission; the database-side
// read-only transaction, timeout and single-statement protocol are what actually keep a query from writing.
var forbiddenWords = map[string]bool{
	"alter": true, "analyze": true, "begin": true, "call": true, "checkpoint": true, "cluster": true,
	"comment": true, "commit": true, "copy": true, "create": true, "deallocate": true, "delete": true,
	"discard": true, "do": true, "drop": true, "execute": true, "grant": true, "handler": true, "import": true,
	"insert": true, "into": true, "listen": true, "load": true, "lock": true, "merge": true, "notify": true,
	"prepare": true, "refresh": true, "reindex": true, "rename": true, "replace": true, "reset": true,
	"revoke": true, "rollback": true, "savepoint": true, "set": true, "start": true, "truncate": true,
	"unlisten": true, "update": true, "vacuum": true, "outfile": true, "dumpfile": true,
}

// CheckSelectQuery returns why query is not a single read-only SELECT (or WITH … SELECT) for the driver, or
// nil. Comments are ignored (a leading /* */ cannot hide the first keyword), literals and quoted identifiers are
// skipped with the driver's lexical rules (# comments only for MySQL, $tag$ quotes and nested comments only for
// PostgreSQL), a semicolon is allowed only as the last character, and no write keyword may appear as a word.
func CheckSelectQuery(driver fleetv1alpha1.SQLDriver, query string) error {
	words, err := scanWords(query, driver == fleetv1alpha1.SQLDriverMySQL)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return errors.New("query is empty")
	}
	if words[0] != "select" && words[0] != "with" {
		return fmt.Errorf("query must start with SELECT or WITH, not %s", strings.ToUpper(words[0]))
	}
	sawSelect := false
	for _, w := range words {
		if forbiddenWords[w] {
			return fmt.Errorf("query must be read-only: %s is not allowed", strings.ToUpper(w))
		}
		sawSelect = sawSelect || w == "select"
	}
	if !sawSelect {
		return errors.New("query must contain a SELECT")
	}
	return nil
}

// lineCommentStarts reports whether the "--" at i starts a comment: always in PostgreSQL, but in MySQL only
// when a space, a control character or the end of the query follows ("1--1" is 1 minus -1 there).
func lineCommentStarts(rs []rune, i int, mysql bool) bool {
	if !mysql {
		return true
	}
	return i+2 >= len(rs) || unicode.IsSpace(rs[i+2]) || unicode.IsControl(rs[i+2])
}

// scanWords lower-cases the bare words of query, skipping comments, literals and quoted identifiers, and fails
// on a statement separator or an unterminated token.
func scanWords(q string, mysql bool) ([]string, error) {
	var words []string
	rs := []rune(q)
	for i := 0; i < len(rs); {
		c := rs[i]
		switch {
		case c == '-' && i+1 < len(rs) && rs[i+1] == '-' && lineCommentStarts(rs, i, mysql), c == '#' && mysql:
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case mysql && c == '/' && i+2 < len(rs) && rs[i+1] == '*' && (rs[i+2] == '!' || rs[i+2] == '+' || rs[i+2] == 'M'):
			// MySQL and MariaDB execute the text of /*! … */ (and /*M! … */) and read /*+ … */ as optimizer hints,
			// so these are not comments there; no inventory query needs them.
			return nil, errors.New("MySQL executable comments and hints (/*! */, /*M! */, /*+ */) are not allowed")
		case c == '/' && i+1 < len(rs) && rs[i+1] == '*':
			// PostgreSQL nests block comments; MySQL does not.
			depth := 0
			for i < len(rs) {
				if rs[i] == '/' && i+1 < len(rs) && rs[i+1] == '*' && (!mysql || depth == 0) {
					depth++
					i += 2
					continue
				}
				if rs[i] == '*' && i+1 < len(rs) && rs[i+1] == '/' {
					depth--
					i += 2
					if depth == 0 {
						break
					}
					continue
				}
				i++
			}
			if depth != 0 {
				return nil, errors.New("unterminated /* comment")
			}
		case c == '\'' || c == '"' || c == '`':
			j, err := skipQuoted(rs, i, c)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '$' && !mysql:
			j, err := skipDollar(rs, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == ';':
			if strings.TrimSpace(string(rs[i+1:])) != "" {
				return nil, errors.New("query must be a single statement (no ';' before the end)")
			}
			i = len(rs)
		case unicode.IsLetter(c) || c == '_':
			j := i
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_' || rs[j] == '$') {
				j++
			}
			words = append(words, strings.ToLower(string(rs[i:j])))
			i = j
		default:
			i++
		}
	}
	return words, nil
}

// skipQuoted skips a quoted token starting at i, where a doubled quote escapes the quote. Backslashes are
// refused: MySQL reads them as escapes and PostgreSQL's standard strings do not, so 'a\'; DELETE …; SELECT '
// would be one literal to one reader and three statements to the other.
func skipQuoted(rs []rune, i int, q rune) (int, error) {
	for j := i + 1; j < len(rs); j++ {
		switch rs[j] {
		case '\\':
			return 0, errors.New("backslashes inside quotes are not allowed (databases disagree on their meaning)")
		case q:
			if j+1 < len(rs) && rs[j+1] == q {
				j++
				continue
			}
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated %c quote", q)
}

// skipDollar skips a PostgreSQL dollar-quoted string $tag$…$tag$, or a positional parameter $1.
func skipDollar(rs []rune, i int) (int, error) {
	j := i + 1
	for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_') {
		j++
	}
	if j >= len(rs) || rs[j] != '$' {
		return j, nil // $1 or a lone $
	}
	tag := string(rs[i : j+1])
	end := strings.Index(string(rs[j+1:]), tag)
	if end < 0 {
		return 0, fmt.Errorf("unterminated %s quote", tag)
	}
	return j + 1 + len([]rune(string(rs[j+1:])[:end])) + len([]rune(tag)), nil
}
