package harness

import (
	"net/http"
	"net/http/httptest"
	"strings"
)

// The component corpus: real UI libraries that others wrote, as their npm
// packages ship them (versions pinned in e2e/corpus/package.json), each
// on a small page: web components with shadow DOM (Shoelace), a rich text
// editor (Quill) and a virtualised data grid (AG Grid). The libraries'
// own bundles are served unmodified under /nm/ (e2e/corpus/node_modules);
// a page sets data-ready on <body> once its components are drawn.

// ComponentPages are the pages of the component corpus by path.
var ComponentPages = map[string]string{
	"/shoelace.html": shoelacePage,
	"/quill.html":    quillPage,
	"/grid.html":     gridPage,
}

// shoelacePage has a switch, a checkbox, a button, an input and a dialog
// of Shoelace, and a link whose inline SVG logo holds a <style>.
const shoelacePage = `<!doctype html><html><head><meta charset="utf-8"><title>Settings</title>
<link rel="stylesheet" href="/nm/@shoelace-style/shoelace/cdn/themes/light.css">
<script type="module" src="/nm/@shoelace-style/shoelace/cdn/shoelace.js"></script></head>
<body>
<a href="/explore"><svg width="20" height="20" viewBox="0 0 20 20"><defs><style>.logo_small_svg__cls-2{fill:#fff}</style></defs>
 <circle cx="10" cy="10" r="9" class="logo_small_svg__cls-2"/></svg> Explore</a>
<h1>Settings</h1>
<sl-switch id="wifi">Wi-Fi</sl-switch>
<sl-checkbox id="news">Newsletter</sl-checkbox>
<sl-input id="name" label="Name"></sl-input>
<sl-button id="open">Open dialog</sl-button>
<sl-dialog id="dlg" label="Confirm"><p>Apply the settings?</p><sl-button slot="footer" id="ok">OK</sl-button></sl-dialog>
<script type="module">
window.changes = [];
const wifi = document.getElementById('wifi');
wifi.addEventListener('sl-change', () => changes.push('wifi=' + wifi.checked));
document.getElementById('open').addEventListener('click', () => document.getElementById('dlg').show());
document.getElementById('ok').addEventListener('click', () => document.getElementById('dlg').hide());
const tags = ['sl-switch', 'sl-checkbox', 'sl-input', 'sl-button', 'sl-dialog'];
await Promise.all(tags.map((t) => customElements.whenDefined(t)));
await Promise.all(Array.from(document.querySelectorAll(tags.join(',')), (el) => el.updateComplete));
document.body.dataset.ready = 'true';
</script>
</body></html>`

// quillPage is Quill's editor with the snow theme's toolbar.
const quillPage = `<!doctype html><html><head><meta charset="utf-8"><title>Editor</title>
<link rel="stylesheet" href="/nm/quill/dist/quill.snow.css">
<script src="/nm/quill/dist/quill.js"></script></head>
<body>
<h1>Note</h1>
<div id="editor" style="height:200px"></div>
<script>
window.quill = new Quill('#editor', { theme: 'snow', placeholder: 'Write something' });
document.body.dataset.ready = 'true';
</script>
</body></html>`

// gridPage is AG Grid with 2,000 cars and row selection checkboxes;
// ?all draws every row (no virtualisation), as some pages do.
const gridPage = `<!doctype html><html><head><meta charset="utf-8"><title>Cars</title>
<script src="/nm/ag-grid-community/dist/ag-grid-community.min.js"></script></head>
<body>
<h1>Cars</h1>
<div id="grid" style="height:500px;width:800px"></div>
<script>
const makes = ['Toyota', 'Ford', 'Porsche', 'BMW', 'Fiat'];
const models = ['Celica', 'Mondeo', 'Boxster', 'M3', 'Panda'];
const rowData = [];
for (let i = 0; i < 2000; i++) rowData.push({ make: makes[i % 5], model: models[i % 5] + ' ' + i, price: 20000 + i * 7 });
const all = location.search.includes('all');
if (all) document.getElementById('grid').style.height = '';
window.api = agGrid.createGrid(document.getElementById('grid'), {
  rowData,
  columnDefs: [{ field: 'make' }, { field: 'model' }, { field: 'price' }],
  rowSelection: { mode: 'multiRow' },
  domLayout: all ? 'autoHeight' : 'normal',
  suppressRowVirtualisation: all,
  onFirstDataRendered: () => { document.body.dataset.ready = 'true'; },
});
</script>
</body></html>`

// ServeComponents serves the component corpus on loopback: the pages of
// ComponentPages and the libraries under /nm/. The caller closes the
// server.
func ServeComponents() (*httptest.Server, error) {
	dir, err := corpusPath()
	if err != nil {
		return nil, err
	}
	for _, pkg := range []string{"@shoelace-style/shoelace", "quill", "ag-grid-community"} {
		if _, err := corpusPath(pkg); err != nil {
			return nil, err
		}
	}
	modules := http.StripPrefix("/nm/", http.FileServer(http.Dir(dir)))
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if strings.HasPrefix(r.URL.Path, "/nm/") {
			modules.ServeHTTP(w, r)
			return
		}
		page, ok := ComponentPages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	})), nil
}
