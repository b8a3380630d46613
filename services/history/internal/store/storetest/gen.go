package storetest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// Shape of the records Generate makes, for benchmarks that query them.
const (
	GenBrowserSessions = 1000 // "bs-0000" … "bs-0999"
	GenMCPSessions     = 200  // "mcp-000" … "mcp-199"
	genRun             = 20   // consecutive records of one session
)

var (
	genTools = []string{"navigate", "click", "fill", "type", "press", "screenshot", "snapshot", "evaluate", "wait_for",
		"select", "hover", "scroll", "back", "forward", "reload", "tabs", "new_tab", "close_tab", "upload", "pdf"}
	genCallers = []string{"alice", "bob", "ci-token", "agent", "anonymous"}
	genWords   = strings.Fields(`account address button cart checkout click cookie dashboard dialog download
		email error field filter footer form header heading image input invoice label link list login
		logout menu modal navigation order page password payment price product profile search section
		select settings shipping sidebar signup status submit table tab text title total upload user value
		window loaded visible hidden enabled disabled timeout network request response document element`)
)

// GenSession is the browser session of record i of Generate.
func GenSession(i int) string { return fmt.Sprintf("bs-%04d", (i/genRun)%GenBrowserSessions) }

// Generate makes n realistic audit records numbered from start: a UUID-like
// id, one record per millisecond from base, runs of genRun records per
// session, 20 tools, 5 callers, about 5% not OK, JSON arguments of ~100
// characters and results of ~250 characters from a vocabulary of ~90 words
// plus the unique "order-<i>". The same (start, n, base) makes the same
// records.
func Generate(start, n int, base time.Time) []*historyv1.AuditRecord {
	recs := make([]*historyv1.AuditRecord, n)
	for k := range n {
		i := start + k
		r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
		outcome := historyv1.Outcome_OUTCOME_OK
		switch x := r.IntN(200); {
		case x < 8:
			outcome = historyv1.Outcome_OUTCOME_ERROR
		case x < 9:
			outcome = historyv1.Outcome_OUTCOME_DENIED
		case x < 10:
			outcome = historyv1.Outcome_OUTCOME_TIMEOUT
		}
		var res strings.Builder
		fmt.Fprintf(&res, "order-%d ", i)
		for res.Len() < 250 {
			res.WriteString(genWords[r.IntN(len(genWords))])
			res.WriteByte(' ')
		}
		recs[k] = &historyv1.AuditRecord{
			Id:             fmt.Sprintf("%08x-%04x-7%03x-%04x-%012x", i>>16, i&0xffff, i%4096, r.IntN(1<<16), r.Uint64()&(1<<48-1)),
			TimeUnixNano:   base.Add(time.Duration(i) * time.Millisecond).UnixNano(),
			Caller:         genCallers[r.IntN(len(genCallers))],
			McpSession:     fmt.Sprintf("mcp-%03d", (i/genRun)%GenMCPSessions),
			BrowserSession: GenSession(i),
			Tool:           genTools[r.IntN(len(genTools))],
			Arguments: fmt.Sprintf(`{"url":"https://shop.example.com/%s/%d","selector":"#%s-%d","text":"%s"}`,
				genWords[r.IntN(len(genWords))], r.IntN(10000), genWords[r.IntN(len(genWords))], r.IntN(100), genWords[r.IntN(len(genWords))]),
			Result:         res.String(),
			DurationMicros: int64(r.IntN(2_000_000)),
			Outcome:        outcome,
			TraceId:        fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()),
			Source:         "gateway",
			Client:         "claude-code 2.1.0",
		}
	}
	return recs
}
