package page

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// page500 has 500 interactive elements (buttons, links, inputs, selects,
// checkboxes) in a realistic nest of lists, cards and text.
func page500() string {
	var b strings.Builder
	b.WriteString(`<!doctype html><title>Bench</title><nav><ul>`)
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, `<li><a href="/section/%d">Section %d</a></li>`, i, i)
	}
	b.WriteString(`</ul></nav><main>`)
	for i := 0; i < 90; i++ {
		fmt.Fprintf(&b, `<div class="card"><div class="head"><h3>Item %d</h3><span class="meta">posted by <b>user%d</b></span></div>
<p>Some description of item %d with <em>emphasis</em> and more words to read.</p>
<div class="actions"><button type=button>Like %d</button><a href="/item/%d">Open %d</a>
<label>Note <input name=n%d placeholder="note"></label><label><input type=checkbox> Pick %d</label>
<select aria-label="Rate %d"><option>1</option><option>2</option></select></div></div>`, i, i, i, i, i, i, i, i, i)
	}
	b.WriteString(`</main>`)
	return b.String()
}

func BenchmarkSnapshot500(b *testing.B) {
	tab := newTab(b, Options{})
	srv := serve(b, map[string]string{"/": page500()})
	must(b, tab, openReq(srv.URL))
	res := must(b, tab, snapReq(true, true))
	if n := strings.Count(text(res), "[ref="); n < 500 {
		b.Fatalf("the bench page has %d refs, want 500 or more", n)
	}
	for _, mode := range []struct {
		name                 string
		interactive, compact bool
	}{
		{"interactive", true, true},
		{"full", false, true},
	} {
		b.Run(mode.name, func(b *testing.B) {
			req := snapReq(mode.interactive, mode.compact)
			bytes := 0
			for b.Loop() {
				res := must(b, tab, req)
				bytes = len(text(res)) + len(string(structured.JSON(res.GetStructured())))
			}
			b.ReportMetric(float64(bytes), "bytes/op")
		})
	}
	// The first snapshot of a new document also creates the isolated
	// world, installs page.js and runs it before V8 has optimized it.
	b.Run("first_after_reload", func(b *testing.B) {
		req := snapReq(true, true)
		for b.Loop() {
			b.StopTimer()
			must(b, tab, reloadReq)
			b.StartTimer()
			must(b, tab, req)
		}
	})
}
