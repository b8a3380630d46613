package page

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/input"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// formsJS is the page side of select_option, check, drag and get_markdown,
// installed in the isolated world with page.js (see world.go).
//
//go:embed forms.js
var formsJS string

const (
	// MaxFormFields is the most fields one fill_form call fills.
	MaxFormFields = 100
	// MaxSelectValues is the most options one select_option call names.
	MaxSelectValues = 200
	// checkVerifyFrames is how many 16 ms turns check waits for the page
	// to show the new state of an ARIA toggle after the click (a framework
	// may render it a frame later).
	checkVerifyFrames = 30
)

// formHandlers are the form tools and get_markdown.
var formHandlers = map[string]handler{
	"select_option": on((*browserv1.ToolRequest).GetSelectOption, (*Tab).selectOption),
	"check":         on((*browserv1.ToolRequest).GetCheck, (*Tab).check),
	"fill_form":     on((*browserv1.ToolRequest).GetFillForm, (*Tab).fillForm),
	"get_markdown":  on((*browserv1.ToolRequest).GetGetMarkdown, (*Tab).getMarkdown),
}

// selectOption selects options of a select element (select_option).
func (t *Tab) selectOption(ctx context.Context, s *browserv1.SelectOption) (*browserv1.ToolResult, error) {
	return t.actOn(ctx, func() (string, error) { return t.selectField(ctx, s.GetElement(), s.GetValues(), "select_option") })
}

// check sets a checkbox, radio or switch to a state (check).
func (t *Tab) check(ctx context.Context, c *browserv1.Check) (*browserv1.ToolResult, error) {
	return t.actOn(ctx, func() (string, error) { return t.checkField(ctx, c.GetElement(), c.GetChecked(), "check") })
}

// actOn runs an action that can change the page, then settles once and
// reports (acted).
func (t *Tab) actOn(ctx context.Context, action func() (string, error)) (*browserv1.ToolResult, error) {
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	msg, err := action()
	if err != nil {
		return nil, err
	}
	return t.acted(ctx, w, msg)
}

// selectResult is what forms.js's selectOptions says.
type selectResult struct {
	Error     string   `json:"error"`
	Desc      string   `json:"desc"`
	Missing   []string `json:"missing"`
	Options   []string `json:"options"`
	Total     int      `json:"total"`
	Changed   bool     `json:"changed"`
	Selected  []string `json:"selected"`
	NSelected int      `json:"nSelected"`
}

// selectField selects the options that values name, by value or visible
// label, without settling. A multiple select ends with exactly these
// selected; input and change fire once when anything changed.
func (t *Tab) selectField(ctx context.Context, el *browserv1.Element, values []string, tool string) (string, error) {
	switch {
	case len(values) == 0:
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s needs values: the value or visible label of each option to select", tool)
	case len(values) > MaxSelectValues:
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s takes at most %d values (MaxSelectValues), got %d", tool, MaxSelectValues, len(values))
	}
	at, err := t.elementAt(el, tool)
	if err != nil {
		return "", err
	}
	t.call.inputAt = time.Now()
	r, err := jsSelectOptions(ctx, t, at, values)
	if err != nil {
		return "", err
	}
	what := at.what
	desc := t.frames.noteDesc(r.Desc)
	bad := func(format string, args ...any) error {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %s (%s) %s", tool, what, desc, fmt.Sprintf(format, args...))
	}
	switch r.Error {
	case "":
	case "not-select":
		return "", bad("is not a select element; for a custom dropdown, click it and then click the option (take a snapshot to see the options)")
	case "disabled":
		return "", bad("is disabled")
	case "single":
		return "", bad("takes one option, not %d; its options are: %s", len(values), optionList(r.Options, len(r.Options)))
	case "option":
		return "", bad("has no option %s; its options are: %s", quoteList(r.Missing), optionList(r.Options, r.Total))
	case "option-disabled":
		return "", bad("has option %s disabled", quoteList(r.Missing))
	default:
		return "", bad("cannot be set (%s)", clipText(r.Error))
	}
	now := quoteList(r.Selected)
	if r.NSelected > len(r.Selected) {
		now += fmt.Sprintf(" and %d more", r.NSelected-len(r.Selected))
	}
	if r.NSelected == 0 {
		now = "nothing"
	}
	if !r.Changed {
		return fmt.Sprintf("%s already had %s selected; nothing changed", desc, now), nil
	}
	return fmt.Sprintf("Selected %s in %s; selected now: %s", quoteList(values), desc, now), nil
}

// quoteList quotes each string, comma-separated, and bounds the whole.
func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(clipTo(s, 200))
	}
	return clipText(strings.Join(q, ", "))
}

// optionList lists the options of a select for an error, saying how many
// more it has than the list shows.
func optionList(opts []string, total int) string {
	s := clipText(strings.Join(opts, ", "))
	if total > len(opts) {
		s += fmt.Sprintf(" (and %d more)", total-len(opts))
	}
	return s
}

// toggleState is what forms.js's checkState says about a toggle.
type toggleState struct {
	Error    string `json:"error"`
	Desc     string `json:"desc"`
	Role     string `json:"role"`
	Kind     string `json:"kind"`
	Aria     bool   `json:"aria"`
	Checked  bool   `json:"checked"`
	Mixed    bool   `json:"mixed"`
	Disabled bool   `json:"disabled"`
}

// stateWord says checked or unchecked.
func stateWord(checked bool) string {
	if checked {
		return "checked"
	}
	return "unchecked"
}

// checkField sets a native or ARIA checkbox, radio or switch to want,
// without settling. Already in that state, it does nothing and says so.
// Otherwise it clicks the element with real mouse events, as a person
// would (a native input without a box of its own, hidden behind a styled
// label, gets a synthetic click), and then checks that the state changed.
func (t *Tab) checkField(ctx context.Context, el *browserv1.Element, want bool, tool string) (string, error) {
	at, err := t.elementAt(el, tool)
	if err != nil {
		return "", err
	}
	s, err := jsCheckState(ctx, t, at)
	if err != nil {
		return "", err
	}
	what := at.what
	desc := t.frames.noteDesc(s.Desc)
	bad := func(format string, args ...any) error {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %s (%s) %s", tool, what, desc, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Error == "gone":
		return "", bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s is no longer in the page; take a new snapshot", what)
	case s.Error == "not-toggle":
		return "", bad("is a %s, not a checkbox, radio or switch; check works on inputs of type checkbox or radio and on role=checkbox, switch or radio elements", s.Role)
	case s.Error != "":
		return "", bad("cannot be checked (%s)", clipText(s.Error))
	case s.Checked == want && !s.Mixed:
		// A mixed (aria-checked="mixed") toggle is neither: it gets the click.
		return fmt.Sprintf("%s is already %s; nothing done", desc, stateWord(want)), nil
	case !want && strings.HasSuffix(s.Kind, "radio"):
		return "", bad("is a radio button: it cannot be unchecked by itself; check another option of its group")
	case s.Disabled:
		return "", bad("is disabled")
	}
	t.call.inputAt = time.Now()
	covered, err := t.clickToggle(ctx, el, s, tool)
	if err != nil {
		return "", err
	}
	// Found again: the click may have replaced the page's document.
	if at, err = t.elementAt(el, tool); err != nil {
		return "", fmt.Errorf("clicked %s, then could not read its state: %w", what, err)
	}
	after, err := jsCheckSettled(ctx, t, at, want, checkVerifyFrames)
	if err != nil {
		return "", fmt.Errorf("clicked %s, then could not read its state: %w", what, err)
	}
	if after.Checked != want {
		why := "the page did not change its state (it may need a different control, or it reverted the change)"
		if covered != "" {
			why = covered + " covers it and got the click"
		}
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: clicked %s (%s), but it is still %s: %s", tool, what, desc, stateWord(after.Checked), why)
	}
	verb := "Checked"
	if !want {
		verb = "Unchecked"
	}
	return verb + " " + t.frames.noteDesc(after.Desc), nil
}

// clickToggle clicks the toggle el names at its centre. A native input
// that has no box (a styled checkbox hides it) is clicked in the page. It
// returns the description of an element that covers the toggle, if any.
func (t *Tab) clickToggle(ctx context.Context, el *browserv1.Element, s toggleState, tool string) (string, error) {
	x, y, info, err := t.locate(ctx, el, tool)
	var be *bus.Error
	if err != nil && !s.Aria && errors.As(err, &be) && be.Code == commonv1.ErrorCode_NOT_FOUND && strings.Contains(be.Message, "not visible") {
		at, err := t.elementAt(el, tool)
		if err != nil {
			return "", err
		}
		return "", jsToggle(ctx, t, at)
	}
	if err != nil {
		return "", err
	}
	return info.Covered, mouse(ctx, x, y, input.DispatchMouseEventTypeMousePressed, input.DispatchMouseEventTypeMouseReleased)
}

// fillForm fills several fields in order and settles once at the end. It
// stops at the first field that fails, saying which fields were done.
func (t *Tab) fillForm(ctx context.Context, f *browserv1.FillForm) (*browserv1.ToolResult, error) {
	fields := f.GetFields()
	switch {
	case len(fields) == 0:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "fill_form needs fields: a list of {ref or selector, and value, checked or values}")
	case len(fields) > MaxFormFields:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "fill_form takes at most %d fields (MaxFormFields), got %d; split the form into several calls", MaxFormFields, len(fields))
	}
	for i, fd := range fields {
		if err := checkFormField(fd); err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "fill_form: field %d %s", i+1, err.Error())
		}
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	var lines []string
	secret := false
	for i, fd := range fields {
		t.call.did = formProgress(i, len(fields)) // said instead of the result if a field's handler opens a dialog
		line, isSecret, err := t.formField(ctx, fd)
		if err != nil {
			return nil, formFieldError(err, i, len(fields))
		}
		secret = secret || isSecret
		lines = append(lines, fmt.Sprintf("%d. %s", i+1, line))
	}
	res, err := t.acted(ctx, w, fmt.Sprintf("Filled %d fields:\n%s", len(fields), strings.Join(lines, "\n")))
	if err == nil && secret {
		sensitive(res)
	}
	return res, err
}

// formProgress says how far fill_form got when field i (from 0) of n
// raised a dialog.
func formProgress(i, n int) string {
	msg := fmt.Sprintf("fill_form: the page opened a dialog while field %d of %d was filled", i+1, n)
	switch {
	case i == 1:
		msg += "; field 1 was done before it"
	case i > 1:
		msg += fmt.Sprintf("; fields 1-%d were done before it", i)
	}
	switch left := n - i - 1; {
	case left == 1:
		msg += fmt.Sprintf("; field %d was not filled", n)
	case left > 1:
		msg += fmt.Sprintf("; fields %d-%d were not filled", i+2, n)
	}
	return msg
}

// checkFormField says what is wrong with a field of fill_form before any
// field is touched.
func checkFormField(f *browserv1.FormField) error {
	el := f.GetElement()
	if strings.TrimSpace(el.GetRef()) == "" && strings.TrimSpace(el.GetSelector()) == "" {
		return errors.New("names no element: give ref (from snapshot) or selector")
	}
	n := 0
	if f.Value != nil {
		n++
	}
	if f.Checked != nil {
		n++
	}
	if len(f.GetValues()) > 0 {
		n++
	}
	if n != 1 {
		return errors.New("needs exactly one of value (text fields and selects), checked (checkboxes, radios, switches) or values (selects)")
	}
	return nil
}

// formField fills one field of fill_form.
func (t *Tab) formField(ctx context.Context, f *browserv1.FormField) (line string, secret bool, err error) {
	switch {
	case f.Checked != nil:
		line, err = t.checkField(ctx, f.GetElement(), f.GetChecked(), "fill_form")
	case len(f.GetValues()) > 0:
		line, err = t.selectField(ctx, f.GetElement(), f.GetValues(), "fill_form")
	default:
		line, secret, err = t.fillField(ctx, f.GetElement(), f.GetValue(), "fill_form")
	}
	return line, secret, err
}

// formFieldError says which field of fill_form failed and which were done.
func formFieldError(err error, i, n int) error {
	done := "no field was changed"
	switch i {
	case 0:
	case 1:
		done = "field 1 was filled before it (it keeps its new value)"
	default:
		done = fmt.Sprintf("fields 1-%d were filled before it (they keep their new values)", i)
	}
	var be *bus.Error
	if !errors.As(err, &be) {
		return fmt.Errorf("field %d of %d: %w; %s", i+1, n, err, done)
	}
	return bus.Errorf(be.Code, "fill_form stopped at field %d of %d: %s; %s", i+1, n, strings.TrimPrefix(be.Message, "fill_form: "), done)
}

// getMarkdown returns the readable content of the page, or of the element
// that g names, as Markdown (forms.js's markdown), cut in the page at the
// call's cap.
func (t *Tab) getMarkdown(ctx context.Context, g *browserv1.GetMarkdown) (*browserv1.ToolResult, error) {
	limit := t.capChars(DefaultTextChars)
	room := readRoom(limit)
	var at *elementAt
	if g.GetElement() != nil {
		a, err := t.elementAt(g.GetElement(), "get_markdown")
		if err != nil {
			return nil, err
		}
		at = &a
	}
	r, err := jsMarkdown(ctx, t, at, room)
	if err != nil {
		return nil, err
	}
	how := "ask for one part of the page (ref or selector), or pass a larger max_chars"
	text, cut := cutRead(r.S, limit, r.Total > room || r.More)
	r.S = text
	switch {
	case r.More:
		return textResult("%s\n[cut at %d characters; the page has more (over %d characters); %s]", r.S, limit, r.Total, how), nil
	case cut:
		return textResult("%s%s", r.S, cutMarker(limit, r.Total, how)), nil
	case strings.TrimSpace(r.S) == "":
		return textResult("(no readable content: the element is empty, hidden, or holds only controls and media)"), nil
	}
	return textResult("%s", r.S), nil
}
