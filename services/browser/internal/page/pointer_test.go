package page

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

// pointerPage has an HTML5 drag-and-drop list, a pointer-driven slider, a
// canvas that records mouse events, a target for double and right clicks,
// and a log.
const pointerPage = `<!doctype html><title>pointer</title>
<style>
body { margin: 0; font: 14px sans-serif }
#list li { width: 120px; height: 24px; margin: 4px; background: #def }
#track { position: relative; width: 200px; height: 20px; background: #ccc; margin: 10px }
#thumb { position: absolute; left: 0; top: 0; width: 20px; height: 20px; background: #369 }
#end { position: absolute; left: 180px; top: 0; width: 20px; height: 20px }
canvas { display: block; border: 1px solid #000 }
</style>
<ul id="list"><li draggable="true" id="a">Apple</li><li draggable="true" id="b">Banana</li><li draggable="true" id="c">Cherry</li></ul>
<div id="track"><div id="thumb" aria-label="Volume"></div><div id="end"></div></div><output id="value">0</output>
<canvas id="cv" width="300" height="150"></canvas>
<button id="target">Target</button>
<pre id="log"></pre>
<script>
const log = (s) => { document.getElementById('log').textContent += s + '\n'; };
let dragged = null;
for (const li of document.querySelectorAll('#list li')) {
  li.addEventListener('dragstart', (e) => { dragged = li; e.dataTransfer.setData('text/plain', li.id); });
  li.addEventListener('dragover', (e) => e.preventDefault());
  li.addEventListener('drop', (e) => {
    e.preventDefault();
    log('drop ' + e.dataTransfer.getData('text/plain') + ' on ' + li.id);
    li.after(dragged);
  });
}
const thumb = document.getElementById('thumb'), track = document.getElementById('track');
let sliding = false;
thumb.addEventListener('pointerdown', (e) => { sliding = true; thumb.setPointerCapture(e.pointerId); });
thumb.addEventListener('pointermove', (e) => {
  if (!sliding) return;
  const r = track.getBoundingClientRect();
  const x = Math.max(0, Math.min(180, e.clientX - r.left - 10));
  thumb.style.left = x + 'px';
  document.getElementById('value').textContent = Math.round(x / 180 * 100);
});
thumb.addEventListener('pointerup', () => { sliding = false; log('slider ' + document.getElementById('value').textContent); });
const cv = document.getElementById('cv');
for (const t of ['mousedown', 'mousemove', 'mouseup', 'click', 'wheel']) {
  cv.addEventListener(t, (e) => {
    const r = cv.getBoundingClientRect();
    log('canvas ' + t + ' ' + Math.round(e.clientX - r.left) + ',' + Math.round(e.clientY - r.top) + ' buttons=' + e.buttons +
      (t === 'wheel' ? ' dy=' + e.deltaY : '') + (e.shiftKey ? ' shift' : ''));
    if (t === 'wheel') e.preventDefault();
  }, { passive: false });
}
const target = document.getElementById('target');
for (const t of ['click', 'dblclick', 'contextmenu', 'auxclick']) {
  target.addEventListener(t, (e) => {
    log(t + ' button=' + e.button + ' detail=' + e.detail + (e.shiftKey ? ' shift' : '') + (e.ctrlKey ? ' ctrl' : '') + (e.altKey ? ' alt' : ''));
    if (t === 'contextmenu') e.preventDefault();
  });
}
</script>`

func openPointer(t *testing.T) *Tab {
	t.Helper()
	srv := serve(t, map[string]string{"/": pointerPage})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	return tab
}

func pageLog(t *testing.T, tab *Tab) string {
	t.Helper()
	s, err := strconv.Unquote(evalString(t, tab, `document.getElementById('log').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func clickWith(el *browserv1.Element, button string, count int32, mods ...string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: el, Button: button, ClickCount: count, Modifiers: mods}}}
}

func dragReq(from, to *browserv1.Element) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Drag{Drag: &browserv1.Drag{From: from, To: to}}}
}

func mouseReq(action string, x, y float64) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Mouse{Mouse: &browserv1.Mouse{Action: action, X: x, Y: y}}}
}

func pressAction(key, action string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Press{Press: &browserv1.Press{Key: key, Action: action}}}
}

func TestClickOptions(t *testing.T) {
	t.Parallel()
	tab := openPointer(t)
	if got := text(must(t, tab, clickWith(sel("#target"), "", 2))); !strings.HasPrefix(got, `Double-clicked button "Target"`) {
		t.Errorf("double click = %q", got)
	}
	if got := text(must(t, tab, clickWith(sel("#target"), "right", 0))); !strings.HasPrefix(got, "Right-clicked") {
		t.Errorf("right click = %q", got)
	}
	if got := text(must(t, tab, clickWith(sel("#target"), "", 0, "Shift", "Control"))); !strings.HasPrefix(got, "Control+Shift+clicked") {
		t.Errorf("click with modifiers = %q", got)
	}
	got := pageLog(t, tab)
	for _, want := range []string{"click button=0 detail=1\nclick button=0 detail=2\ndblclick button=0 detail=2", "contextmenu button=2", "click button=0 detail=1 shift ctrl"} {
		if !strings.Contains(got, want) {
			t.Errorf("log = %q, want %q", got, want)
		}
	}
	t.Run("errors", func(t *testing.T) {
		_, err := call(t, tab, clickWith(sel("#target"), "side", 0))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `unknown button "side"`)
		_, err = call(t, tab, clickWith(sel("#target"), "", MaxClickCount+1))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("click_count must be 1 to %d (MaxClickCount)", MaxClickCount))
		_, err = call(t, tab, clickWith(sel("#target"), "", 0, "Hyper"))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `unknown modifier "Hyper"`)
	})
}

func TestDragHTML5(t *testing.T) {
	t.Parallel()
	tab := openPointer(t)
	got := text(must(t, tab, dragReq(sel("#a"), sel("#c"))))
	if !strings.Contains(got, "HTML5 drag and drop") {
		t.Errorf("drag = %q, want an HTML5 drag", got)
	}
	if log := pageLog(t, tab); !strings.Contains(log, "drop a on c") {
		t.Errorf("log = %q, want the drop", log)
	}
	if order := evalString(t, tab, `Array.from(document.querySelectorAll('#list li'), (li) => li.id).join('')`); order != `"bca"` {
		t.Errorf("list order after drag = %s, want bca", order)
	}
}

func TestDragPointerSlider(t *testing.T) {
	t.Parallel()
	tab := openPointer(t)
	got := text(must(t, tab, dragReq(sel("#thumb"), sel("#end"))))
	if !strings.Contains(got, "with the mouse") {
		t.Errorf("drag = %q, want a mouse drag", got)
	}
	if v := evalString(t, tab, `document.getElementById('value').textContent`); v != `"100"` {
		t.Errorf("slider value after drag = %s, want 100", v)
	}
	t.Run("errors", func(t *testing.T) {
		_, err := call(t, tab, dragReq(sel("#thumb"), nil))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "drag needs from and to")
		_, err = call(t, tab, dragReq(sel("#thumb"), sel("#nope")))
		wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, `no element matches selector "#nope"`)
	})
}

func TestMouse(t *testing.T) {
	t.Parallel()
	tab := openPointer(t)
	var box struct{ X, Y float64 }
	r := evalString(t, tab, `(() => { const r = document.getElementById('cv').getBoundingClientRect(); return [r.left, r.top]; })()`)
	if _, err := fmt.Sscanf(strings.Trim(r, "[]"), "%g,%g", &box.X, &box.Y); err != nil {
		t.Fatalf("canvas box %s: %v", r, err)
	}
	at := func(dx, dy float64) (float64, float64) { return box.X + dx, box.Y + dy }
	x, y := at(10, 20)
	if got := text(must(t, tab, mouseReq("down", x, y))); !strings.Contains(got, "Pressed the left button at") {
		t.Errorf("mouse down = %q", got)
	}
	x, y = at(50, 60)
	must(t, tab, mouseReq("move", x, y))
	must(t, tab, mouseReq("up", x, y))
	must(t, tab, pressAction("Shift", "down"))
	x, y = at(100, 100)
	must(t, tab, mouseReq("click", x, y))
	must(t, tab, pressAction("Shift", "up"))
	wheel := mouseReq("wheel", x, y)
	wheel.GetMouse().Dy = 120
	must(t, tab, wheel)
	got := pageLog(t, tab)
	for _, want := range []string{"canvas mousedown 10,20 buttons=1", "canvas mousemove 50,60 buttons=1", "canvas mouseup 50,60 buttons=0",
		"canvas click 100,100 buttons=0 shift", "canvas wheel 100,100 buttons=0 dy=120"} {
		if !strings.Contains(got, want) {
			t.Errorf("log = %q, want %q", got, want)
		}
	}
	if strings.Contains(got, "dy=120 shift") {
		t.Errorf("log = %q: Shift was still held after press up", got)
	}
	t.Run("errors", func(t *testing.T) {
		_, err := call(t, tab, mouseReq("click", -1, 10))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "(-1, 10) is outside the viewport")
		_, err = call(t, tab, mouseReq("click", 10, 100000))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "outside the viewport")
		_, err = call(t, tab, mouseReq("jump", 10, 10))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `unknown action "jump"`)
		_, err = call(t, tab, mouseReq("wheel", 10, 10))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "wheel needs dx or dy")
		_, err = call(t, tab, pressAction("a", "hold"))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `unknown action "hold"`)
	})
}

// TestHeldModifierAppliesToPress: a Shift held with press down applies to
// the next key press, until it goes up.
func TestHeldModifierAppliesToPress(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<title>k</title><input id="in"><pre id="log"></pre><script>
		document.getElementById('in').addEventListener('keydown', (e) => {
			document.getElementById('log').textContent += e.key + (e.shiftKey ? '+shift' : '') + ' ';
		});</script>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	must(t, tab, focusReq(sel("#in")))
	must(t, tab, pressAction("Shift", "down"))
	must(t, tab, pressReq("ArrowLeft"))
	must(t, tab, pressAction("Shift", "up"))
	must(t, tab, pressReq("ArrowLeft"))
	if got := pageLog(t, tab); got != "Shift+shift ArrowLeft+shift ArrowLeft " {
		t.Errorf("keys = %q, want Shift held for the first ArrowLeft only", got)
	}
}
