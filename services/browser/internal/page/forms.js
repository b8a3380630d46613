// forms.js holds the page side of the form, drag and Markdown tools. It runs in
// Sovereign's isolated world next to page.js (whose __sov it uses for element
// descriptions): page.js's install puts this object at globalThis.__sovForms,
// and Go calls its methods by name through call.js (jscall.go), with this
// bound to the object.
/* global __sov -- page.js's api, installed in the same world */
({
  // norm collapses white space, as labels are compared.
  norm(s) {
    return String(s == null ? '' : s).replace(/\s+/g, ' ').trim();
  },

  labelOf(o) {
    return this.norm(o.label || o.text);
  },

  fire(el, type) {
    el.dispatchEvent(new Event(type, { bubbles: true }));
  },

  // selectOptions selects the options of a select element that values name
  // (each an option's value, else its visible label, case-insensitive): a
  // single select takes one, a multiple select has exactly these selected
  // afterwards. input and change fire once, as when a person picks.
  selectOptions(el, values, prefix) {
    const desc = __sov.describe(el, prefix);
    if (el.tagName !== 'SELECT') return { error: 'not-select', desc };
    if (el.matches(':disabled')) return { error: 'disabled', desc };
    const opts = Array.from(el.options);
    const labels = opts.slice(0, 50).map((o) => this.labelOf(o) + (o.value !== this.labelOf(o) ? ' (value ' + JSON.stringify(o.value) + ')' : ''));
    if (!el.multiple && values.length > 1) return { error: 'single', desc, options: labels };
    const chosen = new Set();
    const missing = [];
    const disabled = [];
    for (const v of values) {
      const want = this.norm(v).toLowerCase();
      const o = opts.find((opt) => opt.value === v) || opts.find((opt) => this.labelOf(opt).toLowerCase() === want);
      if (!o) missing.push(v);
      else if (o.matches(':disabled')) disabled.push(v); // in a disabled optgroup too
      else chosen.add(o);
    }
    if (missing.length) return { error: 'option', desc, missing, options: labels, total: opts.length };
    if (disabled.length) return { error: 'option-disabled', desc, missing: disabled };
    const before = opts.map((o) => o.selected).join();
    if (el.multiple) {
      for (const o of opts) o.selected = chosen.has(o);
    } else if (chosen.size) {
      [...chosen][0].selected = true; // not el.value: options may share a value
    }
    const changed = opts.map((o) => o.selected).join() !== before;
    if (changed) {
      this.fire(el, 'input');
      this.fire(el, 'change');
    }
    return { desc, changed, selected: Array.from(el.selectedOptions, (o) => this.labelOf(o)).slice(0, 50),
      nSelected: el.selectedOptions.length };
  },

  // checkState says what kind of toggle el is and whether it is checked: a
  // native checkbox or radio, or an ARIA checkbox, switch, radio or checkable
  // menu item (aria-checked). A label stands for its control.
  checkState(el, prefix) {
    if (el.tagName === 'LABEL' && el.control) el = el.control;
    const desc = __sov.describe(el, prefix);
    if (!el.isConnected) return { error: 'gone', desc };
    if (el.tagName === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) {
      return { kind: el.type, checked: el.checked, disabled: el.matches(':disabled'), desc };
    }
    const role = (el.getAttribute('role') || '').trim().split(/\s+/)[0];
    const roles = ['checkbox', 'switch', 'radio', 'menuitemcheckbox', 'menuitemradio'];
    if (roles.includes(role)) {
      const v = el.getAttribute('aria-checked');
      return { kind: role, aria: true, checked: v === 'true', mixed: v === 'mixed',
        disabled: el.getAttribute('aria-disabled') === 'true', desc };
    }
    return { error: 'not-toggle', desc, role: role || el.tagName.toLowerCase() };
  },

  // checkSettled reads el's state (checkState) until it is want, for at most
  // frames turns of 16 ms: a framework may render an ARIA toggle's new state
  // a frame after the click.
  async checkSettled(el, prefix, want, frames) {
    for (let i = 0; ; i++) {
      const s = this.checkState(el, prefix);
      if (s.error || s.checked === want || i >= frames) return s;
      await new Promise((r) => { setTimeout(r, 16); });
    }
  },

  // toggle clicks el with a synthetic click: the fallback for a native
  // checkbox or radio that has no box to click (a styled one hides the input
  // and shows its label).
  toggle(el) {
    if (el.tagName === 'LABEL' && el.control) el = el.control;
    el.click();
    return true;
  },

  // watchDrag notes whether the page starts an HTML5 drag (dragstart) from
  // now on; dragStarted tells.
  watchDrag() {
    if (this.dragWatch) removeEventListener('dragstart', this.dragWatch.on, true);
    const w = { started: false };
    w.on = () => { w.started = true; };
    addEventListener('dragstart', w.on, true);
    this.dragWatch = w;
    return true;
  },

  dragStarted() {
    const w = this.dragWatch;
    return { started: !!(w && w.started) };
  },

  // markdown renders the readable content of root (the page when null) as Markdown: headings,
  // paragraphs, lists, tables, links and images with absolute URLs, code
  // blocks, quotes. Scripts, styles, form controls and hidden elements are
  // left out. The walk stops once it has well over max characters:
  // {s, total, more}.
  markdown(root, max) {
    if (!root) root = document.body || document.documentElement;
    const F = this;
    const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'SVG', 'CANVAS', 'IFRAME',
      'OBJECT', 'EMBED', 'SELECT', 'INPUT', 'TEXTAREA', 'BUTTON', 'DIALOG']);
    const budget = max * 2 + 1000;
    let size = 0;
    let more = false;
    const hidden = (el) => el.getAttribute('aria-hidden') === 'true' ||
      (el.checkVisibility && !el.checkVisibility({ visibilityProperty: true }));
    const isInline = (el) => {
      if (el.tagName === 'IMG' || el.tagName === 'BR') return true;
      const d = getComputedStyle(el).display;
      return d.startsWith('inline');
    };
    const url = (u) => (u && !/^javascript:/i.test(u) ? u.replace(/[()\s]/g, (c) => encodeURIComponent(c)) : '');
    const escape = (s) => s.replace(/([\\`*_[\]<>|])/g, '\\$1');

    function inline(el) {
      let out = '';
      for (const n of el.childNodes) {
        if (n.nodeType === 3) { out += escape(n.data.replace(/\s+/g, ' ')); continue; }
        if (n.nodeType !== 1 || SKIP.has(n.tagName) || hidden(n)) continue;
        const tag = n.tagName;
        if (tag === 'BR') { out += '\n'; continue; }
        if (tag === 'IMG') {
          const src = url(n.currentSrc || n.src);
          if (src) out += '![' + escape(F.norm(n.alt)) + '](' + src + ')';
          continue;
        }
        const inner = inline(n);
        const text = inner.trim();
        if (!text) { out += inner; continue; }
        if (tag === 'A' && url(n.href)) out += '[' + text + '](' + url(n.href) + ')';
        else if (tag === 'STRONG' || tag === 'B') out += '**' + text + '**';
        else if (tag === 'EM' || tag === 'I') out += '*' + text + '*';
        else if (tag === 'CODE' || tag === 'KBD' || tag === 'SAMP') out += '`' + (n.textContent || '').replace(/`/g, "'") + '`';
        else out += (/^\s/.test(inner) ? ' ' : '') + text + (/\s$/.test(inner) ? ' ' : '');
      }
      return out;
    }

    const clean = (s) => s.split('\n').map((l) => l.replace(/[ \t]+/g, ' ').trim()).join('\n').trim();

    function push(out, s) {
      if (!s || more) return;
      out.push(s);
      size += s.length + 2;
      if (size > budget) more = true;
    }

    function list(el) {
      const lines = [];
      let i = Number(el.getAttribute('start')) || 1;
      for (const li of el.children) {
        if (li.tagName !== 'LI' || hidden(li)) continue;
        const sub = [];
        blocks(li, sub);
        const body = sub.join('\n');
        if (!body) continue;
        const mark = el.tagName === 'OL' ? (i++) + '. ' : '- ';
        lines.push(body.split('\n').map((l, j) => (j === 0 ? mark : ' '.repeat(mark.length)) + l).join('\n'));
      }
      return lines.join('\n');
    }

    function table(el) {
      const rows = Array.from(el.rows).filter((r) => !hidden(r)).slice(0, 500);
      if (!rows.length) return '';
      const cells = rows.map((r) => Array.from(r.cells, (c) => clean(inline(c)).replace(/\n/g, ' ').replace(/\|/g, '\\|')));
      const width = Math.min(50, Math.max(...cells.map((r) => r.length)));
      const line = (r) => '| ' + Array.from({ length: width }, (_, i) => r[i] || '').join(' | ') + ' |';
      const out = [line(cells[0]), '|' + ' --- |'.repeat(width)];
      for (const r of cells.slice(1)) out.push(line(r));
      return out.join('\n');
    }

    function blocks(el, out) {
      let buf = '';
      const flush = () => { push(out, clean(buf)); buf = ''; };
      for (const n of el.childNodes) {
        if (more) return;
        if (n.nodeType === 3) { buf += escape(n.data.replace(/\s+/g, ' ')); continue; }
        if (n.nodeType !== 1 || SKIP.has(n.tagName) || hidden(n)) continue;
        if (isInline(n)) {
          if (n.tagName === 'BR') buf += '\n';
          else buf += inline({ childNodes: [n] });
          continue;
        }
        flush();
        const tag = n.tagName;
        const h = /^H([1-6])$/.exec(tag);
        if (h) push(out, '#'.repeat(Number(h[1])) + ' ' + clean(inline(n)).replace(/\n/g, ' '));
        else if (tag === 'P') push(out, clean(inline(n)));
        else if (tag === 'UL' || tag === 'OL') push(out, list(n));
        else if (tag === 'PRE') {
          const code = n.querySelector('code');
          const lang = code && /language-(\S+)/.exec(code.className);
          push(out, '```' + (lang ? lang[1] : '') + '\n' + (n.innerText || n.textContent).replace(/\n$/, '') + '\n```');
        } else if (tag === 'TABLE') push(out, table(n));
        else if (tag === 'HR') push(out, '---');
        else if (tag === 'BLOCKQUOTE') {
          const sub = [];
          blocks(n, sub);
          push(out, sub.join('\n\n').split('\n').map((l) => '> ' + l).join('\n'));
        } else blocks(n, out);
      }
      flush();
    }

    const out = [];
    if (root.tagName === 'HTML') root = document.body || root;
    if (!root) return { s: '', total: 0 };
    if (isInline(root) && root !== document.body) push(out, clean(inline({ childNodes: [root] })));
    else blocks({ childNodes: root.tagName === 'TABLE' || root.tagName === 'UL' || root.tagName === 'OL' || root.tagName === 'PRE' || /^H[1-6]$/.test(root.tagName) || root.tagName === 'P' ? [root] : root.childNodes }, out);
    const s = out.join('\n\n');
    return s.length > max ? { s: s.slice(0, max), total: s.length, more } : { s, total: s.length, more };
  },
})
