package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// InputSchema returns the tool's JSON Schema (an object schema whose
// properties keep the catalog's order). It has no top-level oneOf: several
// clients refuse those, so "exactly one of ref, target or selector" is
// checked by Parse and said in the descriptions.
func (t Tool) InputSchema() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object",`)
	writeProperties(&b, t.Params())
	b.WriteByte('}')
	return b.Bytes()
}

// writeProperties writes the properties of an object schema, its
// required list and additionalProperties false.
func writeProperties(b *bytes.Buffer, params []Param) {
	b.WriteString(`"properties":{`)
	var required []string
	for i, p := range params {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(b, p.Name)
		b.WriteByte(':')
		b.Write(p.schema())
		if p.Required {
			required = append(required, p.Name)
		}
	}
	b.WriteByte('}')
	if len(required) > 0 {
		b.WriteString(`,"required":`)
		writeJSON(b, required)
	}
	b.WriteString(`,"additionalProperties":false`)
}

func (p Param) schema() []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	writeJSON(&b, string(p.Type))
	if len(p.Enum) > 0 {
		b.WriteString(`,"enum":`)
		writeJSON(&b, p.Enum)
	}
	if p.Default != nil {
		b.WriteString(`,"default":`)
		writeJSON(&b, p.Default)
	}
	if p.Min != nil {
		fmt.Fprintf(&b, `,"minimum":%d`, *p.Min)
	}
	if p.Max != nil {
		fmt.Fprintf(&b, `,"maximum":%d`, *p.Max)
	}
	if p.Items != nil {
		b.WriteString(`,"items":`)
		b.Write(p.Items.schema())
	}
	if p.MaxItems > 0 {
		fmt.Fprintf(&b, `,"maxItems":%d`, p.MaxItems)
	}
	if p.Type == Object {
		b.WriteByte(',')
		writeProperties(&b, p.Fields)
	}
	if p.Description != "" {
		b.WriteString(`,"description":`)
		writeJSON(&b, p.Description)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("catalog: encode %v: %v", v, err)) // only static catalog values reach here
	}
	b.Truncate(b.Len() - 1) // Encode's newline
}

// Markdown renders docs/tools.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# Browser tools

<!-- Generated from services/kit/catalog by
     (cd services/gateway && go run ./cmd/gendocs > ../../docs/tools.md). Do not edit. -->

The gateway serves these tools over MCP (Streamable HTTP at ` + "`/mcp`" + `). Each call runs in a
browser session on one of the browser workers.

**Sessions.** An MCP client on protocol 2025-03-26 … 2025-11-25 has an MCP session
(` + "`Mcp-Session-Id`" + `); its first browser tool opens one browser session for it, and ending the MCP
session (HTTP DELETE) closes it. A client on 2026-07-28 has no protocol session: a call without
` + "`session`" + ` opens a new browser session and returns its handle, first as a text line
` + "`session: sov_… (pass it as \"session\" in later calls)`" + `, and in ` + "`structuredContent.session`" + ` and
` + "`_meta[\"sovereign/session\"]`" + `. Pass the handle as ` + "`session`" + ` in every later call. A handle belongs
to the caller that opened it (its Authorization header). When a worker stops, the call fails with
"the browser session was lost" and the next call opens a fresh session (a handle stays valid).

**Elements.** Element tools take ` + "`ref`" + ` (a snapshot ref such as ` + "`e5`" + `, with or without a
leading ` + "`@`" + `), ` + "`target`" + ` (an alias of ` + "`ref`" + `) or ` + "`selector`" + ` (CSS): exactly one of them.

**Identity.** ` + "`login`" + `, ` + "`switch_identity`" + `, ` + "`logout`" + ` and ` + "`login_status`" + ` act on the Nostr
identity of the call's browser session (the same session rules as above): the signer service
(` + "`sovereign signer`" + `, or inside ` + "`sovereign up`" + `) holds the key, and the session's pages get
` + "`window.nostr`" + `. Another session does not see it. The secret arguments (` + "`nsec`" + `,
` + "`privkey_hex`" + `, ` + "`mnemonic`" + `, ` + "`passphrase`" + ` and the secret of a ` + "`bunker_url`" + `) are never
recorded. A gateway started with ` + "`--require-login`" + ` refuses browser tools in a session until it
has logged in.

**Settling.** Every tool that can change the page (` + "`open`, `back`, `forward`, `reload`, `tab_new`, " +
		"`click`, `press`, `fill`, `type`, `select_option`, `check`, `fill_form`, `drag`, `mouse`, `resize`, `emulate`" + `) returns when the page has settled: a navigation it started (a
new document, or a hash or ` + "`pushState`" + ` route) has committed and loaded, and then no request of the
page has been in flight and the DOM has not changed for a quiet window of 50 ms, counted from the
later of the last request and the last change, and a frame and a task have passed since (on a busy
machine the clock alone would call a page quiet before it ran the script that just loaded). That window is waited for only when something
happened after the action: a page that changed its DOM during the action itself, changed nothing
more in the task after it and sent no request returns at once; one that did not react at once gets
the frame that follows the action, and the window only if the DOM changed in it; a hash or pushState
route always gets the window. All of it is bounded by the settle budget:
3000 ms, or the call's ` + "`settle_ms`" + ` (0 returns as soon as the action and its navigation are
done). When the budget runs out the call still succeeds and says what was pending
(` + "`- not settled after 3000 ms: 2 requests still in flight (first: …)`" + `).

**What changed.** After such a tool the result adds a few short lines, only when something did: the
URL (` + "`- URL: … (was …)`" + `) and the title when they changed, tabs the page opened (with their
index), dialogs (type, text, and that they were accepted), new console errors and uncaught
exceptions (count and the first message), and an unsettled page. ` + "`structuredContent.changes`" + `
carries the same facts as fields (` + "`url`, `previous_url`, `title`, `opened_tabs`, `dialogs`, " +
		"`console_errors`, `first_console_error`, `settled`, `pending`, `settle_ms`" + `). ` + "`snapshot: true`" + ` on
any of these tools adds the interactive snapshot of the settled page; ` + "`snapshot: \"diff\"`" + ` adds
only the lines that changed since the last snapshot of that tab (` + "`+`" + ` added, ` + "`-`" + ` removed,
` + "`~`" + ` changed, each with its ref).

**Snapshots.** In interactive mode a control without a name takes one from where it sits: the text of
its list item, row or label, or the nearest heading before it (` + "`- checkbox \"walk dog\" [ref=e38]`" + `).
` + "`ref`" + ` returns only that element's subtree. A snapshot longer than ` + "`max_chars`" + ` is cut at
an element boundary with a marker: how many lines and characters were left out, and the ref where
they start (and the ref that holds it) to ask for with ` + "`ref`" + `.

**Caps.** Every text a tool returns is bounded; a cut always ends with a marker in brackets that says
what was cut and how to see the rest. ` + "`snapshot`" + `: 40,000 characters (` + "`max_chars`" + ` up to
5,000,000); its walk also stops after about one element per 10 characters of the cap, and at 80%
of the time left before the tool's deadline on a huge page (the result says it is partial), so it
never answers after the deadline. ` + "`get_text`, `get_html`, `eval`, `get_markdown`" + `: 20,000 characters (` + "`max_chars`" + `;
the page cuts the text before it leaves it). Titles: 1,000 characters (` + "`get_title`" + `, change
reports), 200 in ` + "`tab_list`" + `; addresses 2,000. Inside snapshots, names are cut to 120 characters,
text to 2,000 and field values to 200. Text that the page controls in errors and notes (thrown
values, dialog messages) is cut to 2,000 characters. A page that replaces its document while a tool
runs (a reload loop) is retried a few times, then the tool fails with "the page navigated while
… ran".

` + SystemToolsDoc + `
| tool | what it does |
|---|---|
`)
	for _, t := range tools {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", t.Name, t.Name, cell(firstSentence(t.Description)))
	}
	for _, t := range tools {
		fmt.Fprintf(&b, "\n## %s\n\n", t.Name)
		if t.System {
			b.WriteString(systemNote)
		}
		fmt.Fprintf(&b, "%s\n\n", t.Description)
		if t.ReadOnly {
			b.WriteString("Read-only: it does not change the page.\n\n")
		}
		b.WriteString("| argument | type | required | default | description |\n|---|---|---|---|---|\n")
		for _, p := range t.Params() {
			typ := typeText(p)
			if len(p.Enum) > 0 {
				typ += ": " + strings.Join(p.Enum, " \\| ")
			}
			if p.Min != nil || p.Max != nil {
				typ += " " + rangeText(p)
			}
			req := ""
			if p.Required {
				req = "yes"
			}
			def := ""
			if p.Default != nil {
				def = fmt.Sprintf("`%v`", p.Default)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", p.Name, typ, req, def, cell(p.Description))
		}
	}
	return b.String()
}

// typeText is the type column of the docs: "array of string", "array of
// object {ref, selector, value}".
func typeText(p Param) string {
	switch {
	case p.Items != nil:
		s := "array of " + typeText(*p.Items)
		if len(p.Items.Enum) > 0 {
			s += ": " + strings.Join(p.Items.Enum, " \\| ")
		}
		if p.MaxItems > 0 {
			s += fmt.Sprintf(" (at most %d)", p.MaxItems)
		}
		return s
	case p.Type == Object:
		names := make([]string, len(p.Fields))
		for i, f := range p.Fields {
			names[i] = f.Name
		}
		return "object {" + strings.Join(names, ", ") + "}"
	}
	return string(p.Type)
}

func rangeText(p Param) string {
	switch {
	case p.Min != nil && p.Max != nil:
		return fmt.Sprintf("%d…%d", *p.Min, *p.Max)
	case p.Min != nil:
		return fmt.Sprintf("≥ %d", *p.Min)
	default:
		return fmt.Sprintf("≤ %d", *p.Max)
	}
}

// firstSentence cuts s after its first sentence: a period followed by a
// space and a capital letter ("e.g. Enter" does not end one).
func firstSentence(s string) string {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '.' && s[i+1] == ' ' && s[i+2] >= 'A' && s[i+2] <= 'Z' && !strings.HasSuffix(s[:i], "e.g") && !strings.HasSuffix(s[:i], "i.e") {
			return s[:i+1]
		}
	}
	return s
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
