// Package catalog declares the browser tools once: name, description,
// parameters, how a call's arguments become a browserv1.ToolRequest (or,
// for the identity tools, a signerv1.Login), and the traits the browser
// worker acts on (traits.go).
// MCP tools/list, the argument checks and docs/tools.md are all generated
// from it; the worker finds a request's descriptor with ForRequest.
package catalog

import (
	"fmt"
	"slices"
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
)

// SessionParam is the argument every browser tool takes to name its browser
// session explicitly (see Call.Session).
const SessionParam = "session"

// TypedArguments are the arguments that carry text a tool types into the
// page (the value of fill and type, the fields of fill_form): when it went
// into a password field the audit trail records them as hidden.
var TypedArguments = []string{"value", "fields"}

// Tool is one browser tool.
type Tool struct {
	Name        string
	Title       string
	Description string
	// ReadOnly tools only look at the page.
	ReadOnly bool
	// TypesText tools type their TypedArguments into the page.
	TypesText bool
	// Local tools are answered by the gateway itself, without a browser
	// session: they take no session argument and build no request.
	Local bool
	// Identity tools (login.go) are answered by the gateway with the
	// signer service, in the call's browser session: they take the session
	// argument and build no worker request (login and switch_identity
	// build a signer Login instead).
	Identity bool
	// System tools (system.go) act on the gateway's host, in its
	// workspace; they are also Local. The gateway has them only when its
	// system tools mode allows.
	System bool

	// The traits below concern the tools that build a worker request
	// (traits.go).

	// Acts: the call acts on the page. The worker settles after it and
	// reports what changed (URL, title, tabs, dialogs, errors), and the
	// tool takes settle_ms and snapshot (every tool that may act does).
	Acts Trait
	// Navigates: the call loads another page by itself (open, back, …): a
	// dialog in its way is answered first, beforeunload included, and its
	// result already says where the tab is.
	Navigates Trait
	// MayNavigate: the page may navigate in reaction to the call (a click
	// on a link, Enter in a form). See CanNavigate.
	MayNavigate Trait
	// WithDialog tools work while a dialog waits for an answer: they
	// answer it, navigate away (answering it first), or need nothing from
	// the page's JavaScript.
	WithDialog bool
	// Secrets are the request fields that may hold {{secrets.NAME}}.
	Secrets Secrets
	// Storage: the call reads or writes saved storage (storage_save).
	Storage Trait
	// Wait returns how long the call itself asks to wait in milliseconds,
	// which its caller's deadline is extended by (nil: no wait).
	Wait func(req *browserv1.ToolRequest) int64
	// MaxChars is the default cap of the text the tool returns; a tool
	// with one takes max_chars.
	MaxChars int64
	// Level is the layer of the worker that handles the tool.
	Level Level

	// Params are the tool's own arguments; Params() adds the session one.
	params []Param
	build  func(Args) (*browserv1.ToolRequest, error)
	login  func(Args) (*signerv1.Login, error)
}

// Call is a checked tool call, ready to be sent to a worker once its
// SessionId is filled in.
type Call struct {
	Request *browserv1.ToolRequest
	// Login is the signer request of login and switch_identity, ready to
	// be sent once its Scope is filled in. SECRET: never log it.
	Login *signerv1.Login
	// Session is the explicit session handle argument, "" when absent.
	Session string
	// Profile is the base profile a new browser session starts from
	// (open's profile argument), "" for none.
	Profile string
}

// ProfileParam is open's argument naming a base profile.
const ProfileParam = "profile"

// Params returns the tool's parameters, the session handle last.
func (t Tool) Params() []Param {
	if t.Local {
		return append([]Param(nil), t.params...)
	}
	return append(append([]Param(nil), t.params...), sessionParam)
}

// Parse checks raw arguments (a decoded JSON object) and builds the request.
// A bad argument is an *ArgError whose message names it.
func (t Tool) Parse(raw any) (Call, error) {
	args, err := check(t.Params(), raw)
	if err != nil {
		return Call{}, err
	}
	if t.Local {
		return Call{}, nil
	}
	if t.Identity {
		c := Call{Session: args.str(SessionParam)}
		if t.login != nil {
			if c.Login, err = t.login(args); err != nil {
				return Call{}, err
			}
		}
		return c, nil
	}
	req, err := t.build(args)
	if err != nil {
		return Call{}, err
	}
	return Call{Request: req, Session: args.str(SessionParam), Profile: strings.TrimSpace(args.str(ProfileParam))}, nil
}

// Tools returns the catalog in its documented order.
func Tools() []Tool { return append([]Tool(nil), tools...) }

// Lookup returns the tool called name.
func Lookup(name string) (Tool, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// LighthouseExtraMs is how much longer than other tools lighthouse_audit
// may take: a navigation audit loads the page and runs Lighthouse's
// gatherers, usually 3-10 s; a slow page takes longer.
const LighthouseExtraMs = 30000

// Wait returns how long req itself asks to wait in milliseconds (its
// tool's Wait: wait's ms, wait_for's timeout, lighthouse_audit's
// LighthouseExtraMs), so that the caller can extend its deadline by it.
func Wait(req *browserv1.ToolRequest) int64 {
	if t, ok := ForRequest(req); ok && t.Wait != nil {
		return t.Wait(req)
	}
	return 0
}

var sessionParam = Param{
	Name: SessionParam, Type: String,
	// The server's instructions and docs/tools.md say more; this text is
	// in every browser tool's schema, so it stays short.
	Description: "Browser session handle (sov_…) from an earlier result; omit it to use your MCP session's own, or to open a new one",
}

func bound(n int64) *int64 { return &n }

// elementParams are the arguments of every tool that acts on one element.
func elementParams(what string) []Param {
	return []Param{
		{Name: "ref", Type: String, Description: "Element ref from the latest snapshot, e.g. e5" + what},
		{Name: "target", Type: String, Description: "Alias of ref"},
		{Name: "selector", Type: String, Description: "CSS selector, when there is no ref"},
	}
}

// element reads ref/target/selector: exactly one element must be named.
func element(a Args, required bool) (*browserv1.Element, error) {
	ref, target, sel := a.str("ref"), a.str("target"), a.str("selector")
	ref, target = strings.TrimPrefix(strings.TrimSpace(ref), "@"), strings.TrimPrefix(strings.TrimSpace(target), "@")
	if ref != "" && target != "" && ref != target {
		return nil, &ArgError{Arg: "target", Msg: fmt.Sprintf("is an alias of ref, but ref is %q and target is %q: give one of them", ref, target)}
	}
	if ref == "" {
		ref = target
	}
	switch {
	case ref != "" && sel != "":
		return nil, &ArgError{Msg: "give either ref (or target) or selector, not both"}
	case ref != "":
		if strings.ContainsAny(ref, " #.[>:") {
			return nil, &ArgError{Arg: "ref", Msg: fmt.Sprintf("%q is not a snapshot ref (refs look like e5); pass CSS as selector", ref)}
		}
		return &browserv1.Element{By: &browserv1.Element_Ref{Ref: ref}}, nil
	case strings.TrimSpace(sel) != "":
		return &browserv1.Element{By: &browserv1.Element_Selector{Selector: sel}}, nil
	case required:
		return nil, &ArgError{Msg: "say which element: give ref (e.g. e5 from snapshot) or selector (CSS)"}
	}
	return nil, nil
}

func requireElement(a Args) (*browserv1.Element, error) { return element(a, true) }

func nonEmpty(a Args, name string) (string, error) {
	s := a.str(name)
	if strings.TrimSpace(s) == "" {
		return "", argErr(name, "must not be empty")
	}
	return s, nil
}

func noArgs(set func(*browserv1.ToolRequest, *browserv1.NoArgs)) func(Args) (*browserv1.ToolRequest, error) {
	return func(Args) (*browserv1.ToolRequest, error) {
		r := &browserv1.ToolRequest{}
		set(r, &browserv1.NoArgs{})
		return r, nil
	}
}

func elementTool(set func(*browserv1.ToolRequest, *browserv1.Element)) func(Args) (*browserv1.ToolRequest, error) {
	return func(a Args) (*browserv1.ToolRequest, error) {
		el, err := requireElement(a)
		if err != nil {
			return nil, err
		}
		r := &browserv1.ToolRequest{}
		set(r, el)
		return r, nil
	}
}

func fillTool(set func(*browserv1.ToolRequest, *browserv1.Fill)) func(Args) (*browserv1.ToolRequest, error) {
	return func(a Args) (*browserv1.ToolRequest, error) {
		el, err := requireElement(a)
		if err != nil {
			return nil, err
		}
		r := &browserv1.ToolRequest{}
		set(r, &browserv1.Fill{Element: el, Value: a.str("value"), Submit: a.boolean("submit")})
		return r, nil
	}
}

// tools is the catalog: the identity tools (login.go), then the browser
// tools, the form, pointer and reading tools (forms.go), the developer
// tools (devtools.go), the performance and memory tools (perf.go), the
// dialog, file and download tools (files.go), then the agent tools
// (agent.go), then the system tools (system.go).
var tools = derive(slices.Concat(identityTools, browserTools, formTools, devtoolsTools, perfTools, storageTools, filesTools, agentTools, systemTools))

var browserTools = []Tool{
	// Navigation.
	{
		Name: "open", Title: "Open URL",
		Acts: Always, Navigates: Always, WithDialog: true, Storage: func(r *browserv1.ToolRequest) bool { return r.GetOpen().GetStorage() != "" },
		Secrets:     Secrets{URL: true, In: openURL},
		Description: "Navigate the active tab to a URL and wait for the page to load.",
		params: []Param{
			{Name: "url", Type: String, Required: true, Description: "Absolute URL to load, e.g. https://example.com"},
			{Name: ProfileParam, Type: String, Description: "Start the browser session from this base profile: a logged-in " +
				"template the operator deployed (cookies and site storage; each session gets a private copy). Only when this " +
				"call opens the browser session (the first browser call of an MCP session, or a call without a session handle)."},
			storageParam,
			dialogsParam,
		},
		build: withDialogs(func(a Args) (*browserv1.ToolRequest, error) {
			u, err := nonEmpty(a, "url")
			if err != nil {
				return nil, err
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: strings.TrimSpace(u),
				Storage: strings.TrimSpace(a.str("storage"))}}}, nil
		}),
	},
	{
		Name: "back", Title: "Go back", Description: "Go back in the active tab's history.",
		Acts: Always, Navigates: Always, WithDialog: true,
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) { r.Tool = &browserv1.ToolRequest_Back{Back: n} }),
	},
	{
		Name: "forward", Title: "Go forward", Description: "Go forward in the active tab's history.",
		Acts: Always, Navigates: Always, WithDialog: true,
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_Forward{Forward: n}
		}),
	},
	{
		Name: "reload", Title: "Reload", Description: "Reload the current page (bypassing the cache).",
		Acts: Always, Navigates: Always, WithDialog: true,
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) { r.Tool = &browserv1.ToolRequest_Reload{Reload: n} }),
	},
	{
		Name: "get_url", Title: "Get URL", ReadOnly: true, Description: "Get the current URL of the active tab.",
		WithDialog: true,
		build:      noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) { r.Tool = &browserv1.ToolRequest_GetUrl{GetUrl: n} }),
	},
	{
		Name: "get_title", Title: "Get title", ReadOnly: true, Description: "Get the page title of the active tab.",
		WithDialog: true,
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_GetTitle{GetTitle: n}
		}),
	},

	// Snapshot and inspection.
	{
		Name: "snapshot", Title: "Accessibility snapshot", ReadOnly: true,
		MaxChars: SnapshotChars,
		Description: "Get the accessibility tree of the current page as ARIA YAML with element refs " +
			"(`- button \"Save\" [ref=e5]`) and a ref map. Pass a ref (e5 or @e5) to click, fill and the other " +
			"element tools. Take a new snapshot after navigation or page changes: refs describe the page as it was. " +
			"In interactive mode a control without a name takes one from where it sits (its list item, row, label " +
			"or the nearest heading): `- checkbox \"walk dog\" [ref=e38]`. Pass ref to see only one element's " +
			"subtree; a snapshot longer than max_chars is cut at an element boundary with a marker naming the ref " +
			"to ask for next. Rows are named by their cells, with their controls under them; a container with " +
			"many rows or list items shows the first 50 and a line counting the rest. Pass find to locate " +
			"something on a big page: only the lines of the full tree that hold that text, with the elements that hold them.",
		params: []Param{
			{Name: "interactive", Type: Boolean, Default: true, Description: "Only show interactive elements (links, buttons, inputs)"},
			{Name: "compact", Type: Boolean, Default: true, Description: "Remove empty structural elements"},
			{Name: "ref", Type: String, Description: "Only the subtree of this element (a ref from an earlier snapshot, e.g. e12)"},
			{Name: "find", Type: String, Description: "Only the lines that hold this text (case-insensitive) or match /regex/, " +
				"searched in the full tree (interactive is ignored), each with the elements that hold it, its first children and its neighbours; at most 50 matches are shown"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			ref := strings.TrimPrefix(strings.TrimSpace(a.str("ref")), "@")
			if strings.ContainsAny(ref, " #.[>:") {
				return nil, &ArgError{Arg: "ref", Msg: fmt.Sprintf("%q is not a snapshot ref (refs look like e5)", ref)}
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{
				Interactive: a.boolean("interactive"), Compact: a.boolean("compact"), Ref: ref, Find: a.str("find"),
			}}}, nil
		},
	},
	{
		Name: "get_text", Title: "Get text", ReadOnly: true,
		MaxChars:    TextChars,
		Description: "Get the text content of an element, named by ref (or target) or CSS selector.",
		params:      elementParams(""),
		build: elementTool(func(r *browserv1.ToolRequest, e *browserv1.Element) {
			r.Tool = &browserv1.ToolRequest_GetText{GetText: e}
		}),
	},
	{
		Name: "get_html", Title: "Get HTML", ReadOnly: true,
		MaxChars:    TextChars,
		Description: "Get the inner HTML of an element, named by ref (or target) or CSS selector.",
		params:      elementParams(""),
		build: elementTool(func(r *browserv1.ToolRequest, e *browserv1.Element) {
			r.Tool = &browserv1.ToolRequest_GetHtml{GetHtml: e}
		}),
	},
	{
		Name: "get_attr", Title: "Get attribute", ReadOnly: true,
		Description: "Get an attribute of an element, named by ref (or target) or CSS selector.",
		params: append(elementParams(""),
			Param{Name: "attr", Type: String, Required: true, Description: "Attribute name, e.g. href, src, class"}),
		build: func(a Args) (*browserv1.ToolRequest, error) {
			el, err := requireElement(a)
			if err != nil {
				return nil, err
			}
			attr, err := nonEmpty(a, "attr")
			if err != nil {
				return nil, err
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetAttr{GetAttr: &browserv1.GetAttr{Element: el, Attr: attr}}}, nil
		},
	},
	{
		Name: "get_styles", Title: "Get styles", ReadOnly: true,
		MaxChars: TextChars,
		Description: "Why an element looks the way it does: its computed style (the properties named, or a default set " +
			"on layout and paint), the author CSS rules that match it, in cascade order, with its inline style, and the " +
			"properties that inherit from its ancestors' rules.",
		params: append(elementParams(""),
			Param{Name: "properties", Type: String, Description: "Computed properties to show, comma-separated (e.g. \"color, margin-top, --brand\"); " +
				"omit for a default set (display, position, size, margins, colors, font, flex and grid, …)"},
			Param{Name: "rules", Type: Boolean, Default: true, Description: "Also list the author CSS rules that match the element"}),
		build: func(a Args) (*browserv1.ToolRequest, error) {
			el, err := requireElement(a)
			if err != nil {
				return nil, err
			}
			var props []string
			for p := range strings.SplitSeq(a.str("properties"), ",") {
				if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
					props = append(props, p)
				}
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetStyles{GetStyles: &browserv1.GetStyles{
				Element: el, Properties: props, Rules: a.boolean("rules"),
			}}}, nil
		},
	},
	{
		Name: "eval", Title: "Run JavaScript",
		MaxChars: TextChars,
		Description: "Run JavaScript in the current page and return its result (a returned promise is awaited). " +
			"Use it for inspection or interaction the other tools do not cover. With ref or selector, script is a " +
			"function that receives the element: (el) => el.value.",
		params: append([]Param{{Name: "script", Type: String, Required: true, Description: "JavaScript expression or statements " +
			"to run; with an element, a function that receives it: (el) => el.textContent"}},
			elementParams("; script is then a function called with this element")...),
		build: func(a Args) (*browserv1.ToolRequest, error) {
			s, err := nonEmpty(a, "script")
			if err != nil {
				return nil, err
			}
			el, err := element(a, false)
			if err != nil {
				return nil, err
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Eval{Eval: &browserv1.Eval{Script: s, Element: el}}}, nil
		},
	},

	// Interaction.
	{
		Name: "click", Title: "Click",
		Acts: Always, MayNavigate: Always,
		Description: "Click an element, named by ref (or target) or CSS selector: with the left button by default, " +
			"or right (context menu) or middle; click_count 2 double-clicks (dblclick fires); modifiers are held during the click.",
		params: append(elementParams(""),
			Param{Name: "button", Type: String, Default: "left", Enum: MouseButtons, Description: "Mouse button"},
			Param{Name: "click_count", Type: Integer, Default: 1, Min: bound(1), Max: bound(MaxClickCount), Description: "1 for a click, 2 for a double click"},
			Param{Name: "modifiers", Type: Array, Items: &Param{Type: String, Enum: modifierKeys}, MaxItems: len(modifierKeys),
				Description: "Keys held during the click, e.g. [\"Shift\"] or [\"Control\"] (Meta is Command on a Mac)"}),
		build: func(a Args) (*browserv1.ToolRequest, error) {
			el, err := requireElement(a)
			if err != nil {
				return nil, err
			}
			// The defaults travel as zero values: a plain click stays a
			// plain request.
			c := &browserv1.Click{Element: el, Modifiers: a.strings("modifiers")}
			if b := a.str("button"); b != "left" {
				c.Button = b
			}
			if n, _ := a.integer("click_count"); n > 1 {
				c.ClickCount = int32(n)
			}
			if len(c.Modifiers) == 0 {
				c.Modifiers = nil
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: c}}, nil
		},
	},
	{
		Name: "fill", Title: "Fill input", TypesText: true,
		Acts: Always, MayNavigate: func(r *browserv1.ToolRequest) bool { return r.GetFill().GetSubmit() }, // Enter submits the form
		Secrets: Secrets{In: fillValue},
		Description: "Clear an input and fill it with a value. It succeeds when the field took the text, whatever " +
			"the page then does with it (an app that adds an item on change and empties the field is fine: the result " +
			"says what the field holds now); it fails, naming the cause, only when the field cannot take text (disabled, " +
			"read-only, not editable, gone, a number field given something that is not a number, or no input event at all).",
		params: append(elementParams(""), Param{Name: "value", Type: String, Required: true, Description: "Text to put in the input (empty clears it)"}, submitParam),
		build:  fillTool(func(r *browserv1.ToolRequest, f *browserv1.Fill) { r.Tool = &browserv1.ToolRequest_Fill{Fill: f} }),
	},
	{
		Name: "type", Title: "Type text", Description: "Type text into an element with key events (appends to its current value).", TypesText: true,
		Acts: Always, MayNavigate: func(r *browserv1.ToolRequest) bool { return r.GetType().GetSubmit() }, // Enter submits the form
		Secrets: Secrets{In: typeValue},
		params:  append(elementParams(""), Param{Name: "value", Type: String, Required: true, Description: "Text to type"}, submitParam),
		build:   fillTool(func(r *browserv1.ToolRequest, f *browserv1.Fill) { r.Tool = &browserv1.ToolRequest_Type{Type: f} }),
	},
	{
		Name: "press", Title: "Press key",
		Acts: Always, MayNavigate: Always,
		Description: "Press a keyboard key in the focused element, e.g. Enter, Tab, Escape, ArrowDown. action down holds " +
			"the key (a held Shift, Control, Alt or Meta also applies to later key presses, clicks and mouse actions) until action up.",
		params: []Param{
			{Name: "key", Type: String, Required: true, Description: "Key name, e.g. Enter, Tab, Escape, ArrowDown, a"},
			{Name: "action", Type: String, Default: "press", Enum: []string{"press", "down", "up"}, Description: "press (down and up), or only down or up"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			k, err := nonEmpty(a, "key")
			if err != nil {
				return nil, err
			}
			action := a.str("action")
			if action == "press" {
				action = ""
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Press{Press: &browserv1.Press{Key: k, Action: action}}}, nil
		},
	},
	{
		Name: "scroll", Title: "Scroll", Description: "Scroll the page in a direction.",
		params: []Param{
			{Name: "direction", Type: String, Required: true, Enum: []string{"up", "down", "left", "right"}, Description: "Direction to scroll"},
			{Name: "amount", Type: Integer, Default: 500, Min: bound(1), Max: bound(100000), Description: "Distance in CSS pixels"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			n, _ := a.integer("amount")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Scroll{Scroll: &browserv1.Scroll{Direction: a.str("direction"), Amount: int32(n)}}}, nil
		},
	},
	{
		Name: "hover", Title: "Hover", Description: "Move the mouse over an element, named by ref (or target) or CSS selector.",
		params: elementParams(""),
		build:  elementTool(func(r *browserv1.ToolRequest, e *browserv1.Element) { r.Tool = &browserv1.ToolRequest_Hover{Hover: e} }),
	},
	{
		Name: "focus", Title: "Focus", Description: "Focus an element, named by ref (or target) or CSS selector.",
		params: elementParams(""),
		build:  elementTool(func(r *browserv1.ToolRequest, e *browserv1.Element) { r.Tool = &browserv1.ToolRequest_Focus{Focus: e} }),
	},
	{
		Name: "close", Title: "Close tab", Description: "Close the active tab.",
		Level: OnSession,
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) { r.Tool = &browserv1.ToolRequest_Close{Close: n} }),
	},

	// Tabs.
	{
		Name: "tab_list", Title: "List tabs", ReadOnly: true, Description: "List the open tabs with their index, URL and title; the active one is marked.",
		Level: OnSession,
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_TabList{TabList: n}
		}),
	},
	{
		Name: "tab_new", Title: "New tab", Description: "Open a new tab, optionally loading a URL, and make it active.",
		Acts: Always, Level: OnSession, Storage: func(r *browserv1.ToolRequest) bool { return r.GetTabNew().GetStorage() != "" },
		Secrets: Secrets{URL: true, In: tabNewURL},
		params:  []Param{{Name: "url", Type: String, Description: "URL to load in the new tab (default: a blank page)"}, storageParam, dialogsParam},
		build: withDialogs(func(a Args) (*browserv1.ToolRequest, error) {
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{Url: strings.TrimSpace(a.str("url")),
				Storage: strings.TrimSpace(a.str("storage"))}}}, nil
		}),
	},
	{
		Name: "tab_switch", Title: "Switch tab", Description: "Make the tab at an index (from tab_list) the active one.",
		Level:  OnSession,
		params: []Param{{Name: "index", Type: Integer, Required: true, Min: bound(0), Description: "Tab index from tab_list (0 is the first tab)"}},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			n, _ := a.integer("index")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabSwitch{TabSwitch: &browserv1.TabIndex{Index: int32(n), HasIndex: true}}}, nil
		},
	},
	{
		Name: "tab_close", Title: "Close tab by index", Description: "Close the tab at an index (from tab_list); without an index, close the active tab.",
		Level:  OnSession,
		params: []Param{{Name: "index", Type: Integer, Min: bound(0), Description: "Tab index from tab_list (default: the active tab)"}},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			n, has := a.integer("index")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabClose{TabClose: &browserv1.TabIndex{Index: int32(n), HasIndex: has}}}, nil
		},
	},

	// Waiting.
	{
		Name: "wait", Title: "Wait", ReadOnly: true, Description: "Wait for a number of milliseconds (at most one minute; to wait for something to appear, use wait_for).",
		WithDialog: true, Wait: func(r *browserv1.ToolRequest) int64 { return int64(r.GetWait().GetMs()) },
		params: []Param{{Name: "ms", Type: Integer, Default: 1000, Min: bound(0), Max: bound(60000), Description: "Milliseconds to wait"}},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			n, _ := a.integer("ms")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Wait{Wait: &browserv1.Wait{Ms: int32(n)}}}, nil
		},
	},
	{
		Name: "wait_for", Title: "Wait for a condition", ReadOnly: true,
		Wait: func(r *browserv1.ToolRequest) int64 { return int64(r.GetWaitFor().GetTimeoutMs()) },
		Description: "Wait until one condition holds: an element matching a CSS selector is visible, a text is visible " +
			"on the page, a text is gone from it, or the page's URL contains a text (or matches a glob with * and ?).",
		params: []Param{
			{Name: "selector", Type: String, Description: "CSS selector of an element to wait for"},
			{Name: "text", Type: String, Description: "Text to wait for (visible on the page, case-insensitive)"},
			{Name: "text_gone", Type: String, Description: "Text to wait to disappear from the page (case-insensitive)"},
			{Name: "url", Type: String, Description: "Part of the URL to wait for, or a glob of the whole URL (* within a path segment, ** across, ?)"},
			{Name: "timeout", Type: Integer, Default: 10000, Min: bound(1), Max: bound(600000), Description: "Milliseconds to wait before giving up"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			w := &browserv1.WaitFor{Selector: a.str("selector"), Text: a.str("text"), TextGone: a.str("text_gone"), Url: a.str("url")}
			n := 0
			for _, name := range []string{"selector", "text", "text_gone", "url"} {
				if _, ok := a[name]; ok {
					if _, err := nonEmpty(a, name); err != nil {
						return nil, err
					}
					n++
				}
			}
			if n != 1 {
				return nil, &ArgError{Msg: "give exactly one condition: selector, text, text_gone or url"}
			}
			t, _ := a.integer("timeout")
			w.TimeoutMs = int32(t)
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_WaitFor{WaitFor: w}}, nil
		},
	},

	// Screenshot.
	{
		Name: "screenshot", Title: "Screenshot", ReadOnly: true,
		Description: "Take a screenshot of the viewport, the full page or one element; returned as image content.",
		params: append([]Param{
			{Name: "format", Type: String, Default: "png", Enum: []string{"png", "jpeg"}, Description: "Image format"},
			{Name: "quality", Type: Integer, Default: 80, Min: bound(1), Max: bound(100), Description: "JPEG quality (jpeg only)"},
			{Name: "full_page", Type: Boolean, Default: false, Description: "Capture the whole scrollable page, not just the viewport"},
		}, elementParams("; only this element is captured")...),
		build: func(a Args) (*browserv1.ToolRequest, error) {
			el, err := element(a, false)
			if err != nil {
				return nil, err
			}
			if el != nil && a.boolean("full_page") {
				return nil, &ArgError{Arg: "full_page", Msg: "cannot be combined with an element (ref, target or selector)"}
			}
			q, _ := a.integer("quality")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Screenshot{Screenshot: &browserv1.Screenshot{
				Format: a.str("format"), Quality: int32(q), FullPage: a.boolean("full_page"), Element: el,
			}}}, nil
		},
	},
	{
		Name: "blocked_requests", Title: "Blocked requests", ReadOnly: true,
		Level: OnSession,
		Description: "List the requests the session's URL policy blocked (navigations, frames, scripts, fetch/XHR, " +
			"websockets, popups), newest last, each with the rule that blocked it.",
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_BlockedRequests{BlockedRequests: n}
		}),
	},
	{
		Name: "secrets_list", Title: "List secrets", ReadOnly: true, Local: true,
		Description: "List the names of the secrets the operator stored (never their values). Use a secret as " +
			"{{secrets.NAME}} in the value of fill or type, or in a URL for open or tab_new: the browser worker puts " +
			"the value in at the last moment, and any value that shows up in a result comes back as its placeholder.",
	},
	{
		Name: "sovereign__list_scripts", Title: "List script tools", ReadOnly: true, Local: true,
		Description: "List the operator's script tools (JavaScript, deployed to the fleet): each script with the tools it " +
			"serves, or why it did not load.",
	},
	{
		Name: "sovereign__reload", Title: "Reload deployed tools", Local: true,
		Description: "Reload what the operator deployed: scripts (the tools directory and the fleet's script store), " +
			"profiles, or all. Connected clients get notifications/tools/list_changed when the tools change. If the " +
			"scripts cannot be read, the tools served before are kept and the error says so.",
		params: []Param{
			{Name: "target", Type: String, Enum: []string{"scripts", "profiles", "all"}, Description: "What to reload (default scripts)."},
			{Name: "name", Type: String, Description: "Only this script (its file stem), with target scripts or all."},
		},
	},
}

// settleDoc ends the description of every acting tool (derive).
const settleDoc = " Returns once the page has settled, with a line on each thing that changed (URL, title, tabs, dialogs, errors)."

var settleParams = []Param{
	{Name: "settle_ms", Type: Integer, Min: bound(0), Max: bound(60000), Description: "Longest wait in ms for the page to " +
		"settle (default 3000; 0: do not wait); an unsettled page is not an error"},
	{Name: "snapshot", Type: String, Enum: []string{"false", "true", "diff"}, AcceptBool: true, Default: "false",
		Description: "Also return the settled page's snapshot: true, or \"diff\" for the lines changed since the last one"},
}

func maxCharsParam(def int64) Param {
	return Param{Name: "max_chars", Type: Integer, Min: bound(1), Max: bound(MaxChars),
		Description: fmt.Sprintf("Most characters of text to return (default %d); longer text is cut with a marker "+
			"that says how much was left out and how to see the rest", def)}
}

// settling adds settle_ms and snapshot to the requests that build makes.
func settling(build func(Args) (*browserv1.ToolRequest, error)) func(Args) (*browserv1.ToolRequest, error) {
	return func(a Args) (*browserv1.ToolRequest, error) {
		req, err := build(a)
		if err != nil {
			return nil, err
		}
		if n, ok := a.integer("settle_ms"); ok {
			ms := int32(n)
			req.SettleMs = &ms
		}
		switch a.str("snapshot") {
		case "true":
			req.SnapshotAfter = browserv1.SnapshotAfter_SNAPSHOT_AFTER_FULL
		case "diff":
			req.SnapshotAfter = browserv1.SnapshotAfter_SNAPSHOT_AFTER_DIFF
		}
		return req, nil
	}
}

// capping adds max_chars to the requests that build makes.
func capping(build func(Args) (*browserv1.ToolRequest, error)) func(Args) (*browserv1.ToolRequest, error) {
	return func(a Args) (*browserv1.ToolRequest, error) {
		req, err := build(a)
		if err != nil {
			return nil, err
		}
		if n, ok := a.integer("max_chars"); ok {
			req.MaxChars = int32(n)
		}
		return req, nil
	}
}
