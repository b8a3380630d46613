// Package page runs browser tools inside one tab: navigation, ARIA snapshots
// with stable element refs, element actions, keys, waits, eval,
// screenshots, dialogs and file inputs, each bounded by the deadline of its
// request.
//
// A [Tab] wraps a chromedp context bound to one tab target. [Tab.Do] runs
// one tool from a [browserv1.ToolRequest] and returns a
// [browserv1.ToolResult] or a *bus.Error whose code and message are meant
// for the model that called the tool: they say what was wrong and what to
// do next. Do reads the tool's traits from its catalog descriptor
// (catalog.ForRequest: whether it settles and reports changes, navigates,
// runs with a dialog open) and runs the handler that the tool's domain
// file registered (navHandlers in nav.go, inputHandlers in pointer.go, …).
//
// Tab itself is the core that every tool uses: the tab's lifecycle (init,
// closed tabs), Do, element resolution, and acting and settling; the
// navigation, input and form tools are its methods in their domain's file.
// What keeps state between calls is a type the Tab owns, with that state
// and its methods together: frames (world.go; frame numbers, refs and the
// isolated worlds), perfTools (perf.go; performance recordings, heap
// snapshots, screencasts, Lighthouse), dialogs (dialog.go; guarded by a
// lock of their own, which the event listener takes for dialog events) and
// devtools (console.go, network.go). frames and devtools are guarded by
// Tab.mu, which the listener holds for each event. The handler tables and
// Do call the domain (t.perf.stop, t.dialogs.watch).
//
// # Snapshots and refs
//
// snapshot walks each frame's DOM in one JavaScript call (page.js) and
// prints the ARIA-YAML grammar that Playwright made familiar:
//
//	# snapshot text
//	- heading "Account" [level=2] [ref=e3]
//	- link "Docs" [ref=e7]:
//	  - /url: /docs
//	- checkbox "Agree" [checked] [ref=e9]
//	- textbox "Email" [ref=e2]: a@b.c
//	- iframe "Payment" [ref=e12]:
//	  - button "Pay" [ref=f1e2]
//
// page.js runs in an isolated world (Page.createIsolatedWorld), one per
// frame document, so the page can neither see nor break it. Go calls its
// functions, and forms.js's, by name through one typed wrapper each
// (js_<domain>.go, over jscall.go and call.js); no JavaScript is written in
// Go strings. There a
// WeakMap gives each element its ref number and a map of WeakRefs leads
// back, so a ref stays the same across snapshots for as long as its
// element exists. Refs of the main frame look like e5; refs in a child
// frame carry the frame's number, f1e2, which the tab gives each frame the
// first time a snapshot sees it and keeps for its life. Same-origin and
// cross-origin iframes are both walked (the worker runs Chromium with site
// isolation off, so they are in the page's process). A new document
// starts its refs after the last number its frame handed out, so a stale
// ref never names a new element: it fails with NOT_FOUND and a hint to
// take a new snapshot.
//
// interactive keeps links, buttons, form fields, options, ARIA widgets,
// contenteditable roots and elements with onclick, tabindex or a pointer
// cursor (not a pointer-cursor box around controls of its own: the
// controls are the targets; not a focus trap's empty guard), plus
// headings, iframes, dialogs and the rows
// that hold controls for context. compact drops unnamed structural
// wrappers (in interactive mode: every container but those; in the full
// tree: generic elements without a name and empty elements). Hidden
// elements (display:none, visibility:hidden, aria-hidden, inert) never
// show. Password values show as dots.
//
// Names follow accname as Chromium's accessibility tree computes them:
// a row is named by its cells (`- row "Toyota Celica 35000"`, its
// checkbox on the line under it), a name from content includes CSS
// generated text (a picker's "Normal") but not icon-font glyphs, and
// elements that never show text (style, script, template, an SVG's
// defs and style, a MathML annotation), whatever their namespace, add
// nothing. An interactive element without a name of its own (a focusable
// list item, a clickable div) is named by its text.
//
// # Element tools
//
// click, hover, fill, type, focus, get_text, get_html, get_attr and element
// screenshots take a ref (e5, @e5, f1e2) or a CSS selector (main frame).
// click and hover scroll the element into view (with the same-origin
// frames around it: an element at the top of a frame below the fold is
// not in view) and send real mouse events at the centre of its box in
// main-frame coordinates, so iframe offsets are accounted for; a click
// that lands on a covering element says so.
// The hit test looks into open shadow roots and slots, so a component's
// own parts (the label around its switch, its host) never count as
// covering it, and for an element in a same-origin frame it also looks at
// the documents around the frame (an overlay there covers the frame). A
// nameless cover beside a dialog is named as its backdrop: `generic
// [ref=e12] (the backdrop of dialog "Confirm" [ref=e8])`.
// fill selects the field's content and inserts the text (select elements
// take an option label or value; date-like inputs take their value whole),
// then fires change. It succeeds when the field took the text (an input
// event fired), whatever the page then does with it, and fails only when
// the field could not take text (disabled, read-only, not editable, gone,
// a number field given something else, no input event). type appends with
// real key events. fill and type with submit press Enter afterwards, in
// the same call.
//
// # Forms, pointer and reading (forms.go, pointer.go, forms.js)
//
// select_option selects options of a select by value or visible label
// (exactly these, for a multiple select) and fires input and change once.
// check sets a checkbox, radio or switch, native or ARIA (aria-checked),
// to a state: already there, it does nothing; otherwise it clicks the
// element with real mouse events and verifies the new state (a native
// input without a box, behind a styled label, gets a synthetic click).
// fill_form fills several fields in order with one settle, and stops at
// the first that fails, saying which were done. click takes a button, a
// click count (2 fires dblclick) and modifiers. drag presses on its
// source and moves towards its target: when the page starts an HTML5 drag
// (dragstart), Chromium hands it over (Input.setInterceptDrags) and the
// drop is sent as drag events; otherwise the moves go on in steps and the
// button is released on the target, which drives sliders and sortable
// lists. mouse sends one raw action at a viewport point, checked against
// the viewport. press with action down holds a key; a held modifier also
// applies to later key presses, clicks and mouse actions until it goes up.
//
// get_markdown renders the page or an element as Markdown in the
// isolated world (forms.js, installed with page.js), leaving out scripts,
// styles, form controls and hidden elements, cut in the page at the
// text cap. eval with an element calls the script, a function, with the
// element in the page's main world. wait_for waits for one of a selector,
// a visible text, a text that goes away, or a URL (substring or glob).
//
// # Settling and the change report
//
// open, back, forward, reload, click, press, fill, type, select_option,
// check, fill_form, drag, mouse, resize, emulate, handle_dialog,
// upload_file, drop and performance_start with reload settle
// (settle.go): a navigation they started commits and loads, then the page
// must be quiet (no request in flight, no DOM mutation for 50 ms) when
// anything happened after the action (a page that changed during the
// action itself, not in the task after it, and sent no request has
// settled at once; one that did not react at once gets the frame that
// follows); all within the settle
// budget (DefaultSettle or the request's settle_ms). Do then
// adds the change report (changes.go): URL and title changes, windows the
// page opened, dialogs, console errors, an unsettled page, as text lines
// and as "changes" in the structured result, and the snapshot (or its diff
// against the tab's last one) when the request asks.
//
// # Caps
//
// Every text a tool returns is bounded (limits.go): snapshots at
// DefaultSnapshotChars (cut at a line, with a marker naming the ref to ask
// for; the walk of a huge page also stops early and at the deadline; an
// interactive snapshot of the page shows at most one row, list item or
// tree item of a container per 800 characters of the cap, 50 by default,
// then a line that counts the rest and points at find, so a grid of
// 2,000 rows leaves room for the rest of the page),
// get_text, get_html and eval at DefaultTextChars (cut in the page), titles
// and addresses at fixed lengths; the request's max_chars overrides the
// first two. Every cut scrubs the operator's secrets first (secrets.Cut):
// text the page cuts is read with secrets.Margin() to spare and cut again
// here, and page.js's clips arrive marked and are cut here
// (resolveClips), so a cut never keeps part of a value. A document that
// goes away under a call is retried a few times, then the tool fails with
// "the page navigated while …".
//
// # eval
//
// eval evaluates the script in the page's main world as a REPL script, as
// the DevTools console does: an expression, statements whose last value is
// the result, and top-level await all work, and a returned promise is
// awaited. A script that does not parse that way (return x) runs as the
// body of an async function. The value comes back as JSON text and as
// {"type": ..., "value": ...} in the structured content; undefined is the text
// "undefined". DOM nodes, cycles, functions and BigInts become readable
// stand-ins. A throw or a rejection is SCRIPT_ERROR with the message.
//
// # Deadlines and dialogs
//
// Every browser call runs on a context derived from the tab context that
// ends with the request context, so no tool outlives its deadline; waits
// inside tools (page loads, wait, wait_for) end a little before it so the
// tool can still answer. A script that loops forever is stopped by V8.
// Dialogs (dialog.go) follow the session's mode (Options.Dialogs): accept
// and dismiss answer each one at once; ask (the default) accepts alerts
// and leaves confirm, prompt and beforeunload dialogs open: the tool that
// raised one returns at once saying so, later tools that need the page
// fail with DIALOG_OPEN naming it, and handle_dialog answers it. Error
// messages and notes quote at most 2000 characters of text that the page
// controls (a thrown value, a dialog message, an element's description).
//
// # Files
//
// upload_file (files.go) sets files that the session wrote to disk on a
// file input (DOM.setFileInputFiles). A click that would open a file
// chooser is intercepted and its result names the input by ref. The
// snapshot shows a file input as button "Choose file: <label>" with the
// chosen file names as its value. Downloads are the session's (the
// worker's downloads.go); Tab.HasFrame tells it which tab began one.
//
// # Developer tools
//
// The tab's event listener also feeds two rings: the last console messages
// (console.go: every console call with its level and source line, uncaught
// exceptions, unhandled rejections; Options.ConsoleBuffer) and the last
// requests (network.go: method, URL, type, status, size, duration, the URL
// policy rule of a refused one; Options.NetworkBuffer). console_messages
// and network_requests list them, newest kept, within limit and max_chars;
// network_request reads one body back from Chromium (cut at max_bytes,
// base64 when it is not text). pdf prints the page (pdf.go; capped at
// Options.MaxPDFBytes) as a Resource part. [Tab.Emulate] applies an
// [Emulation] whole (emulate.go: viewport, device, user agent, locale,
// time zone, position, media features, offline); the session keeps one
// for all its tabs, so resize and emulate are session tools.
//
// # Performance and memory
//
// performance_start starts a Chromium trace of the tab (perf.go: the
// categories of DevTools' Performance panel, returned as a stream), and
// with reload reloads the page in the same call, so the trace holds its
// load; one recording per tab. Chromium records one trace per browser,
// so the tabs of a browser (every session of a worker) take turns through
// Options.Traces (perfturns.go): a recording that finds the browser busy
// is queued, starts by itself when its turn comes, and holds the browser
// at most DefaultMaxTraceDuration. performance_stop ends it and reads the
// stream (at most Options.MaxProfileReadBytes). Chromium traces the whole
// browser, other sessions' tabs included, so only the events of the tab's
// frames and renderer processes (and the browser's that name nothing
// else) are kept; they go through the analysis (perftrace.go: navigation timing, LCP and its
// element, CLS in session windows, long tasks and total blocking time,
// main-thread self time by category, render-blocking and slowest
// requests) and into a gzipped trace.json.gz, attached when it fits
// Options.MaxProfileFileBytes. heap_snapshot (heap.go) collects V8's
// snapshot chunks (at most MaxProfileReadBytes, else TOO_LARGE), sums
// self sizes by constructor and attaches heap.heapsnapshot.gz. The worker
// scrubs secrets from both files as it does from text. performance_metrics
// (perfmetrics.go) reads the Web Vitals in the isolated world (buffered
// PerformanceObservers) and Chromium's Performance.getMetrics, whose
// counters run from the tab's first call. screencast_start
// (screencast.go) starts Page.startScreencast and a goroutine that keeps
// the JPEG frames (at most max_frames and MaxProfileFileBytes; a frame it
// does not keep is not acknowledged, so Chromium pauses) until
// screencast_stop, which returns them as a QuickTime movie
// (screencast_mov.go) and an animated GIF (screencast_gif.go).
//
// # Lighthouse
//
// lighthouse_audit (lighthouse.go) runs Google Lighthouse, which is Node:
// the tab starts `node run.mjs` from Options.LighthouseDir (the runner in
// services/browser/lighthouse) and hands it the browser's DevTools
// websocket (package chrome records it) and the tab's target. The runner
// attaches to that target only, audits accessibility, best practices and
// SEO without resetting storage, and prints the result; the tab sums it
// up (scores, failed audits, a few flagged elements each, within
// LighthouseChars) and applies its emulation again, which Chromium drops
// when Lighthouse disconnects. The run is killed at LighthouseTimeout or
// the call's deadline. An audit takes no turn at the browser's trace
// (Options.Traces): its three categories gather no trace, in navigation
// mode as in snapshot mode, so audits and performance recordings of the
// worker's sessions run side by side; a category that traces
// (performance) would make them collide.
//
// # Closed tabs
//
// A tab whose target went away (the page called window.close(), or its
// renderer crashed) fails every tool, also one that is running, with
// NOT_FOUND and a hint to pick another tab; [Tab.Closed] reports it, so the
// session can drop the tab. This package never says SESSION_LOST: only the
// worker knows that the whole Chromium died.
package page
