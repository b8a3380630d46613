package page

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// elem is an element that a tool acts on.
type elem struct {
	// what names it in messages: `ref e5` or `selector "#x"`.
	what string
	// prefix is the ref prefix of its frame: "" or "f1".
	prefix string
	obj    runtime.RemoteObjectID
}

// refPattern matches a snapshot ref: e5, or f1e2 for frame 1.
var refPattern = regexp.MustCompile(`^(?:f(\d+))?e(\d+)$`)

// resolve finds the element that el names, by ref or CSS selector, as a
// remote object of Sovereign's world.
func (t *Tab) resolve(ctx context.Context, el *browserv1.Element, tool string) (*elem, error) {
	at, err := t.elementAt(el, tool)
	if err != nil {
		return nil, err
	}
	var obj runtime.RemoteObjectID
	if at.ref != "" {
		obj, err = jsEl(ctx, t, at.frame, at.target.Ref)
		if isJSError(err) || isFrameGone(err) {
			return nil, staleRef(at.ref)
		}
	} else {
		obj, err = jsQuery(ctx, t, at.target.Selector)
		if je, ok := asJSError(err); ok {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "selector %q is not valid CSS: %s", at.target.Selector, firstLines(je.Error(), 1))
		}
	}
	switch {
	case err != nil:
		return nil, err
	case obj == "" && at.ref != "":
		return nil, staleRef(at.ref)
	case obj == "":
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no element matches selector %q", at.target.Selector)
	}
	return &elem{what: at.what, prefix: at.prefix, obj: obj}, nil
}

// elementAt is an element that a tool names, parsed but not yet found: the
// frame to look in and what call.js looks for there.
type elementAt struct {
	frame  cdp.FrameID
	target jsTarget
	// what names the element in messages ("ref e5", `selector "#a"`);
	// prefix is the ref prefix of its frame ("" or "f1").
	what, prefix string
	// ref is the cleaned ref, "" for a selector.
	ref string
}

// elementAt parses the element that el names, for tool's messages.
func (t *Tab) elementAt(el *browserv1.Element, tool string) (elementAt, error) {
	switch ref, sel := strings.TrimSpace(el.GetRef()), strings.TrimSpace(el.GetSelector()); {
	case ref != "":
		num, id, err := parseRef(ref)
		if err != nil {
			return elementAt{}, err
		}
		f, ok := t.frames.byNum(num)
		if !ok {
			return elementAt{}, staleRef(cleanRef(ref))
		}
		a := elementAt{frame: f, target: jsTarget{Ref: id}, what: "ref " + cleanRef(ref), ref: cleanRef(ref)}
		if num > 0 {
			a.prefix = "f" + strconv.Itoa(num)
		}
		return a, nil
	case sel != "":
		return elementAt{frame: t.frames.main(), target: jsTarget{Selector: sel}, what: fmt.Sprintf("selector %q", sel)}, nil
	}
	return elementAt{}, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s needs ref (from snapshot), target or selector", tool)
}

// cleanRef strips what models tend to wrap refs in: @e5, ref=e5, [ref=e5].
func cleanRef(ref string) string {
	ref = strings.Trim(strings.TrimSpace(ref), "[]")
	ref = strings.TrimPrefix(ref, "ref=")
	return strings.TrimPrefix(ref, "@")
}

// parseRef splits a snapshot ref into its frame number and element number.
func parseRef(raw string) (frame int, n int64, err error) {
	ref := cleanRef(raw)
	m := refPattern.FindStringSubmatch(ref)
	if m == nil {
		return 0, 0, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%q is not a snapshot ref; refs look like e5 or f1e2 (take them from snapshot)", raw)
	}
	if m[1] != "" {
		frame, _ = strconv.Atoi(m[1])
	}
	n, _ = strconv.ParseInt(m[2], 10, 64)
	return frame, n, nil
}

func staleRef(ref string) error {
	return bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "ref %s is not in the current page; take a new snapshot", ref)
}

func isJSError(err error) bool {
	_, ok := asJSError(err)
	return ok
}

// isFrameGone reports whether err says that a frame no longer exists.
func isFrameGone(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "no frame")
}

// getText returns the text of an element (innerText, or the value of a
// form field), cut at the call's character cap.
func (t *Tab) getText(ctx context.Context, el *browserv1.Element) (*browserv1.ToolResult, error) {
	return t.readCut(ctx, el, "get_text", jsText,
		"read a smaller element (a ref from snapshot), or pass a larger max_chars")
}

// getHTML returns the innerHTML of an element, cut at the call's
// character cap.
func (t *Tab) getHTML(ctx context.Context, el *browserv1.Element) (*browserv1.ToolResult, error) {
	return t.readCut(ctx, el, "get_html", jsHTML,
		"ask for a smaller element (a ref from snapshot or a narrower selector), or pass a larger max_chars")
}

// readCut reads the text that read returns for an element, cut by the
// page at the call's cap so that a huge text never leaves it.
func (t *Tab) readCut(ctx context.Context, el *browserv1.Element, tool string, read func(context.Context, *Tab, elementAt, int) (pageText, error), how string) (*browserv1.ToolResult, error) {
	limit := t.capChars(DefaultTextChars)
	room := readRoom(limit)
	at, err := t.elementAt(el, tool)
	if err != nil {
		return nil, err
	}
	r, err := read(ctx, t, at, room)
	if err != nil {
		return nil, err
	}
	text, cut := cutRead(r.S, limit, r.Total > room)
	if cut {
		return textResult("%s%s", text, cutMarker(limit, r.Total, how)), nil
	}
	if tool == "get_text" {
		text = strings.TrimSpace(text)
	}
	return textResult("%s", text), nil
}

// getAttr returns the value of an attribute of an element.
func (t *Tab) getAttr(ctx context.Context, el *browserv1.Element, name string) (*browserv1.ToolResult, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "get_attr needs attr, the name of the attribute (such as href, src or class)")
	}
	at, err := t.elementAt(el, "get_attr")
	if err != nil {
		return nil, err
	}
	v, err := jsAttr(ctx, t, at, name)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "the element at %s has no attribute %q", at.what, name)
	}
	return textResult("%s", *v), nil
}

// focus focuses an element.
func (t *Tab) focus(ctx context.Context, el *browserv1.Element) (*browserv1.ToolResult, error) {
	at, err := t.elementAt(el, "focus")
	if err != nil {
		return nil, err
	}
	r, err := jsFocus(ctx, t, at)
	if err != nil {
		return nil, err
	}
	desc := t.frames.noteDesc(r.Desc)
	if !r.OK {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s (%s) cannot take focus; focus works on links, buttons, form fields and elements with tabindex", at.what, desc)
	}
	return textResult("Focused %s", desc), nil
}

// pointInfo is what page.js's point says about an element.
type pointInfo struct {
	Gone    bool    `json:"gone"`
	Desc    string  `json:"desc"`
	Covered string  `json:"covered"`
	W       float64 `json:"w"`
	H       float64 `json:"h"`
	// X, Y are the centre of the bounding box in the frame's viewport;
	// OneBox says the element has a single layout box.
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	OneBox bool    `json:"oneBox"`
}

// locate scrolls the element that el names into view and returns the point
// to press. The common case (main frame, one layout box) takes one round
// trip by value; an element in an iframe or with several boxes is measured
// through a remote object and DOM.getContentQuads.
func (t *Tab) locate(ctx context.Context, el *browserv1.Element, tool string) (x, y float64, info pointInfo, err error) {
	at, err := t.elementAt(el, tool)
	if err != nil {
		return 0, 0, info, err
	}
	if info, err = jsPoint(ctx, t, at); err != nil {
		return 0, 0, info, err
	} else if at.prefix == "" && !info.Gone && info.OneBox && info.W >= 1 && info.H >= 1 {
		info.Desc, info.Covered = t.frames.noteDesc(info.Desc), t.frames.noteDesc(info.Covered)
		return info.X, info.Y, info, nil
	}
	e, err := t.resolve(ctx, el, tool)
	if err != nil {
		return 0, 0, info, err
	}
	return t.pointAt(ctx, e)
}

// pointAt scrolls e into view and returns the centre of its first visible
// box in the coordinates of the main frame's viewport (DOM.getContentQuads
// adds the offsets of the iframes that hold it).
func (t *Tab) pointAt(ctx context.Context, e *elem) (x, y float64, info pointInfo, err error) {
	info, err = jsPointOn(ctx, e)
	if err != nil {
		return 0, 0, info, err
	}
	if info.Gone {
		return 0, 0, info, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s is no longer in the page; take a new snapshot", e.what)
	}
	info.Desc, info.Covered = t.frames.noteDesc(info.Desc), t.frames.noteDesc(info.Covered)
	// page.js scrolled e into view in its frame and in the same-origin
	// frames around it; a cross-origin frame cannot see its parent, so
	// the browser scrolls what is still needed (a frame below the fold).
	// Best effort: an element with no box fails below.
	_, _ = chromedp.Call(ctx, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{ObjectID: e.obj})
	q, err := chromedp.Call(ctx, dom.GetContentQuads, dom.GetContentQuadsParams{ObjectID: e.obj})
	if err == nil {
		for _, quad := range q.Quads {
			if x, y, ok := quadCenter(quad); ok {
				return x, y, info, nil
			}
		}
	}
	return 0, 0, info, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s (%s) is not visible: it has no box on the screen; take a new snapshot or scroll", e.what, info.Desc)
}

// quadCenter returns the centre of a quad with an area.
func quadCenter(q dom.Quad) (x, y float64, ok bool) {
	if len(q) != 8 {
		return 0, 0, false
	}
	area := 0.0
	for i := 0; i < 4; i++ {
		j := (i + 1) % 4
		area += q[2*i]*q[2*j+1] - q[2*j]*q[2*i+1]
	}
	if area < 0 {
		area = -area
	}
	if area < 1 {
		return 0, 0, false
	}
	return (q[0] + q[2] + q[4] + q[6]) / 4, (q[1] + q[3] + q[5] + q[7]) / 4, true
}

// hover moves the mouse to the centre of an element.
func (t *Tab) hover(ctx context.Context, el *browserv1.Element) (*browserv1.ToolResult, error) {
	x, y, info, err := t.locate(ctx, el, "hover")
	if err != nil {
		return nil, err
	}
	if err := mouse(ctx, x, y, input.DispatchMouseEventTypeMouseMoved); err != nil {
		return nil, err
	}
	msg := "Hovering over " + info.Desc
	if info.Covered != "" {
		msg += fmt.Sprintf(" — but %s covers its centre", info.Covered)
	}
	return textResult("%s", msg), nil
}

// mouse sends mouse events of the given types at x, y with the left button.
func mouse(ctx context.Context, x, y float64, types ...input.DispatchMouseEventType) error {
	for _, typ := range types {
		p := input.DispatchMouseEventParams{Type: typ, X: x, Y: y}
		if typ != input.DispatchMouseEventTypeMouseMoved {
			p.Button, p.Buttons, p.ClickCount = input.MouseButtonLeft, 1, 1
		}
		if _, err := chromedp.Call(ctx, input.DispatchMouseEvent, p); err != nil {
			return err
		}
	}
	return nil
}

// acted waits for the page to settle after an action (settle.go) and
// returns msg, with the new address when the action navigated to a new
// document.
func (t *Tab) acted(ctx context.Context, w *navWatch, msg string) (*browserv1.ToolResult, error) {
	r, err := t.settle(ctx, w, false)
	if err != nil {
		return nil, err
	}
	if !w.isCommitted() {
		return textResult("%s", msg), nil
	}
	u := r.URL
	if u == "" {
		if u, err = t.currentURL(ctx); err != nil {
			return textResult("%s", msg), nil
		}
	}
	msg += "; the page navigated to " + clipTo(u, maxURL)
	if r.Loading {
		msg += " (still loading)"
	}
	return textResult("%s", msg), nil
}

// inputPrep is what page.js's prepareInput says.
type inputPrep struct {
	Insert  bool     `json:"insert"`
	Done    bool     `json:"done"`
	Value   string   `json:"value"`
	Error   string   `json:"error"`
	Type    string   `json:"type"`
	Options []string `json:"options"`
	Desc    string   `json:"desc"`
	// Secret is what secret the field takes ("password", "one-time
	// code"), or "". The page never returns the value of such a field:
	// Value is empty and N is its number of characters.
	Secret string `json:"secret"`
	N      int    `json:"n"`
}

// filled is what page.js's finishFill says: the value now in the field
// (empty for a secret field) and its number of characters, whether the
// field took the inserted text (an input event fired), whether it is a
// number field left holding something that is not a number, and whether
// the page removed it.
type filled struct {
	Value     string `json:"value"`
	N         int    `json:"n"`
	Secret    string `json:"secret"`
	Accepted  bool   `json:"accepted"`
	BadNumber bool   `json:"badNumber"`
	Gone      bool   `json:"gone"`
}

// finish takes what finishFill said.
func (p *inputPrep) finish(f filled) {
	p.Value, p.N = f.Value, f.N
	if f.Secret != "" {
		p.Secret = f.Secret
	}
}

// shown is how messages show value, the text for a field: quoted, or
// only its length for a secret field.
func (p *inputPrep) shown(value string) string {
	if p.Secret != "" {
		return "the hidden value (" + characters(utf8.RuneCountInString(value)) + ")"
	}
	return strconv.Quote(value)
}

// hiddenNote says that the value of a secret field is hidden.
func (p *inputPrep) hiddenNote() string {
	return fmt.Sprintf("a %s field; its value is hidden, %s", p.Secret, characters(p.N))
}

// characters says n characters.
func characters(n int) string {
	if n == 1 {
		return "1 character"
	}
	return strconv.Itoa(n) + " characters"
}

// secretInputKey marks a call whose typed text holds an operator secret.
type secretInputKey struct{}

// WithSecretInput returns ctx for a fill, type or fill_form call whose
// text holds an operator secret's value (the worker substitutes
// placeholders before the call): the fields it types into draw their text
// as discs (CSS -webkit-text-security) before the text goes in, so no
// screenshot, screencast frame or PDF shows the value, which scrubbing
// cannot find in pixels.
func WithSecretInput(ctx context.Context) context.Context {
	return context.WithValue(ctx, secretInputKey{}, true)
}

func secretInput(ctx context.Context) bool {
	v, _ := ctx.Value(secretInputKey{}).(bool)
	return v
}

// sensitive marks res as the result of typing into a secret field, so
// that the call's text arguments are neither stored nor logged.
func sensitive(res *browserv1.ToolResult) *browserv1.ToolResult {
	res.SensitiveInput = true
	return res
}

// fill replaces the value of a form field (or contenteditable element) so
// that input and change events fire as if a user typed it, and with submit
// presses Enter in it afterwards, in the same settle. The value of a
// password field (see inputPrep.Secret) is not in the result, which says
// SensitiveInput.
//
// fill succeeds when the field took the text (an input event fired),
// whatever the page then does with the value: an app that adds an item
// on change and empties the field is fine, and the result says what the
// field holds now when that differs. It fails only when the field could
// not take text: disabled, read-only, not editable, detached, a number
// field given something that is not a number, or no input event at all.
func (t *Tab) fill(ctx context.Context, f *browserv1.Fill) (*browserv1.ToolResult, error) {
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	msg, secret, err := t.fillField(ctx, f.GetElement(), f.GetValue(), "fill")
	if err != nil {
		return nil, err
	}
	if f.GetSubmit() {
		if msg, err = t.submit(ctx, msg); err != nil {
			return nil, err
		}
	}
	res, err := t.acted(ctx, w, msg)
	if err == nil && secret {
		sensitive(res)
	}
	return res, err
}

// submit presses Enter in the focused element (the field just filled),
// as a person does to send a search or a form, and adds it to msg.
func (t *Tab) submit(ctx context.Context, msg string) (string, error) {
	t.call.inputAt = time.Now()
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		return "", err
	}
	return msg + "; then pressed Enter", nil
}

// fillField does the work of fill without settling: the caller watches
// for a navigation and settles once (fill, fill_form). It returns what to
// say and whether the field is a secret one.
func (t *Tab) fillField(ctx context.Context, el *browserv1.Element, value, tool string) (msg string, secret bool, err error) {
	// Three round trips and no remote object: find, describe and prepare
	// the field (focus it, select its text); insert the text as typing
	// would; fire change and read back what the field holds.
	at, err := t.elementAt(el, tool)
	if err != nil {
		return "", false, err
	}
	// A select or a date-like field takes its value in this first call.
	t.call.inputAt = time.Now()
	p, err := jsStartInput(ctx, t, at, value, "fill", t.call.secretInput)
	if err != nil {
		return "", false, err
	}
	what, prefix := at.what, at.prefix
	desc := t.frames.noteDesc(p.Desc)
	e := &elem{what: what, prefix: prefix}
	if err := inputError(p, e, desc, tool, value); err != nil {
		return "", false, err
	}
	var note string
	if p.Insert {
		t.call.inputAt = time.Now()
		if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: value}); err != nil {
			return "", false, err
		}
		// The field the text went to, not the ref again: the page may
		// have replaced the element by now.
		frame, _ := t.frames.byNum(frameOfPrefix(prefix))
		f, err := jsFinishFill(ctx, t, frame)
		if err != nil && !contextGone(err) && !isFrameGone(err) {
			return "", false, err
		}
		switch {
		case f.BadNumber:
			return "", false, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %s (%s) is a number field and takes only a number, not %s", tool, what, desc, p.shown(value))
		case !f.Accepted && !f.Gone && value != "":
			return "", false, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %s (%s) did not take the text: no input event fired, so the page blocks typing into it (its value is %q)", tool, what, desc, clipTo(f.Value, 200))
		}
		p.finish(f)
		note = fillNote(p, f, value)
	}
	switch {
	case p.Secret != "":
		return fmt.Sprintf("Filled %s (%s)%s", desc, p.hiddenNote(), note), true, nil
	case note != "":
		return fmt.Sprintf("Filled %s with %s%s", desc, p.shown(value), note), false, nil
	}
	return fmt.Sprintf("Filled %s; its value is now %q", desc, clipTo(p.Value, 200)), false, nil
}

// fillNote says what became of the text after the field took it, when
// the field does not hold it now.
func fillNote(p inputPrep, f filled, value string) string {
	switch {
	case f.Gone:
		return "; then the page removed the field"
	case p.Secret != "" && f.N == 0 && value != "":
		return "; the page then cleared the field (after the input or change event)"
	case p.Secret != "" || f.Value == value:
		return ""
	case f.Value == "":
		return "; the page then cleared the field (after the input or change event)"
	}
	return fmt.Sprintf("; the field holds %q now", clipTo(f.Value, 200))
}

// frameOfPrefix returns the frame number of a ref prefix ("" or "f1").
func frameOfPrefix(prefix string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(prefix, "f"))
	return n
}

// typeText appends text to a form field with real key events, and with
// submit presses Enter afterwards in the same settle. Like fill, it keeps
// the text out of the result for a password field.
func (t *Tab) typeText(ctx context.Context, f *browserv1.Fill) (*browserv1.ToolResult, error) {
	el, value := f.GetElement(), f.GetValue()
	e, err := t.resolve(ctx, el, "type")
	if err != nil {
		return nil, err
	}
	p, err := jsStartInputOn(ctx, e, value, "type", t.call.secretInput)
	if err != nil {
		return nil, err
	}
	desc := t.frames.noteDesc(p.Desc)
	if err := inputError(p, e, desc, "type", value); err != nil {
		return nil, err
	}
	msg := func() string {
		if p.Secret != "" {
			return fmt.Sprintf("Typed %s into %s (%s)", characters(utf8.RuneCountInString(value)), desc, p.hiddenNote())
		}
		return fmt.Sprintf("Typed %q into %s; its value is now %q", value, desc, p.Value)
	}
	if p.Insert || f.GetSubmit() {
		w, stop, err := t.watchNav(ctx)
		if err != nil {
			return nil, err
		}
		defer stop()
		if p.Insert {
			t.call.inputAt = time.Now()
			if err := chromedp.Do(ctx, chromedp.KeyEvent(value)); err != nil {
				return nil, err
			}
			got, err := jsFinishFillOn(ctx, e.obj)
			if err != nil && !contextGone(err) {
				return nil, err
			}
			p.finish(got)
		}
		text := msg()
		if f.GetSubmit() {
			if text, err = t.submit(ctx, text); err != nil {
				return nil, err
			}
		}
		res, err := t.acted(ctx, w, text)
		if err == nil && p.Secret != "" {
			sensitive(res)
		}
		return res, err
	}
	if p.Secret != "" {
		return sensitive(textResult("%s", msg())), nil
	}
	return textResult("%s", msg()), nil
}

// inputError turns what prepareInput reported into an error for the model.
func inputError(p inputPrep, e *elem, desc, tool, value string) error {
	bad := func(format string, args ...any) error {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %s (%s) %s", tool, e.what, desc, fmt.Sprintf(format, args...))
	}
	switch p.Error {
	case "":
		return nil
	case "gone":
		return bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s is no longer in the page; take a new snapshot", e.what)
	case "not-editable":
		return bad("is not a text field; %s needs an input, textarea, select or contenteditable element", tool)
	case "input-type":
		if (p.Type == "checkbox" || p.Type == "radio") && tool == "fill_form" {
			return bad("is a %s; give it checked (true or false) in place of value", p.Type)
		}
		if p.Type == "checkbox" || p.Type == "radio" {
			return bad("is a %s; use check (or click) to change it", p.Type)
		}
		return bad("is an input of type %s, which takes no text; use click", p.Type)
	case "disabled":
		return bad("is disabled")
	case "readonly":
		return bad("is read-only")
	case "select":
		return bad("is a select; use fill with the option's label or value")
	case "option":
		return bad("has no option %s; its options are: %s", p.shown(value), clipText(strings.Join(p.Options, ", ")))
	case "option-disabled":
		return bad("has that option disabled")
	case "bad-value":
		return bad("did not accept the value: an input of type %s needs its own format (for example 2024-12-31 for a date)", p.Type)
	case "no-focus":
		return bad("did not take focus, so it cannot receive text")
	}
	return bad("cannot take text (%s)", clipText(p.Error))
}
