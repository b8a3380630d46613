package page

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
)

// The tests of this file read traces and need no Chromium (see chromium in
// page_test.go): go test -run 'TestAnalyze|TestInsight' ./internal/page/.

// synthTrace is a trace of two renderers: the tab's (pid 2, frame F1) and
// another browser context's (pid 3), and the browser (pid 1).
const synthTrace = `{"traceEvents":[
{"name":"TracingStartedInBrowser","ph":"I","pid":1,"tid":1,"ts":1000,"args":{"data":{"frames":[{"frame":"F1","processId":2}]}}},
{"name":"FrameCommittedInBrowser","ph":"I","pid":1,"tid":1,"ts":1100,"args":{"data":{"frame":"F9","processId":3,"url":"https://other.example/secret"}}},
{"name":"ThrottlingURLLoader::OnReceiveResponse","ph":"X","pid":1,"tid":1,"ts":1200,"dur":5,"args":{"url":"https://other.example/secret"}},
{"name":"RunTask","ph":"X","pid":1,"tid":1,"ts":1200,"dur":5,"args":{}},
{"name":"thread_name","ph":"M","pid":2,"tid":7,"args":{"name":"CrRendererMain"}},
{"name":"navigationStart","ph":"R","pid":2,"tid":7,"ts":10000,"args":{"frame":"F1","data":{"documentLoaderURL":"https://tab.example/","isLoadingMainFrame":true}}},
{"name":"ResourceSendRequest","ph":"I","pid":1,"tid":1,"ts":10100,"args":{"data":{"frame":"F1","requestId":"d","url":"https://tab.example/","resourceType":"Document"}}},
{"name":"ResourceReceiveResponse","ph":"I","pid":1,"tid":1,"ts":30000,"args":{"data":{"frame":"F1","requestId":"d","statusCode":200}}},
{"name":"ResourceFinish","ph":"I","pid":1,"tid":1,"ts":31000,"args":{"data":{"frame":"F1","requestId":"d","encodedDataLength":500}}},
{"name":"ResourceSendRequest","ph":"I","pid":2,"tid":7,"ts":32000,"args":{"data":{"requestId":"c","url":"https://tab.example/a.css","resourceType":"Stylesheet","renderBlocking":"blocking"}}},
{"name":"ResourceFinish","ph":"I","pid":2,"tid":7,"ts":132000,"args":{"data":{"requestId":"c","encodedDataLength":10}}},
{"name":"firstContentfulPaint","ph":"R","pid":2,"tid":7,"ts":150000,"args":{"frame":"F1"}},
{"name":"largestContentfulPaint::Candidate","ph":"R","pid":2,"tid":7,"ts":160000,"args":{"frame":"F1","data":{"type":"text","size":900,"nodeId":4}}},
{"name":"RunTask","ph":"X","pid":2,"tid":7,"ts":200000,"dur":120000,"args":{}},
{"name":"FunctionCall","ph":"X","pid":2,"tid":7,"ts":200000,"dur":100000,"args":{}},
{"name":"Layout","ph":"X","pid":2,"tid":7,"ts":250000,"dur":10000,"args":{}},
{"name":"LayoutShift","ph":"I","pid":2,"tid":7,"ts":400000,"args":{"frame":"F1","data":{"weighted_score_delta":0.1,"had_recent_input":false}}},
{"name":"LayoutShift","ph":"I","pid":2,"tid":7,"ts":900000,"args":{"frame":"F1","data":{"weighted_score_delta":0.05,"had_recent_input":false}}},
{"name":"LayoutShift","ph":"I","pid":2,"tid":7,"ts":3000000,"args":{"frame":"F1","data":{"weighted_score_delta":0.12,"had_recent_input":false}}},
{"name":"LayoutShift","ph":"I","pid":2,"tid":7,"ts":3100000,"args":{"frame":"F1","data":{"weighted_score_delta":0.5,"had_recent_input":true}}},
{"name":"navigationStart","ph":"R","pid":3,"tid":9,"ts":10000,"args":{"frame":"F9","data":{"documentLoaderURL":"https://other.example/secret","isLoadingMainFrame":true}}},
{"name":"RunTask","ph":"X","pid":3,"tid":9,"ts":200000,"dur":900000,"args":{}}
],"metadata":{"command_line":"x"}}`

// TestAnalyzeTrace: the numbers of a synthetic trace, and only the tab's
// events in the file: another renderer's and the browser's that name
// another tab are left out.
func TestAnalyzeTrace(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s, cut, err := analyzeTrace(strings.NewReader(synthTrace), &out)
	if err != nil || cut {
		t.Fatalf("analyzeTrace = %v, cut %v", err, cut)
	}
	if s.Navigation != "https://tab.example/" || s.TTFB != 20 || s.FCP != 140 || s.LCP != 150 || s.LCPType != "text" || s.lcpNode != 4 {
		t.Errorf("timing = %+v, want the tab's navigation, TTFB 20, FCP 140, LCP 150", s)
	}
	// Shifts 0.1 and 0.05 are one window; 0.12 starts another (a gap over
	// 1 s); 0.5 follows input.
	if s.CLS != 0.15 || s.Shifts != 3 {
		t.Errorf("CLS = %g over %d shifts, want 0.15 over 3", s.CLS, s.Shifts)
	}
	if s.LongTasks != 1 || s.TBT != 70 || s.Longest[0].DurationMS != 120 {
		t.Errorf("long tasks = %d, TBT %g, %+v; want 1 of 120 ms, TBT 70 (the other renderer's is not the tab's)", s.LongTasks, s.TBT, s.Longest)
	}
	if want := map[string]float64{"scripting": 90, "style & layout": 10, "other": 20}; !mapsEqual(s.MainThread, want) {
		t.Errorf("main thread = %v, want self times %v", s.MainThread, want)
	}
	if len(s.Blocking) != 1 || s.Blocking[0].URL != "https://tab.example/a.css" || s.Blocking[0].DurationMS != 100 || s.Requests != 2 {
		t.Errorf("requests = %d, blocking %+v; want 2 and a.css blocking for 100 ms", s.Requests, s.Blocking)
	}
	var file struct {
		TraceEvents []json.RawMessage `json:"traceEvents"`
	}
	if err := json.Unmarshal(out.Bytes(), &file); err != nil || len(file.TraceEvents) != s.Kept || s.Kept != 18 || s.Events != 22 {
		t.Errorf("file: %v, %d events, kept %d of %d; want 18 of 22", err, len(file.TraceEvents), s.Kept, s.Events)
	}
	if bytes.Contains(out.Bytes(), []byte("other.example")) {
		t.Errorf("the tab's trace names another tab's address:\n%s", out.Bytes())
	}
	// A trace that ends early is analysed up to there.
	if _, cut, err := analyzeTrace(strings.NewReader(synthTrace[:len(synthTrace)/2]), &bytes.Buffer{}); err != nil || !cut {
		t.Errorf("a half trace: %v, cut %v; want no error and cut", err, cut)
	}
	if _, _, err := analyzeTrace(strings.NewReader(`"not a trace"`), &bytes.Buffer{}); err == nil {
		t.Error("a JSON string is not a trace, but analyzeTrace took it")
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata from what the code gives now")

// golden compares got with the file testdata/name, or with -update writes
// it there.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -run %s -update rewrites it after a deliberate change):\n%s", t.Name(), path, t.Name(), got)
	}
}

// recordedTrace analyses testdata/trace.json, a trace that Chromium
// recorded of perfServer's page with performance_start reload and
// performance_stop (the attached trace.json.gz, so the tab's events only),
// trimmed to the events the analysis reads: the metadata, the browser's
// frame events, the page's marks, requests and layout shifts, and the
// main thread's tasks and the slices it groups. The trimmed trace gives
// the same summary as the whole recording.
func recordedTrace(t *testing.T) traceSummary {
	t.Helper()
	f, err := os.Open("testdata/trace.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	s, cut, err := analyzeTrace(f, &out)
	if err != nil || cut {
		t.Fatalf("analyzeTrace(testdata/trace.json) = %v, cut %v", err, cut)
	}
	if s.Kept != s.Events || s.Events != 236 {
		t.Errorf("kept %d of %d events, want all 236 (the recording holds the tab's events only)", s.Kept, s.Events)
	}
	return s
}

// TestAnalyzeRecordedTrace: the summary of a real Chromium trace: the
// page's load, its one long task (a 200 ms loop), its layout shift (a
// banner) and its slow render-blocking stylesheet (150 ms late).
func TestAnalyzeRecordedTrace(t *testing.T) {
	t.Parallel()
	s := recordedTrace(t)
	const page = "http://127.0.0.1:44077/"
	switch {
	case s.Navigation != page || s.Navigations != 1:
		t.Errorf("navigation = %q (%d), want %s once", s.Navigation, s.Navigations, page)
	case !(s.TTFB > 0 && s.TTFB < s.FCP && s.FCP <= s.LCP && s.DCL <= s.Load):
		t.Errorf("timing = TTFB %g, FCP %g, LCP %g, DCL %g, load %g; want them in that order", s.TTFB, s.FCP, s.LCP, s.DCL, s.Load)
	case s.LongTasks != 1 || s.Longest[0].DurationMS < 200:
		t.Errorf("long tasks = %d, %+v; want the 200 ms loop", s.LongTasks, s.Longest)
	case s.Shifts != 1 || s.CLS <= 0:
		t.Errorf("CLS = %g over %d shifts, want the banner's one shift", s.CLS, s.Shifts)
	case len(s.Blocking) != 1 || s.Blocking[0].URL != page+"slow.css" || s.Blocking[0].DurationMS < 150:
		t.Errorf("render-blocking = %+v, want slow.css for 150 ms or more", s.Blocking)
	case s.MainThread["scripting"] < 200:
		t.Errorf("main thread = %v, want scripting of 200 ms or more", s.MainThread)
	}
	golden(t, "trace.summary.txt", s.text())
}

// TestInsightRecordedTrace: performance_insight's details of the recorded
// trace, for each insight.
func TestInsightRecordedTrace(t *testing.T) {
	t.Parallel()
	s := recordedTrace(t)
	tab := New(t.Context(), Options{})
	tab.perf.lastTrace = &s
	var b strings.Builder
	for _, in := range Insights {
		res, err := tab.perf.insight(in)
		if err != nil {
			t.Fatalf("insight(%q): %v", in, err)
		}
		b.WriteString("# " + in + "\n" + res.GetContent()[0].GetText() + "\n")
	}
	golden(t, "trace.insights.txt", b.String())
}
