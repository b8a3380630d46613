package catalog

import (
	"fmt"
	"regexp"
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// Limits of the form tools' arguments (the worker checks the same ones,
// internal/page/forms.go).
const (
	// maxFormFields is the most fields one fill_form call takes.
	maxFormFields = 100
	// maxSelectValues is the most options one select_option call names.
	maxSelectValues = 200
)

// The mouse arguments of click and mouse, declared once: the schema holds
// a model's calls to them, and the worker (internal/page/pointer.go)
// reads the same values when it turns a request into mouse events,
// refusing what it cannot send (a request on the bus need not have come
// through the schema).
var MouseButtons = []string{"left", "right", "middle"}

// MaxClickCount is the most clicks one click call sends (3: a triple click
// selects a paragraph).
const MaxClickCount = 3

// modifierKeys are the keys click may hold.
var modifierKeys = []string{"Alt", "Control", "Meta", "Shift"}

var submitParam = Param{Name: "submit", Type: Boolean, Default: false,
	Description: "Press Enter in the field afterwards, in the same call (submits a search box or a form)"}

// formTools are the form, pointer and reading tools of issue 19.
var formTools = []Tool{
	{
		Name: "select_option", Title: "Select option",
		Acts: Always, MayNavigate: Always, // a change handler may navigate
		Description: "Select options of a select element by value or visible label: one for a single select, " +
			"several for a multiple select (which then has exactly those selected). input and change fire; the result " +
			"says what is selected now, and an error lists the options when a value matches none.",
		params: append(elementParams(""), Param{Name: "values", Type: Array, Required: true, MaxItems: maxSelectValues,
			Items: &Param{Type: String}, Description: "Values or visible labels of the options to select, e.g. [\"Medium\"]"}),
		build: func(a Args) (*browserv1.ToolRequest, error) {
			el, err := requireElement(a)
			if err != nil {
				return nil, err
			}
			values := a.strings("values")
			if len(values) == 0 {
				return nil, argErr("values", "must name at least one option")
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_SelectOption{SelectOption: &browserv1.SelectOption{Element: el, Values: values}}}, nil
		},
	},
	{
		Name: "check", Title: "Check or uncheck",
		Acts: Always, MayNavigate: Always,
		Description: "Set a checkbox, radio button or switch to checked or unchecked: native inputs and ARIA widgets " +
			"(role=checkbox, switch or radio with aria-checked). Already in that state, it does nothing and says so; " +
			"otherwise it clicks the element and verifies that its state changed.",
		params: append(elementParams(""), Param{Name: "checked", Type: Boolean, Default: true, Description: "The state to set"}),
		build: func(a Args) (*browserv1.ToolRequest, error) {
			el, err := requireElement(a)
			if err != nil {
				return nil, err
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Check{Check: &browserv1.Check{Element: el, Checked: a.boolean("checked")}}}, nil
		},
	},
	{
		Name: "fill_form", Title: "Fill form", TypesText: true,
		Acts: Always, MayNavigate: Always,
		Secrets: Secrets{Item: "fill_form field", In: formValues},
		Description: "Fill several form fields in one call, in order: text fields (value), selects (value or values) " +
			"and checkboxes, radios and switches (checked). The result has one line per field; it stops at the first " +
			"field that fails and says which fields were done.",
		params: []Param{{Name: "fields", Type: Array, Required: true, MaxItems: maxFormFields, Description: "The fields, each " +
			"named by ref (or selector) with exactly one of value, checked or values",
			Items: &Param{Type: Object, Fields: []Param{
				{Name: "ref", Type: String, Description: "Element ref from the latest snapshot, e.g. e5"},
				{Name: "selector", Type: String, Description: "CSS selector, when there is no ref"},
				{Name: "value", Type: String, Description: "Text for a text field, or an option's value or label for a select"},
				{Name: "checked", Type: Boolean, Description: "State for a checkbox, radio button or switch"},
				{Name: "values", Type: Array, Items: &Param{Type: String}, MaxItems: maxSelectValues, Description: "Options for a multiple select"},
			}}}},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			fields := a.objects("fields")
			if len(fields) == 0 {
				return nil, argErr("fields", "must hold at least one field")
			}
			out := make([]*browserv1.FormField, len(fields))
			for i, f := range fields {
				ff, err := formField(f)
				if err != nil {
					return nil, nested(fmt.Sprintf("fields[%d]", i), err)
				}
				out[i] = ff
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_FillForm{FillForm: &browserv1.FillForm{Fields: out}}}, nil
		},
	},
	{
		Name: "drag", Title: "Drag and drop",
		Acts: Always, MayNavigate: Always,
		Description: "Drag one element onto another, each named by a ref or a CSS selector. HTML5 drag and drop " +
			"(draggable elements with dragstart and drop handlers) and pointer-driven widgets (sliders, sortable lists: " +
			"press, several moves, release) both work.",
		params: []Param{
			{Name: "from", Type: String, Required: true, Description: "The element to drag: a ref (e5) or a CSS selector"},
			{Name: "to", Type: String, Required: true, Description: "The element to drop it on: a ref (e9) or a CSS selector"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			from, err := refOrSelector(a, "from")
			if err != nil {
				return nil, err
			}
			to, err := refOrSelector(a, "to")
			if err != nil {
				return nil, err
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Drag{Drag: &browserv1.Drag{From: from, To: to}}}, nil
		},
	},
	{
		Name: "mouse", Title: "Mouse action",
		Acts: Always, MayNavigate: Always, // a click on a canvas may navigate
		Description: "Send one mouse action at a point of the viewport, for canvases and maps: move, down, up, click " +
			"or wheel. x and y are CSS pixels from the viewport's top left corner (a screenshot of the viewport shows " +
			"the same pixels); a point outside the viewport is an error.",
		params: []Param{
			{Name: "action", Type: String, Required: true, Enum: []string{"move", "down", "up", "click", "wheel"}, Description: "What to do"},
			{Name: "x", Type: Number, Required: true, Description: "Horizontal position in CSS pixels"},
			{Name: "y", Type: Number, Required: true, Description: "Vertical position in CSS pixels"},
			{Name: "dx", Type: Number, Description: "Wheel only: horizontal scroll distance in CSS pixels"},
			{Name: "dy", Type: Number, Description: "Wheel only: vertical scroll distance in CSS pixels (positive scrolls down)"},
			{Name: "button", Type: String, Default: "left", Enum: MouseButtons, Description: "Button for down, up and click"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			x, _ := a.number("x")
			y, _ := a.number("y")
			dx, _ := a.number("dx")
			dy, _ := a.number("dy")
			if a.str("action") != "wheel" && (dx != 0 || dy != 0) {
				return nil, argErr("dx", "and dy are for action wheel only")
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Mouse{Mouse: &browserv1.Mouse{
				Action: a.str("action"), X: x, Y: y, Dx: dx, Dy: dy, Button: a.str("button"),
			}}}, nil
		},
	},
	{
		Name: "get_markdown", Title: "Get Markdown", ReadOnly: true,
		MaxChars: TextChars,
		Description: "Get the readable content of the page, or of one element, as Markdown: headings, paragraphs, " +
			"lists, tables, links with absolute URLs, images, code blocks; no scripts, styles or hidden elements.",
		params: elementParams("; the whole page when none is given"),
		build: func(a Args) (*browserv1.ToolRequest, error) {
			el, err := element(a, false)
			if err != nil {
				return nil, err
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetMarkdown{GetMarkdown: &browserv1.GetMarkdown{Element: el}}}, nil
		},
	},
}

// formField builds one field of fill_form.
func formField(f Args) (*browserv1.FormField, *ArgError) {
	el, err := element(f, true)
	if err != nil {
		ae, _ := err.(*ArgError)
		return nil, ae
	}
	out := &browserv1.FormField{Element: el}
	n := 0
	if v, ok := f["value"].(string); ok {
		out.Value, n = &v, n+1
	}
	if c, ok := f["checked"].(bool); ok {
		out.Checked, n = &c, n+1
	}
	if vs := f.strings("values"); len(vs) > 0 {
		out.Values, n = vs, n+1
	}
	if n != 1 {
		return nil, &ArgError{Msg: "needs exactly one of value (text fields, selects), checked (checkboxes, radios, switches) or values (multiple selects)"}
	}
	return out, nil
}

// refLike matches what drag takes as a ref rather than a selector.
var refLike = regexp.MustCompile(`^@?(?:f\d+)?e\d+$`)

// refOrSelector reads an argument that is a ref (e5, @e5) or a CSS selector.
func refOrSelector(a Args, name string) (*browserv1.Element, error) {
	s, err := nonEmpty(a, name)
	if err != nil {
		return nil, err
	}
	s = strings.TrimSpace(s)
	if refLike.MatchString(s) {
		return &browserv1.Element{By: &browserv1.Element_Ref{Ref: strings.TrimPrefix(s, "@")}}, nil
	}
	return &browserv1.Element{By: &browserv1.Element_Selector{Selector: s}}, nil
}
