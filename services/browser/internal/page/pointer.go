package page

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"go.opentelemetry.io/otel/attribute"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

const (
	// MaxClickCount is the most clicks one click call sends: the
	// catalog's, which its schema holds the model to (this check is for
	// requests that did not come through it).
	MaxClickCount = catalog.MaxClickCount
	// dragSteps is how many mouse moves a drag makes from its source to
	// its target: sliders and sortable lists follow pointermove, and some
	// only start a drag after a few moves.
	dragSteps = 10
	// dragStartWait bounds how long drag waits for Chromium to hand over
	// the HTML5 drag after the page fired dragstart.
	dragStartWait = time.Second
)

// pointerState is what the mouse and keyboard hold between tools: the
// buttons pressed with mouse down and the modifiers held with press down.
// Only the holder of Tab.sem uses it.
type pointerState struct {
	buttons int64
	mods    int64
}

// buttonBits are the CDP buttons bit field values.
var buttonBits = map[input.MouseButton]int64{input.MouseButtonLeft: 1, input.MouseButtonRight: 2, input.MouseButtonMiddle: 4}

// parseButton reads a button name ("" is left): one of the catalog's
// MouseButtons, which are CDP's names for them.
func parseButton(name, tool string) (input.MouseButton, error) {
	b := strings.ToLower(strings.TrimSpace(name))
	switch {
	case b == "":
		return input.MouseButtonLeft, nil
	case slices.Contains(catalog.MouseButtons, b):
		return input.MouseButton(b), nil
	}
	return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: unknown button %q; use left, right or middle", tool, name)
}

// parseModifiers reads modifier key names into the CDP bit field.
func parseModifiers(names []string, tool string) (int64, error) {
	var bits int64
	for _, n := range names {
		m, ok := modifierNames[strings.ToLower(strings.TrimSpace(n))]
		if !ok {
			return 0, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: unknown modifier %q; use Alt, Control, Meta or Shift", tool, n)
		}
		bits |= int64(m)
	}
	return bits, nil
}

// modifierWords names the modifiers of a bit field: "Control+Shift".
func modifierWords(bits int64) string {
	var out []string
	for _, m := range []struct {
		bit  int64
		name string
	}{{int64(chromedp.ModifierAlt), "Alt"}, {int64(chromedp.ModifierCtrl), "Control"}, {int64(chromedp.ModifierMeta), "Meta"}, {int64(chromedp.ModifierShift), "Shift"}} {
		if bits&m.bit != 0 {
			out = append(out, m.name)
		}
	}
	return strings.Join(out, "+")
}

// mouseAt sends one mouse event of typ at x, y with button (none for a
// move) and count, holding the modifiers mods and those held by press.
func (t *Tab) mouseAt(ctx context.Context, typ input.DispatchMouseEventType, x, y float64, button input.MouseButton, count int64, mods int64) error {
	p := input.DispatchMouseEventParams{Type: typ, X: x, Y: y, Modifiers: mods | t.pointer.mods}
	switch typ {
	case input.DispatchMouseEventTypeMousePressed:
		t.pointer.buttons |= buttonBits[button]
		p.Button, p.ClickCount = button, count
	case input.DispatchMouseEventTypeMouseReleased:
		t.pointer.buttons &^= buttonBits[button]
		p.Button, p.ClickCount = button, count
	}
	p.Buttons = t.pointer.buttons
	if typ == input.DispatchMouseEventTypeMouseMoved {
		// A move names the button held, as Puppeteer's do: Blink starts
		// a drag (and keeps pointer capture) only on moves with a button.
		p.Button = heldButton(t.pointer.buttons)
	}
	if typ == input.DispatchMouseEventTypeMouseReleased {
		// The button that goes up still counts as pressed in its event.
		p.Buttons |= buttonBits[button]
	}
	_, err := chromedp.Call(ctx, input.DispatchMouseEvent, p)
	return err
}

// heldButton returns the first button held in a buttons bit field.
func heldButton(buttons int64) input.MouseButton {
	for _, b := range []input.MouseButton{input.MouseButtonLeft, input.MouseButtonRight, input.MouseButtonMiddle} {
		if buttons&buttonBits[b] != 0 {
			return b
		}
	}
	return input.MouseButtonNone
}

// inputHandlers are the tools that act with the mouse and keyboard
// (element.go, scroll.go).
var inputHandlers = map[string]handler{
	"click": on((*browserv1.ToolRequest).GetClick, (*Tab).click),
	"fill":  on((*browserv1.ToolRequest).GetFill, (*Tab).fill),
	"type":  on((*browserv1.ToolRequest).GetType, (*Tab).typeText),
	"press": on((*browserv1.ToolRequest).GetPress, (*Tab).pressKey),
	"scroll": func(t *Tab, ctx context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.scroll(ctx, r.GetScroll().GetDirection(), r.GetScroll().GetAmount())
	},
	"hover": on((*browserv1.ToolRequest).GetHover, (*Tab).hover),
	"focus": on((*browserv1.ToolRequest).GetFocus, (*Tab).focus),
	"drag":  on((*browserv1.ToolRequest).GetDrag, (*Tab).drag),
	"mouse": on((*browserv1.ToolRequest).GetMouse, (*Tab).mouseAction),
}

// click clicks the centre of an element with real mouse events (the
// button, count and modifiers that c asks for), then waits for a
// navigation that the click started.
func (t *Tab) click(ctx context.Context, c *browserv1.Click) (*browserv1.ToolResult, error) {
	button, err := parseButton(c.GetButton(), "click")
	if err != nil {
		return nil, err
	}
	count := int64(c.GetClickCount())
	if count == 0 {
		count = 1
	}
	if count < 1 || count > MaxClickCount {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "click: click_count must be 1 to %d (MaxClickCount), not %d", MaxClickCount, count)
	}
	mods, err := parseModifiers(c.GetModifiers(), "click")
	if err != nil {
		return nil, err
	}
	x, y, info, err := t.locate(ctx, c.GetElement(), "click")
	if err != nil {
		return nil, err
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	// No mouseMoved first: Chromium delivers moves with the next animation
	// frame (~16 ms each), and a press at a new point already fires the
	// boundary events (mouseover, mouseenter) and updates :hover.
	mctx, span := startSpan(ctx, spanClick, attribute.Bool("sovereign.click.covered", info.Covered != ""))
	t.call.inputAt = time.Now()
	t.call.did = clickVerb(button, count, mods|t.pointer.mods) + " " + info.Desc // said if a dialog interrupts the click
	for i := int64(1); i <= count && err == nil; i++ {
		// A double click is two clicks with counts 1 and 2: the second
		// fires dblclick.
		if err = t.mouseAt(mctx, input.DispatchMouseEventTypeMousePressed, x, y, button, i, mods); err == nil {
			err = t.mouseAt(mctx, input.DispatchMouseEventTypeMouseReleased, x, y, button, i, mods)
		}
	}
	endSpan(span, err)
	if err != nil {
		return nil, err
	}
	msg := t.call.did
	if info.Covered != "" {
		msg += fmt.Sprintf(" — but %s covers its centre, so that element got the click", info.Covered)
	}
	return t.acted(ctx, w, msg)
}

// clickVerb says how click clicked: "Clicked", "Double-clicked",
// "Right-clicked", "Shift+clicked".
func clickVerb(button input.MouseButton, count, mods int64) string {
	verb := "clicked"
	switch count {
	case 2:
		verb = "double-clicked"
	case 3:
		verb = "triple-clicked"
	}
	if button != input.MouseButtonLeft {
		verb = string(button) + "-" + verb
	}
	if mods != 0 {
		verb = modifierWords(mods) + "+" + verb
	}
	return strings.ToUpper(verb[:1]) + verb[1:]
}

// viewportPoint is what the page says about a point of the viewport.
type viewportPoint struct {
	W    float64 `json:"w"`
	H    float64 `json:"h"`
	Desc string  `json:"desc"`
}

// mouseAction sends one raw mouse action at a point of the viewport.
func (t *Tab) mouseAction(ctx context.Context, m *browserv1.Mouse) (*browserv1.ToolResult, error) {
	button, err := parseButton(m.GetButton(), "mouse")
	if err != nil {
		return nil, err
	}
	x, y := m.GetX(), m.GetY()
	vp, err := jsProbe(ctx, t, x, y)
	if err != nil {
		return nil, err
	}
	if x < 0 || y < 0 || x >= vp.W || y >= vp.H {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"mouse: the point (%g, %g) is outside the viewport, which is %g×%g CSS pixels from (0, 0) at its top left; scroll first, or take a screenshot to find the point", x, y, vp.W, vp.H)
	}
	action := strings.ToLower(strings.TrimSpace(m.GetAction()))
	if action != "wheel" && (m.GetDx() != 0 || m.GetDy() != 0) {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "mouse: dx and dy are for action wheel only")
	}
	if action == "wheel" && m.GetDx() == 0 && m.GetDy() == 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "mouse: action wheel needs dx or dy, the distance to scroll in CSS pixels")
	}
	return t.actOn(ctx, func() (string, error) {
		verb, err := t.mouseDo(ctx, action, x, y, button, m.GetDx(), m.GetDy())
		if err != nil {
			return "", err
		}
		msg := fmt.Sprintf("%s at (%g, %g)", verb, x, y)
		if vp.Desc != "" {
			msg += " over " + t.frames.noteDesc(vp.Desc)
		}
		return msg, nil
	})
}

// mouseDo sends the events of one mouse action and says what it did.
func (t *Tab) mouseDo(ctx context.Context, action string, x, y float64, button input.MouseButton, dx, dy float64) (verb string, err error) {
	t.call.inputAt = time.Now()
	switch action {
	case "move":
		return "Moved the mouse", t.mouseAt(ctx, input.DispatchMouseEventTypeMouseMoved, x, y, input.MouseButtonNone, 0, 0)
	case "down":
		return "Pressed the " + string(button) + " button", t.mouseAt(ctx, input.DispatchMouseEventTypeMousePressed, x, y, button, 1, 0)
	case "up":
		return "Released the " + string(button) + " button", t.mouseAt(ctx, input.DispatchMouseEventTypeMouseReleased, x, y, button, 1, 0)
	case "click":
		if err = t.mouseAt(ctx, input.DispatchMouseEventTypeMousePressed, x, y, button, 1, 0); err == nil {
			err = t.mouseAt(ctx, input.DispatchMouseEventTypeMouseReleased, x, y, button, 1, 0)
		}
		return clickVerb(button, 1, t.pointer.mods), err
	case "wheel":
		_, err = chromedp.Call(ctx, dispatchWheel, wheelParams{
			Type: input.DispatchMouseEventTypeMouseWheel, X: x, Y: y, DeltaX: dx, DeltaY: dy,
			Modifiers: t.pointer.mods, Buttons: t.pointer.buttons,
		})
		return fmt.Sprintf("Turned the wheel by (%g, %g)", dx, dy), err
	}
	return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "mouse: unknown action %q; use move, down, up, click or wheel", action)
}

// wheelParams is Input.dispatchMouseEvent for a wheel event: cdproto
// leaves out a zero deltaX or deltaY, and Chromium wants both.
type wheelParams struct {
	Type      input.DispatchMouseEventType `json:"type"`
	X         float64                      `json:"x"`
	Y         float64                      `json:"y"`
	DeltaX    float64                      `json:"deltaX"`
	DeltaY    float64                      `json:"deltaY"`
	Modifiers int64                        `json:"modifiers"`
	Buttons   int64                        `json:"buttons"`
}

var dispatchWheel = cdp.Command[wheelParams, cdp.Empty]{Method: input.CommandDispatchMouseEvent}

// drag drags one element onto another. A press on the source and a first
// move show whether the page starts an HTML5 drag (dragstart): Chromium
// then hands the drag over (Input.setInterceptDrags, as Playwright does)
// and the drop is sent as drag events at the target. Otherwise the mouse
// keeps moving to the target in steps and is released there, which drives
// sliders and sortable lists that follow pointer events.
func (t *Tab) drag(ctx context.Context, d *browserv1.Drag) (*browserv1.ToolResult, error) {
	if d.GetFrom() == nil || d.GetTo() == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "drag needs from and to: the element to drag and the one to drop it on (refs or selectors)")
	}
	// The target first: bringing the source into view last keeps it
	// where it is pressed, and the target is measured again below.
	if _, _, _, err := t.locate(ctx, d.GetTo(), "drag"); err != nil {
		return nil, err
	}
	x0, y0, from, err := t.locate(ctx, d.GetFrom(), "drag")
	if err != nil {
		return nil, err
	}
	x1, y1, to, err := t.locate(ctx, d.GetTo(), "drag")
	if err != nil {
		return nil, err
	}
	return t.actOn(ctx, func() (string, error) {
		dropped, err := t.dragMoves(ctx, x0, y0, x1, y1)
		if err != nil {
			return "", err
		}
		how := "with the mouse"
		if dropped {
			how = "(HTML5 drag and drop)"
		}
		return fmt.Sprintf("Dragged %s onto %s %s", from.Desc, to.Desc, how), nil
	})
}

// dragMoves presses at (x0, y0), moves to (x1, y1) and drops there; it
// reports whether the page took it as an HTML5 drag.
func (t *Tab) dragMoves(ctx context.Context, x0, y0, x1, y1 float64) (html5 bool, err error) {
	data := make(chan *input.DragData, 1)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := chromedp.Listen(lctx, func(ev any) {
		if e, ok := ev.(*input.EventDragIntercepted); ok {
			select {
			case data <- e.Data:
			default:
			}
		}
	}); err != nil {
		return false, err
	}
	if _, err := chromedp.Call(ctx, input.SetInterceptDrags, input.SetInterceptDragsParams{Enabled: true}); err != nil {
		return false, err
	}
	defer func() {
		// On the tab's context: the drag must not stay intercepted when
		// the request ends early.
		off, cancel := context.WithTimeout(t.ctx, time.Second)
		defer cancel()
		_, _ = chromedp.Call(off, input.SetInterceptDrags, input.SetInterceptDragsParams{Enabled: false})
	}()
	if err := jsWatchDrag(ctx, t); err != nil {
		return false, err
	}
	t.call.inputAt = time.Now()
	move := func(i int) error {
		f := float64(i) / dragSteps
		return t.mouseAt(ctx, input.DispatchMouseEventTypeMouseMoved, x0+(x1-x0)*f, y0+(y1-y0)*f, input.MouseButtonNone, 0, 0)
	}
	if err := t.mouseAt(ctx, input.DispatchMouseEventTypeMouseMoved, x0, y0, input.MouseButtonNone, 0, 0); err != nil {
		return false, err
	}
	if err := t.mouseAt(ctx, input.DispatchMouseEventTypeMousePressed, x0, y0, input.MouseButtonLeft, 1, 0); err != nil {
		return false, err
	}
	defer func() {
		if err != nil && t.pointer.buttons&buttonBits[input.MouseButtonLeft] != 0 {
			// Do not leave the button down for the next tool.
			up, cancel := context.WithTimeout(t.ctx, time.Second)
			defer cancel()
			_ = t.mouseAt(up, input.DispatchMouseEventTypeMouseReleased, x1, y1, input.MouseButtonLeft, 1, 0)
		}
	}()
	decided := false
	for i := 1; i <= dragSteps; i++ {
		if err := move(i); err != nil {
			return false, err
		}
		if decided || i > 2 {
			continue
		}
		// After the first moves: did the page start an HTML5 drag?
		started, err := jsDragStarted(ctx, t)
		if err != nil {
			return false, err
		}
		if !started {
			continue
		}
		decided = true
		select {
		case dd := <-data:
			return true, t.drop(ctx, dd, x1, y1)
		case <-time.After(dragStartWait):
			// Not handed over: finish as a pointer drag.
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return false, t.mouseAt(ctx, input.DispatchMouseEventTypeMouseReleased, x1, y1, input.MouseButtonLeft, 1, 0)
}

// drop ends an intercepted HTML5 drag at (x, y): dragenter, dragover and
// drop, then the release of the button.
func (t *Tab) drop(ctx context.Context, dd *input.DragData, x, y float64) error {
	if err := t.dragEvents(ctx, dd, x, y); err != nil {
		return err
	}
	return t.mouseAt(ctx, input.DispatchMouseEventTypeMouseReleased, x, y, input.MouseButtonLeft, 1, 0)
}

// dragEvents sends dragenter, dragover and drop with dd at (x, y).
func (t *Tab) dragEvents(ctx context.Context, dd *input.DragData, x, y float64) error {
	for _, typ := range []input.DispatchDragEventType{input.DispatchDragEventTypeDragEnter, input.DispatchDragEventTypeDragOver, input.DispatchDragEventTypeDrop} {
		if _, err := chromedp.Call(ctx, input.DispatchDragEvent, input.DispatchDragEventParams{Type: typ, X: x, Y: y, Data: dd, Modifiers: t.pointer.mods}); err != nil {
			return fmt.Errorf("drag: send %s: %w", typ, err)
		}
	}
	return nil
}

// pressKey presses key, or with action "down" or "up" only holds or lets
// go of it. A held modifier (Shift, Control, Alt, Meta) also applies to
// later clicks and mouse actions until it goes up.
func (t *Tab) pressKey(ctx context.Context, p *browserv1.Press) (*browserv1.ToolResult, error) {
	action := strings.ToLower(strings.TrimSpace(p.GetAction()))
	if action == "" || action == "press" {
		return t.press(ctx, p.GetKey())
	}
	if action != "down" && action != "up" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "press: unknown action %q; use down, up, or leave it out to press the key", p.GetAction())
	}
	r, mods, err := parseKey(p.GetKey())
	if err != nil {
		return nil, err
	}
	var bits int64
	for _, m := range mods {
		bits |= int64(m)
	}
	modBit := int64(0)
	if m, ok := modifierNames[strings.ToLower(strings.TrimSpace(p.GetKey()))]; ok {
		modBit = int64(m)
	}
	events := kb.Encode(r)
	if action == "down" {
		events = events[:len(events)-1] // all but the keyUp
	} else {
		events = events[len(events)-1:]
	}
	return t.actOn(ctx, func() (string, error) {
		t.call.inputAt = time.Now()
		if action == "down" {
			bits |= modBit // as a browser says shiftKey on Shift's own keydown
		}
		for _, ev := range events {
			// A key going up is no longer held in its own event.
			ev.Modifiers = bits | t.pointer.mods&^modBit
			if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, *ev); err != nil {
				return "", err
			}
		}
		if action == "up" {
			t.pointer.mods &^= modBit
			return "Released " + p.GetKey(), nil
		}
		t.pointer.mods |= modBit
		return "Holding " + p.GetKey() + " down", nil
	})
}
