package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"slices"
	"strings"
	"unicode/utf8"

	sqlite "modernc.org/sqlite"
)

// matchFunc is the SQL function textMatch uses: 1 when its first or second
// argument contains the third, ignoring case (Unicode), else 0.
const matchFunc = "sovereign_text_match"

func init() {
	sqlite.MustRegisterDeterministicScalarFunction(matchFunc, 3, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		text, _ := args[2].(string)
		needle := strings.ToLower(text)
		for _, a := range args[:2] {
			if s, ok := a.(string); ok && containsFold(s, needle) {
				return int64(1), nil
			}
		}
		return int64(0), nil
	})
}

// containsFold reports whether s contains lowerNeedle (lower case) ignoring
// case.
func containsFold(s, lowerNeedle string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || ('A' <= s[i] && s[i] <= 'Z') {
			return strings.Contains(strings.ToLower(s), lowerNeedle)
		}
	}
	return strings.Contains(s, lowerNeedle)
}

// Trigram selection. The index intersects the lists of records of the
// trigrams it is given, and a list as long as the trail (`"ht` in URLs)
// costs tens of milliseconds at a million records while adding nothing, so
// a text query first probes how common its trigrams are and asks for the
// rarest few. A probe reads at most probeLimit of a trigram's newest
// records: fewer is an exact count; otherwise how far back they reach
// estimates the total.
const (
	maxProbes  = 12  // trigrams probed, spread over the text
	probeLimit = 200 // records a probe reads
	maxTerms   = 3   // trigrams the query asks for
	termRatio  = 8   // … each at most this many times as common as the rarest
)

// trigrams returns the distinct trigrams of text (case folded).
func trigrams(text string) []string {
	runes := []rune(strings.ToLower(text))
	seen := map[string]bool{}
	var out []string
	for i := 0; i+3 <= len(runes); i++ {
		if t := string(runes[i : i+3]); !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// spread returns at most n of list, evenly spaced, first and last
// included.
func spread(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	out := make([]string, n)
	for k := range n {
		out[k] = list[k*(len(list)-1)/(n-1)]
	}
	return out
}

// ftsTerm quotes a trigram for an FTS5 query (double quotes doubled), so
// nothing in it is query syntax.
func ftsTerm(t string) string { return `"` + strings.ReplaceAll(t, `"`, `""`) + `"` }

// ftsQuery is the FTS5 query for the records that hold every one of terms.
func ftsQuery(terms []string) string {
	q := make([]string, len(terms))
	for i, t := range terms {
		q[i] = ftsTerm(t)
	}
	return strings.Join(q, " AND ")
}

// pickTrigrams chooses the trigrams of text (at least 3 characters) that a
// text query asks the index for; any subset finds every match, the
// substring check does the rest.
func pickTrigrams(ctx context.Context, tx *sql.Tx, text string) ([]string, error) {
	all := trigrams(text)
	if len(all) <= 1 {
		return all, nil
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM audit`).Scan(&last); err != nil {
		return nil, err
	}
	type probe struct {
		t    string
		many float64 // records holding t, estimated
	}
	probes := make([]probe, 0, maxProbes)
	for _, t := range spread(all, maxProbes) {
		var n int
		var oldest sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT count(*), min(rowid) FROM
			(SELECT rowid FROM audit_fts WHERE audit_fts MATCH ? ORDER BY rowid DESC LIMIT ?)`,
			ftsTerm(t), probeLimit).Scan(&n, &oldest); err != nil {
			return nil, err
		}
		if n == 0 {
			return []string{t}, nil // nothing matches
		}
		p := probe{t, float64(n)}
		if n == probeLimit && oldest.Valid && last > oldest.Int64 {
			p.many = float64(n) * float64(last) / float64(last-oldest.Int64+1)
		}
		probes = append(probes, p)
	}
	slices.SortStableFunc(probes, func(a, b probe) int { return cmp.Compare(a.many, b.many) })
	out := []string{probes[0].t}
	for _, p := range probes[1:] {
		if len(out) == maxTerms || p.many > termRatio*probes[0].many {
			break
		}
		out = append(out, p.t)
	}
	return out, nil
}

// textMatch is the text filter: the trigram index narrows, the substring
// check decides.
func textMatch(arg func(any) string, terms []string, text string) string {
	return "seq IN (SELECT rowid FROM audit_fts WHERE audit_fts MATCH " + arg(ftsQuery(terms)) + ") AND " +
		textCheck(arg, text)
}

// textCheck is the substring check alone.
func textCheck(arg func(any) string, text string) string {
	return matchFunc + "(arguments, result, " + arg(text) + ")"
}
