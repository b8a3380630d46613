// page.js runs in Sovereign's isolated world of one frame (Page.createIsolatedWorld),
// so the page can neither see nor break it. The Go side evaluates this file as
//
//	(<this function>)(startRef, <forms.js>)
//
// once per frame document. It installs globalThis.__sov (and forms.js's api as
// globalThis.__sovForms) and returns the next ref number. Go calls the functions
// of both by name through call.js (jscall.go), one typed wrapper each. Refs are numbers per frame; the Go side adds the frame prefix (e5, f1e2).
// An element keeps its ref for as long as it exists: refOf is a WeakMap from element
// to number and byRef a Map from number to WeakRef(element).
(function install(startRef, forms) {
  'use strict';
  if (globalThis.__sov) return globalThis.__sov.next();
  globalThis.__sovForms = forms;

  const refOf = new WeakMap();
  const byRef = new Map();
  let nextRef = startRef;

  function ref(el) {
    let n = refOf.get(el);
    if (n === undefined) {
      n = nextRef++;
      refOf.set(el, n);
      byRef.set(n, new WeakRef(el));
    }
    return n;
  }

  function lookup(n) {
    const w = byRef.get(n);
    const el = w && w.deref();
    if (!el) {
      byRef.delete(n);
      return null;
    }
    return el.isConnected ? el : null;
  }

  // prune drops the refs of collected elements once the table has doubled
  // since the last time, so a long-lived page that churns elements stays
  // small.
  let pruneAt = 4096;
  function prune() {
    if (byRef.size < pruneAt) return;
    for (const [n, w] of byRef) {
      if (!w.deref()) byRef.delete(n);
    }
    pruneAt = Math.max(4096, 2 * byRef.size);
  }

  // ---- activity ----------------------------------------------------------

  // The page's DOM mutations, for settling after an action: how many there
  // were and when the last one happened. Style attribute changes (the
  // frames of an animation) do not count.
  let mutations = 0;
  let lastMutation = -1e9;
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type !== 'attributes' || r.attributeName !== 'style') {
        mutations++;
        lastMutation = performance.now();
        return;
      }
    }
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });

  function sleep(ms) {
    return new Promise((resolve) => {
      setTimeout(resolve, Math.max(0, ms));
    });
  }

  // nextFrame resolves after the next animation frame and the task after
  // it (or after max ms: a hidden tab runs no frames).
  function nextFrame(max) {
    return new Promise((resolve) => {
      let done = false;
      const fin = () => {
        if (!done) {
          done = true;
          setTimeout(resolve, 0);
        }
      };
      requestAnimationFrame(fin);
      setTimeout(fin, max);
    });
  }

  // settle waits for the page to react to an action, then for its DOM
  // to be quiet.
  //
  // First (when first is set) it waits for the page's reaction: a page
  // that changed its DOM during the action itself (since its input, which
  // came since ms ago) rendered synchronously and its microtasks have
  // run, so only the tasks it queued are waited for (one task: a
  // debounced render with setTimeout(0) runs before it); otherwise the
  // page may render in the next frame (a renderer that redraws with
  // requestAnimationFrame), so settle waits for the frame and the task
  // after it. Waiting for a whole frame after a page that already reacted
  // would cost ~16 ms for nothing (after an input, Chromium runs the frame
  // before other tasks).
  //
  // Then, when the DOM changed since the call, after is set or this is a
  // later round (the caller saw requests), it waits until the DOM has not
  // changed for quiet ms and at least after ms have passed since the call
  // (a route change: the router may render in its hashchange handler or a
  // task after it), and a frame and a task have passed since its last
  // change (on a busy machine the clock alone says quiet before the page
  // ran what it queued), at most max ms in all. It
  // reports whether the DOM changed after the call started, how long it
  // has been quiet, and the page's address and title (cut to 1000
  // characters).
  async function settle(quiet, max, after, since, first) {
    const start = performance.now();
    const m0 = mutations;
    if (first) {
      const reacted = since >= 0 && lastMutation >= start - since - 1;
      if (reacted) await sleep(0);
      else await nextFrame(Math.min(50, max));
    }
    const changed = mutations !== m0;
    if (changed || after > 0 || !first) {
      for (;;) {
        const now = performance.now();
        const left = max - (now - start);
        const need = Math.max(quiet - (now - lastMutation), after - (now - start));
        if (left <= 0) break;
        if (need > 0) {
          await sleep(Math.min(need, left) + 1);
          continue;
        }
        // Quiet long enough by the clock; on a busy machine the page may
        // not have run what it queued yet (a script that just loaded):
        // quiet counts only once a frame and a task have passed without a
        // change (requestIdleCallback would say it better, but some pages
        // never get an idle period in headless Chromium).
        const m = mutations;
        await nextFrame(Math.min(quiet, left));
        if (mutations === m) break;
      }
    }
    const title = document.title;
    return { changed: changed || mutations !== m0, quietFor: Math.round(performance.now() - lastMutation),
      url: location.href, title: clip(title, 1000), titleLen: title.length };
  }

  // ---- roles -----------------------------------------------------------

  const INPUT_ROLES = {
    button: 'button', submit: 'button', reset: 'button', image: 'button', file: 'button',
    checkbox: 'checkbox', radio: 'radio', range: 'slider', number: 'spinbutton',
    search: 'searchbox', email: 'textbox', tel: 'textbox', text: 'textbox', url: 'textbox',
    password: 'textbox',
  };
  const TEXT_INPUTS = new Set(['', 'text', 'search', 'email', 'tel', 'url', 'password']);

  const TAG_ROLES = {
    BUTTON: 'button', TEXTAREA: 'textbox', OPTION: 'option',
    H1: 'heading', H2: 'heading', H3: 'heading', H4: 'heading', H5: 'heading', H6: 'heading',
    UL: 'list', OL: 'list', MENU: 'list', LI: 'listitem', NAV: 'navigation', MAIN: 'main',
    ASIDE: 'complementary', FORM: 'form', ARTICLE: 'article', TABLE: 'table', TR: 'row',
    TD: 'cell', THEAD: 'rowgroup', TBODY: 'rowgroup', TFOOT: 'rowgroup', P: 'paragraph',
    DIALOG: 'dialog', DETAILS: 'group', SUMMARY: 'button', FIELDSET: 'group', HR: 'separator',
    PROGRESS: 'progressbar', METER: 'meter', IFRAME: 'iframe', FRAME: 'iframe',
    BLOCKQUOTE: 'blockquote', FIGURE: 'figure', DT: 'term', DD: 'definition', OUTPUT: 'status',
    CAPTION: 'caption', SEARCH: 'search', CODE: 'code',
  };

  // SKIP holds the local names, lower-cased, of elements that never show
  // their text in place: HTML's (whose tagName is upper-case), and SVG's
  // and MathML's (whose tagName is not): an inline SVG's <style> is text
  // that no one sees, not part of a name.
  const SKIP = new Set(['script', 'style', 'noscript', 'template', 'head', 'meta', 'link',
    'title', 'base', 'param', 'source', 'track', 'datalist',
    'defs', 'desc', 'metadata', 'clippath', 'mask', 'symbol', 'lineargradient', 'radialgradient',
    'pattern', 'filter', 'marker', 'annotation', 'annotation-xml']);

  function skipped(el) {
    return SKIP.has(el.localName.toLowerCase());
  }

  const INTERACTIVE = new Set(['button', 'link', 'textbox', 'searchbox', 'checkbox', 'radio',
    'combobox', 'listbox', 'option', 'slider', 'spinbutton', 'switch', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'treeitem']);

  // Roles whose accessible name comes from their content (accname; a row
  // is named by its cells, as Chromium's accessibility tree names it).
  const NAME_FROM_CONTENT = new Set(['button', 'link', 'heading', 'option', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'treeitem', 'cell', 'columnheader', 'rowheader',
    'checkbox', 'radio', 'switch', 'tooltip', 'gridcell', 'term', 'row']);

  // Roles that have no name from their content in the accessibility tree,
  // but take one in a snapshot when they are interactive (focusable,
  // clickable): the interactive tree shows no text, so a focusable item of
  // a sortable list would otherwise be a bare listitem line.
  function namedWhenInteractive(role) {
    return role === 'generic' || role === 'listitem';
  }

  // Containers kept in interactive mode when compact is off (and they hold something).
  const STRUCTURAL = new Set(['navigation', 'main', 'banner', 'contentinfo', 'complementary',
    'form', 'region', 'search', 'list', 'listitem', 'table', 'row', 'cell', 'columnheader',
    'rowheader', 'group', 'menu', 'menubar', 'tablist', 'toolbar', 'tree', 'grid', 'article',
    'radiogroup', 'tabpanel']);

  // Containers always kept in interactive mode (when they hold something):
  // a model must know it is in a dialog, and which row a row's checkbox
  // or button belongs to (the row is named by its cells).
  const CONTEXT = new Set(['dialog', 'alertdialog', 'row']);

  function landmarkScoped(el) {
    return !!el.parentElement && !!el.parentElement.closest('article,aside,main,nav,section');
  }

  function editableRoot(el) {
    return el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable);
  }

  function roleOf(el, tag) {
    const explicit = el.getAttribute('role');
    if (explicit) {
      const first = explicit.trim().split(/\s+/)[0];
      if (first) return first.toLowerCase();
    }
    const role = implicitRole(el, tag);
    return role === 'generic' && editableRoot(el) ? 'textbox' : role;
  }

  function implicitRole(el, tag) {
    switch (tag) {
      case 'A':
      case 'AREA':
        return el.hasAttribute('href') ? 'link' : 'generic';
      case 'INPUT': {
        const type = (el.getAttribute('type') || '').toLowerCase();
        if (type === 'hidden') return '';
        if (el.hasAttribute('list') && TEXT_INPUTS.has(type)) return 'combobox';
        return INPUT_ROLES[type] || 'textbox';
      }
      case 'SELECT':
        return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
      case 'IMG':
        return el.getAttribute('alt') === '' ? 'presentation' : 'img';
      case 'SVG':
      case 'svg':
        return 'img';
      case 'HEADER':
        return landmarkScoped(el) ? 'generic' : 'banner';
      case 'FOOTER':
        return landmarkScoped(el) ? 'generic' : 'contentinfo';
      case 'SECTION':
        return el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') ? 'region' : 'generic';
      case 'TH':
        return el.getAttribute('scope') === 'row' ? 'rowheader' : 'columnheader';
      default:
        return TAG_ROLES[tag] || 'generic';
    }
  }

  // ---- names and text --------------------------------------------------

  function norm(s) {
    return s.replace(/[\s\u00a0]+/g, ' ').trim();
  }

  // clip cuts s to max characters with an ellipsis: in Go, after the
  // secrets are scrubbed (limits.go's resolveClips), so the cut is marked
  // here and keeps 2048 more characters for the scrubber to see.
  function clip(s, max) {
    if (s.length <= max) return s;
    s = s.replace(/[\uE000-\uE002]/g, '');
    if (s.length <= max) return s;
    const room = max - 1 + 2048;
    return '\uE000' + (max - 1) + (s.length > room ? '+' : '') + '\uE001' + s.slice(0, room) + '\uE002';
  }

  function hiddenAttr(el) {
    return el.getAttribute('aria-hidden') === 'true';
  }

  // GENERATED finds the strings and attr() of a computed CSS content.
  const GENERATED = /"((?:[^"\\]|\\.)*)"|attr\(\s*([\w-]+)\s*\)/g;
  // ICONS are the private-use characters of icon fonts.
  const ICONS = /[\ue000-\uf8ff]|[\udb80-\udbff][\udc00-\udfff]/g;

  // WORDY says a text has a letter or a digit.
  const WORDY = /[\p{L}\p{N}]/u;

  // generated returns the text that CSS puts before or after el (content:
  // "Normal" or attr(data-label), as a picker shows its value), which a
  // name from content includes (accname). Icon-font glyphs and marks
  // alone (a checkbox's drawn tick, an arrow) are left out: they tell a
  // model less than the name the element takes from where it sits.
  function generated(el, pseudo) {
    if (FORM_FIELDS.has(el.tagName)) return '';
    const c = getComputedStyle(el, pseudo).content;
    if (!c || c === 'none' || c === 'normal') return '';
    let s = '';
    GENERATED.lastIndex = 0;
    for (let m; (m = GENERATED.exec(c));) {
      s += m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (el.getAttribute(m[2]) || '');
    }
    s = s.replace(ICONS, '');
    return WORDY.test(s) ? s : '';
  }

  const FORM_FIELDS = new Set(['INPUT', 'SELECT', 'TEXTAREA', 'IMG']);

  // textOf returns the visible text of el's subtree (alt text for images,
  // CSS generated text unless plain: a value is what the field holds, not
  // the placeholder CSS shows in an empty editor), with a space at block
  // boundaries. skip is an element to leave out.
  function textOf(el, skip, plain) {
    const out = [];
    let left = 400;
    const walk = (node) => eachChild(node, (c) => {
      if (left <= 0) return false;
      if (c.nodeType === 3) {
        out.push(c.data);
        left -= c.data.length;
        return true;
      }
      if (c.nodeType !== 1 || c === skip || skipped(c) || hiddenAttr(c)) return true;
      const cs = getComputedStyle(c);
      if (cs.display === 'none') return true;
      const tag = c.tagName;
      if (tag === 'IMG' || tag === 'AREA') {
        out.push(' ' + (c.getAttribute('alt') || '') + ' ');
        return true;
      }
      if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') return true;
      const block = !cs.display.startsWith('inline');
      if (block) out.push(' ');
      walkWith(c);
      if (block) out.push(' ');
      return true;
    });
    // CSS text is looked for on el and on empty elements (a label that
    // CSS fills), not on every element: it costs a style each.
    const walkWith = (e) => {
      const css = !plain && (e === el || !e.firstChild);
      if (css) out.push(generated(e, '::before'));
      walk(e.shadowRoot || e);
      if (css) out.push(generated(e, '::after'));
    };
    walkWith(el);
    return norm(out.join(''));
  }

  // slotted returns the nodes assigned to a slot, or null when node is not a
  // slot with assigned nodes (then its own children are walked).
  function slotted(node) {
    if (node.tagName !== 'SLOT') return null;
    const assigned = node.assignedNodes({ flatten: true });
    return assigned.length ? assigned : null;
  }

  // eachChild calls fn for each child of node, following shadow roots and slots.
  function eachChild(node, fn) {
    const assigned = slotted(node);
    if (assigned) {
      for (const c of assigned) if (fn(c) === false) return;
      return;
    }
    for (let c = node.firstChild; c; c = c.nextSibling) if (fn(c) === false) return;
  }

  function labelledBy(el) {
    const ids = el.getAttribute('aria-labelledby');
    if (!ids) return '';
    const root = el.getRootNode();
    const parts = [];
    for (const id of ids.split(/\s+/)) {
      const target = id && (root.getElementById ? root.getElementById(id) : document.getElementById(id));
      if (target) parts.push(target.getAttribute('aria-label') || textOf(target));
    }
    return parts.join(' ');
  }

  function labelsOf(el) {
    const labels = el.labels;
    if (!labels || !labels.length) return '';
    const parts = [];
    for (const l of labels) parts.push(textOf(l, el));
    return parts.join(' ');
  }

  function nameOf(el, tag, role, fromContent) {
    let s = labelledBy(el) || el.getAttribute('aria-label') || '';
    if (!s) {
      switch (tag) {
        case 'INPUT': {
          const type = (el.getAttribute('type') || '').toLowerCase();
          if (type === 'button' || type === 'submit' || type === 'reset') {
            s = el.value || (type === 'submit' ? 'Submit' : type === 'reset' ? 'Reset' : '');
          } else if (type === 'image') {
            s = el.getAttribute('alt') || el.value || 'Submit';
          } else {
            s = labelsOf(el) || el.getAttribute('title') || el.getAttribute('placeholder') || '';
          }
          break;
        }
        case 'TEXTAREA':
        case 'SELECT':
          s = labelsOf(el) || el.getAttribute('title') || el.getAttribute('placeholder') || '';
          break;
        case 'IMG':
        case 'AREA':
          s = el.getAttribute('alt') || '';
          break;
        case 'FIELDSET': {
          const legend = el.querySelector(':scope > legend');
          s = legend ? textOf(legend) : '';
          break;
        }
        case 'TABLE': {
          const cap = el.querySelector(':scope > caption');
          s = cap ? textOf(cap) : '';
          break;
        }
        case 'FIGURE': {
          const cap = el.querySelector(':scope > figcaption');
          s = cap ? textOf(cap) : '';
          break;
        }
        case 'SVG':
        case 'svg': {
          const t = el.querySelector(':scope > title');
          s = t ? t.textContent : '';
          break;
        }
        case 'IFRAME':
        case 'FRAME':
          s = el.getAttribute('title') || '';
          break;
      }
    }
    if (tag === 'INPUT' && (el.getAttribute('type') || '').toLowerCase() === 'file') {
      // A model knows what to do with "Choose file" (upload_file).
      s = s || el.getAttribute('title') || '';
      return clip(norm(s ? 'Choose file: ' + s : 'Choose file'), 120);
    }
    if (!s && (fromContent || NAME_FROM_CONTENT.has(role))) s = textOf(el);
    if (!s) s = el.getAttribute('title') || '';
    return clip(norm(s), 120);
  }

  // ---- states and values -----------------------------------------------

  const FORM_CONTROLS = new Set(['BUTTON', 'INPUT', 'SELECT', 'TEXTAREA', 'OPTION', 'OPTGROUP', 'FIELDSET']);

  function statesOf(el, tag, role) {
    let s = '';
    const ac = el.getAttribute('aria-checked');
    if (tag === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) {
      if (el.indeterminate) s += ' [checked=mixed]';
      else if (el.checked) s += ' [checked]';
    } else if (ac === 'true') {
      s += ' [checked]';
    } else if (ac === 'mixed') {
      s += ' [checked=mixed]';
    }
    if ((FORM_CONTROLS.has(tag) && el.matches(':disabled')) || el.getAttribute('aria-disabled') === 'true') {
      s += ' [disabled]';
    }
    if (el.getAttribute('aria-expanded') === 'true' ||
        (tag === 'SUMMARY' && el.parentElement && el.parentElement.tagName === 'DETAILS' && el.parentElement.open)) {
      s += ' [expanded]';
    }
    let level = parseInt(el.getAttribute('aria-level'), 10);
    if (!level && role === 'heading' && /^H[1-6]$/.test(tag)) level = +tag[1];
    if (level) s += ' [level=' + level + ']';
    const ap = el.getAttribute('aria-pressed');
    if (ap === 'true') s += ' [pressed]';
    else if (ap === 'mixed') s += ' [pressed=mixed]';
    if ((tag === 'OPTION' && el.selected) || el.getAttribute('aria-selected') === 'true') {
      s += ' [selected]';
    }
    return s;
  }

  // SECRET_AUTOCOMPLETE maps the autocomplete tokens of fields that take
  // a secret to what the secret is.
  const SECRET_AUTOCOMPLETE = new Map([['current-password', 'password'], ['new-password', 'password'],
    ['one-time-code', 'one-time code']]);

  // secretField says what secret el takes: 'password' for a password input
  // or a field whose autocomplete names a password (a "show password"
  // button turns the input into a text input and leaves autocomplete
  // alone), 'one-time code' for autocomplete=one-time-code, else ''. The
  // value of such a field is never shown or returned.
  function secretField(el) {
    if (el.tagName === 'INPUT' && el.type === 'password') return 'password';
    const ac = el.getAttribute('autocomplete');
    if (!ac) return '';
    for (const token of ac.toLowerCase().split(/\s+/)) {
      const s = SECRET_AUTOCOMPLETE.get(token);
      if (s) return s;
    }
    return '';
  }

  // masked stands for the value of a secret field: a dot a character, at
  // most 8.
  function masked(v) {
    return '\u2022'.repeat(Math.min(chars(v), 8));
  }

  // chars returns the number of characters (code points) of s.
  function chars(s) {
    let n = 0;
    for (const _ of s) n++;
    return n;
  }

  function valueOf(el, tag, role) {
    if (tag === 'INPUT') {
      const type = (el.getAttribute('type') || '').toLowerCase();
      if (type === 'file') return clip(Array.from(el.files || [], (f) => f.name).join(', '), 200);
      if (type === 'checkbox' || type === 'radio' || INPUT_ROLES[type] === 'button') return '';
      if (secretField(el)) return masked(el.value);
      return clip(el.value, 200);
    }
    if (tag === 'TEXTAREA') return secretField(el) ? masked(el.value) : clip(el.value, 200);
    if (tag === 'SELECT') {
      const opts = Array.from(el.selectedOptions || [], (o) => norm(o.label || o.text));
      return opts.join(', ');
    }
    if (role === 'textbox' && el.isContentEditable) {
      const v = textOf(el, null, true);
      return secretField(el) ? masked(v) : clip(v, 200);
    }
    const vn = el.getAttribute('aria-valuenow');
    if (vn !== null && (role === 'slider' || role === 'spinbutton' || role === 'progressbar' || role === 'meter')) {
      return el.getAttribute('aria-valuetext') || vn;
    }
    if (tag === 'PROGRESS' || tag === 'METER') return String(el.value);
    return '';
  }

  // ---- the walk ----------------------------------------------------------

  // A node of the output tree is {el, role, name, states, value, url, frame, kids}
  // for an element or {text} for text.

  const LEAF = new Set(['svg', 'SVG', 'IFRAME', 'FRAME', 'TEXTAREA', 'INPUT', 'IMG', 'CANVAS', 'VIDEO', 'AUDIO']);

  function Walker(opts, frames) {
    this.interactive = !!opts.interactive;
    this.compact = !!opts.compact;
    this.frames = frames;
    // The walk stops (stopped: 'time' or 'size') at opts.deadline (ms from
    // the call) or once it kept opts.maxNodes elements, so that a
    // huge page gives a bounded snapshot within the tool's time.
    this.deadline = opts.deadline ? performance.now() + opts.deadline : Infinity;
    this.maxNodes = opts.maxNodes || Infinity;
    // In interactive mode, a container shows at most opts.maxRun rows (or
    // list or tree items) of its own, then a line that says how many
    // more there are.
    this.maxRun = this.interactive ? opts.maxRun || 0 : 0;
    this.seen = 0;
    this.kept = 0;
    this.stopped = '';
  }

  // children appends the output nodes of node's children to out. pointer
  // says whether node has cursor:pointer; showText whether its text shows.
  Walker.prototype.children = function (node, out, pointer, showText) {
    const assigned = node.nodeName === 'SLOT' ? slotted(node) : null;
    if (assigned) {
      for (const c of assigned) this.child(c, out, pointer, showText);
      return;
    }
    if (!showText) {
      // Elements only: touching text nodes would cost a wrapper each.
      let run = 0;
      for (let c = node.firstElementChild; c; c = c.nextElementSibling) {
        const n = out.length;
        this.element(c, out, pointer);
        if (!this.maxRun || out.length !== n + 1 || out[n].el !== c || !RUNS.has(out[n].role)) continue;
        if (++run >= this.maxRun && c.nextElementSibling) {
          const more = countRole(c.nextElementSibling, out[n].role);
          if (more) {
            out.push({ text: '[' + more + ' more ' + out[n].role + 's not shown; take snapshot with find=<their text> to see one]' });
            return;
          }
        }
      }
      return;
    }
    for (let c = node.firstChild; c; c = c.nextSibling) this.child(c, out, pointer, showText);
  };

  // RUNS are the roles of items that a container may hold thousands of.
  const RUNS = new Set(['row', 'listitem', 'treeitem']);

  // countRole counts el and its next element siblings with role.
  function countRole(el, role) {
    let n = 0;
    for (let c = el; c; c = c.nextElementSibling) {
      if (roleOf(c, c.tagName) === role) n++;
    }
    return n;
  }

  Walker.prototype.child = function (c, out, pointer, showText) {
    const type = c.nodeType;
    if (type === 1) {
      this.element(c, out, pointer);
    } else if (type === 3 && showText) {
      const d = c.data;
      if (d.trim()) out.push({ text: d });
      else if (d.length && out.length && out[out.length - 1].text !== undefined) out.push(SPACE);
    }
  };

  // SPACE separates the text of blocks, so words do not run together.
  const SPACE = { text: ' ' };

  // element appends the output of el to out. The children of el go to out
  // first; when el keeps a line of its own, they move under it. Elements
  // that are not shown leave their children in place (hoisted).
  Walker.prototype.element = function (el, out, pointer) {
    if (this.stopped) return;
    if ((++this.seen & 255) === 0 && performance.now() > this.deadline) {
      this.stopped = 'time';
      return;
    }
    const tag = el.tagName;
    if (skipped(el) || (el.hasAttributes() && (hiddenAttr(el) || el.hasAttribute('inert')))) return;
    const cs = getComputedStyle(el);
    const display = cs.display;
    if (display === 'none') return;
    const visible = cs.visibility === 'visible';
    let role = roleOf(el, tag);
    if (role === '') return;
    const isPointer = cs.cursor === 'pointer';
    let interactive = visible && this.isInteractive(el, tag, role, isPointer && !pointer);
    // An interactive element is no presentation (ARIA's conflict
    // resolution): a grid's sortable header label is a generic "Make".
    if (interactive && (role === 'presentation' || role === 'none')) role = 'generic';

    const block = !this.interactive && !display.startsWith('inline');
    if (block) out.push(SPACE);
    const start = out.length;
    if (!LEAF.has(tag)) this.children(el.shadowRoot || el, out, isPointer, visible && !this.interactive);
    // A wrapper that is interactive only by its pointer cursor and holds
    // controls (a component's host around its button, a grid cell's box
    // around its checkbox) is not a target of its own: its controls are.
    if (interactive === POINTER && this.interactive && out.length > start) interactive = false;
    if (!visible || !this.keep(role, interactive, out.length > start)) {
      this.hoist(out, block);
      return;
    }

    const frame = (tag === 'IFRAME' || tag === 'FRAME') ? this.frames.get(el) : undefined;
    let name = nameOf(el, tag, role, interactive && namedWhenInteractive(role));
    const value = valueOf(el, tag, role);
    if (!name && !value && interactive && this.interactive && CONTEXT_ROLES.has(role)) name = contextOf(el);
    if (this.compact && !this.interactive && !interactive && !name) {
      // Drop empty structural wrappers; keep their content.
      if (role === 'generic' || role === 'presentation' || role === 'none' ||
          (out.length === start && frame === undefined && !value)) {
        this.hoist(out, block);
        return;
      }
    }
    const kids = out.length > start ? out.splice(start) : [];
    if (block) out.pop();
    if (++this.kept >= this.maxNodes && !this.stopped) this.stopped = 'size';
    out.push({
      el, role, name, kids, frame, value,
      states: statesOf(el, tag, role),
      url: role === 'link' && el.hasAttribute('href') ? el.getAttribute('href').trim() : '',
    });
  };

  // hoist ends the output of an element that has no line of its own: its
  // children stay where they are, followed by a space after a block.
  Walker.prototype.hoist = function (out, block) {
    if (block) out.push(SPACE);
  };

  // POINTER is what isInteractive says of an element that is interactive
  // only by its pointer cursor.
  const POINTER = 'pointer';

  // isInteractive says whether el is a target: true, POINTER or false.
  Walker.prototype.isInteractive = function (el, tag, role, newPointer) {
    if (INTERACTIVE.has(role)) return true;
    if (editableRoot(el) || el.hasAttribute('onclick')) return true;
    const ti = el.getAttribute('tabindex');
    if (ti !== null && ti !== '' && +ti >= 0 && tag !== 'IFRAME' && tag !== 'FRAME' && !focusGuard(el)) return true;
    return newPointer && tag !== 'LABEL' && tag !== 'HTML' && tag !== 'BODY' ? POINTER : false;
  };

  // focusGuard says whether a focusable element is a focus trap's guard
  // (a grid's or a modal's tab guard): empty, nameless and with no area,
  // nothing a model could act on.
  function focusGuard(el) {
    if (el.firstChild || el.shadowRoot || el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') ||
        el.hasAttribute('title')) return false;
    const r = el.getBoundingClientRect();
    return r.width * r.height < 1;
  }

  // keep says whether an element gets a line of its own in interactive mode
  // (the full tree keeps every visible element, compact or not, and decides
  // on wrappers later).
  Walker.prototype.keep = function (role, interactive, hasKids) {
    if (!this.interactive) return true;
    if (interactive || role === 'heading' || role === 'iframe') return true;
    if (!hasKids) return false;
    if (CONTEXT.has(role)) return true;
    return !this.compact && STRUCTURAL.has(role);
  };

  // ---- context of unnamed controls ------------------------------------------

  // Roles of controls that take a name from where they sit when they have
  // none (interactive mode): the text of their list item, row, label or
  // the nearest heading, so that three checkboxes of a todo list read
  // checkbox "walk dog", not three times checkbox.
  const CONTEXT_ROLES = new Set(['button', 'checkbox', 'radio', 'switch', 'textbox', 'searchbox',
    'combobox', 'slider', 'spinbutton', 'link', 'generic', 'menuitem', 'option', 'listbox']);

  function contextOf(el) {
    let hops = 0;
    for (let a = el.parentElement; a && a !== document.body && hops < 6; a = a.parentElement, hops++) {
      const t = textOf(a, el);
      // A long text is a container of many things, not the item.
      if (t.length > 80) break;
      if (t) return t;
    }
    const h = headingBefore(el);
    return h ? clip(h, 60) : '';
  }

  // headingBefore returns the text of the nearest heading before el in
  // document order (looking back at most a few hundred elements).
  function headingBefore(el) {
    const it = document.createTreeWalker(document.body || document.documentElement, NodeFilter.SHOW_ELEMENT);
    it.currentNode = el;
    for (let n = 0; n < 300; n++) {
      const p = it.previousNode();
      if (!p) break;
      if (/^H[1-6]$/.test(p.tagName) || p.getAttribute('role') === 'heading') return textOf(p);
    }
    return '';
  }

  // ---- output -------------------------------------------------------------

  // eslint-disable-next-line no-control-regex -- control characters are never plain YAML
  const PLAIN = /^[^\s\-?:,[\]{}#&*!|>'"%@`\u0000-\u001f][^\u0000-\u001f]*$/;

  function yamlText(s) {
    if (PLAIN.test(s) && !/: |\s#|\s$/.test(s) && !/^(true|false|null|yes|no|~|[-+]?\d[\d.e+-]*)$/i.test(s)) return s;
    return JSON.stringify(s);
  }

  // mergeText joins runs of text nodes, so "Hello <b>world</b>" is one text.
  function mergeText(kids) {
    const out = [];
    let buf = null;
    for (const k of kids) {
      if (k.text !== undefined) {
        buf = buf === null ? k.text : buf + k.text;
        continue;
      }
      if (buf !== null) {
        const t = norm(buf);
        if (t) out.push({ text: clip(t, 2000) });
        buf = null;
      }
      out.push(k);
    }
    if (buf !== null) {
      const t = norm(buf);
      if (t) out.push({ text: clip(t, 2000) });
    }
    return out;
  }

  function Writer(prefix) {
    this.prefix = prefix;
    this.lines = [];
  }

  Writer.prototype.write = function (nodes, indent) {
    for (const n of mergeText(nodes)) {
      if (n.text !== undefined) this.lines.push(indent + '- text: ' + yamlText(n.text));
      else this.node(n, indent);
    }
  };

  Writer.prototype.node = function (n, indent) {
    const r = this.prefix + 'e' + ref(n.el);
    let line = indent + '- ' + n.role;
    if (n.name) line += ' ' + JSON.stringify(n.name);
    line += n.states + ' [ref=' + r + ']';
    let kids = mergeText(n.kids);
    if (n.name && kids.every((k) => k.text !== undefined) && norm(kids.map((k) => k.text).join(' ')) === n.name) {
      kids = [];
    }
    if (!kids.length && !n.url && n.frame === undefined) {
      if (n.value) line += ': ' + yamlText(n.value);
      this.lines.push(line);
      return;
    }
    if (kids.length === 1 && kids[0].text !== undefined && !n.url && n.frame === undefined && !n.value) {
      this.lines.push(line + ': ' + yamlText(kids[0].text));
      return;
    }
    this.lines.push(line + ':');
    const sub = indent + '  ';
    if (n.url) this.lines.push(sub + '- /url: ' + yamlText(n.url));
    if (n.frame !== undefined) this.lines.push(sub + '\u0001' + n.frame);
    this.write(kids, sub);
  };

  // ---- the api -----------------------------------------------------------

  function snapshot(opts, frameEls) {
    const frames = new Map();
    for (let i = 0; i < frameEls.length; i++) {
      if (frameEls[i]) frames.set(frameEls[i], i);
    }
    const walker = new Walker(opts, frames);
    const top = [];
    if (opts.root) {
      const el = lookup(opts.root);
      if (!el) return { missing: true };
      walker.element(el, top, false);
    } else {
      walker.children(document, top, false, !walker.interactive);
    }
    const w = new Writer(opts.prefix || '');
    w.write(top, '');
    prune();
    return { text: w.lines.join('\n'), next: nextRef, title: clip(document.title, 1000),
      stopped: walker.stopped, seen: walker.seen };
  }

  // describe returns the snapshot line of one element (without children),
  // giving it a ref when it has none.
  function describe(el, prefix) {
    const tag = el.tagName;
    const role = roleOf(el, tag) || 'generic';
    const name = nameOf(el, tag, role, namedWhenInteractive(role));
    let line = role;
    if (name) line += ' ' + JSON.stringify(name);
    line += statesOf(el, tag, role) + ' [ref=' + (prefix || '') + 'e' + ref(el) + ']';
    const v = valueOf(el, tag, role);
    if (v) line += ': ' + yamlText(v);
    return line;
  }

  // ---- element actions ----------------------------------------------------

  // Input types that take a value as a whole (no typing), and types that
  // take no text at all.
  const SET_VALUE = new Set(['color', 'date', 'datetime-local', 'month', 'range', 'time', 'week']);
  const NO_TEXT = new Set(['button', 'submit', 'reset', 'image', 'file', 'hidden', 'checkbox', 'radio']);

  // inView says whether the box r (in this frame's viewport) is fully
  // visible: in this viewport and in those of the same-origin frames
  // around it (an element at the top of a frame that sits below the fold
  // of its page is not: a click at its centre would miss).
  function inView(r) {
    let { top, left, bottom, right } = r;
    if (top < 0 || left < 0 || bottom > innerHeight || right > innerWidth) return false;
    for (const { view, dx, dy } of outerFrames()) {
      top += dy;
      bottom += dy;
      left += dx;
      right += dx;
      if (top < 0 || left < 0 || bottom > view.innerHeight || right > view.innerWidth) return false;
    }
    return true;
  }

  // outerFrames returns the same-origin frames around this document, inner
  // first (at most 16): each frame element, its window, and the offset
  // (dx, dy) from the frame's viewport to that window's.
  function outerFrames() {
    const out = [];
    let win = window;
    for (let depth = 0; depth < 16; depth++) {
      let frame;
      try {
        frame = win.frameElement;
      } catch {
        break;
      }
      if (!frame) break;
      const view = frame.ownerDocument.defaultView;
      const r = frame.getBoundingClientRect();
      const cs = view.getComputedStyle(frame);
      out.push({ frame, view, dx: r.left + frame.clientLeft + parseFloat(cs.paddingLeft),
        dy: r.top + frame.clientTop + parseFloat(cs.paddingTop) });
      win = view;
    }
    return out;
  }

  // point scrolls el into view when it is not fully visible and reports what
  // a click at its centre would hit, so a covered element can be named.
  function point(el, prefix) {
    if (!el.isConnected) return { gone: true };
    let r = el.getBoundingClientRect();
    if (!inView(r)) {
      el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      r = el.getBoundingClientRect();
    }
    const out = { desc: describe(el, prefix), w: r.width, h: r.height,
      x: r.left + r.width / 2, y: r.top + r.height / 2, oneBox: el.getClientRects().length === 1 };
    const hit = hitAt(document, out.x, out.y);
    if (hit && !reaches(hit, el)) out.covered = describe(hit, prefix) + backdropOf(hit, prefix);
    else if (hit) out.covered = frameCover(out.x, out.y);
    return out;
  }

  const DIALOGS = '[role=dialog][aria-modal=true],[role=alertdialog][aria-modal=true],dialog:modal';

  // backdropOf says which modal dialog a nameless covering element belongs to,
  // as ' (the backdrop of dialog "Confirm" [ref=e8])': a modal's overlay
  // sits beside its panel, a few levels up (Shoelace's sl-dialog), and a
  // model told only that "generic [ref=e12]" covers a control cannot
  // tell that it must close the dialog first.
  function backdropOf(hit, prefix) {
    const tag = hit.tagName;
    const role = roleOf(hit, tag) || 'generic';
    if (role === 'dialog' || role === 'alertdialog' || nameOf(hit, tag, role, role === 'generic')) return '';
    let n = hit;
    for (let up = 0; n && up < 4; up++, n = flatParent(n)) {
      if (n.nodeType !== 1) break;
      const d = n.querySelector(DIALOGS) || (n.shadowRoot && n.shadowRoot.querySelector(DIALOGS));
      if (d && d.checkVisibility()) return ' (the backdrop of ' + describe(d, prefix) + ')';
    }
    return '';
  }

  // hitAt returns the element at x, y of root (a document or a shadow
  // root) as a click there would find it: inside open shadow roots, not
  // their hosts (document.elementFromPoint stops at the outermost host).
  function hitAt(root, x, y) {
    let hit = root.elementFromPoint(x, y);
    for (let n = 0; hit && hit.shadowRoot && n < 64; n++) {
      const inner = hit.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    return hit;
  }

  // flatParent returns the parent of node in the flat tree: the slot it is
  // assigned to, the host of its shadow root, or its parent.
  function flatParent(node) {
    if (node.assignedSlot) return node.assignedSlot;
    const p = node.parentNode;
    return p && p.nodeType === 11 && p.host ? p.host : p;
  }

  // reaches says whether a click on hit reaches el: hit is el or inside
  // it (across shadow roots and slots), a label of el or inside one, or a
  // component that holds el (a shadow host, or a custom element whose
  // closed root the hit test cannot enter): it handles clicks on its own
  // box for what it holds.
  function reaches(hit, el) {
    for (let n = hit; n; n = flatParent(n)) {
      if (n === el || (n.tagName === 'LABEL' && n.control === el)) return true;
    }
    if (!hit.shadowRoot && !hit.localName.includes('-')) return false;
    for (let n = el; n; n = flatParent(n)) {
      if (n === hit) return true;
    }
    return false;
  }

  // frameCover looks at the documents around a same-origin frame: x, y
  // (the centre, in the frame's viewport) moves into each parent's
  // viewport, where the hit must be the frame's element. It returns the
  // role and name of what covers the frame there, or ''.
  function frameCover(x, y) {
    for (const { frame, dx, dy } of outerFrames()) {
      x += dx;
      y += dy;
      const hit = hitAt(frame.ownerDocument, x, y);
      if (hit && !reaches(hit, frame)) {
        const tag = hit.tagName;
        const role = roleOf(hit, tag) || 'generic';
        const name = nameOf(hit, tag, role, role === 'generic');
        return role + (name ? ' ' + JSON.stringify(name) : '') + ' (outside the frame)';
      }
    }
    return '';
  }

  function kindOf(el) {
    const tag = el.tagName;
    if (tag === 'SELECT') return 'select';
    if (tag === 'TEXTAREA') return 'text';
    if (tag === 'INPUT') {
      const type = el.type;
      if (NO_TEXT.has(type)) return 'no:' + type;
      return SET_VALUE.has(type) ? 'value' : 'text';
    }
    if (el.isContentEditable) return 'editable';
    return '';
  }

  function fire(el, type) {
    el.dispatchEvent(new Event(type, { bubbles: true }));
  }

  function chooseOption(el, value) {
    const want = norm(value).toLowerCase();
    const opts = Array.from(el.options);
    const o = opts.find((opt) => opt.value === value) ||
      opts.find((opt) => norm(opt.label || opt.text).toLowerCase() === want);
    if (!o) return { error: 'option', options: opts.slice(0, 30).map((opt) => norm(opt.label || opt.text)) };
    if (o.disabled) return { error: 'option-disabled' };
    el.value = o.value;
    if (!o.selected) o.selected = true;
    fire(el, 'input');
    fire(el, 'change');
    return { done: true, value: norm(o.label || o.text) };
  }

  // prepareInput gets el ready for fill (mode "fill": select everything, so
  // inserted text replaces it) or type (mode "type": caret at the end). It
  // sets the value itself where typing makes no sense (select, date, ...).
  // {insert: true} asks the caller to insert the text as keyboard input.
  // For a secret field (see secretField) it says {secret} and, in place of
  // the value it set, its number of characters n.
  // prepareInput readies el for value. With mask (the worker put an
  // operator secret into value), el draws its text as discs from now on,
  // before the text goes in: no screenshot or screencast frame shows it.
  function prepareInput(el, value, mode, mask) {
    if (mask && el.isConnected) el.style.setProperty('-webkit-text-security', 'disc', 'important');
    const r = prepare(el, value, mode);
    const secret = el.isConnected ? secretField(el) : '';
    if (secret) {
      r.secret = secret;
      if (r.value !== undefined) {
        r.n = chars(r.value);
        r.value = '';
      }
    }
    return r;
  }

  function prepare(el, value, mode) {
    if (!el.isConnected) return { error: 'gone' };
    const kind = kindOf(el);
    if (!kind) return { error: 'not-editable' };
    if (kind.startsWith('no:')) return { error: 'input-type', type: kind.slice(3) };
    if (el.matches(':disabled')) return { error: 'disabled' };
    if (el.readOnly) return { error: 'readonly' };
    if (kind === 'select') return mode === 'fill' ? chooseOption(el, value) : { error: 'select' };
    if (kind === 'value') {
      el.focus();
      el.value = mode === 'fill' ? value : el.value + value;
      fire(el, 'input');
      fire(el, 'change');
      if (value !== '' && el.value === '') return { error: 'bad-value', type: el.type };
      return { done: true, value: el.value };
    }
    el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
    el.focus();
    if (kind === 'editable') {
      const range = document.createRange();
      range.selectNodeContents(el);
      if (mode === 'type') range.collapse(false);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    } else if (mode === 'fill') {
      el.select();
    } else {
      try {
        el.setSelectionRange(el.value.length, el.value.length);
      } catch {
        // Some input types (email, number) have no selection API.
      }
    }
    if (mode === 'fill' && value === '') {
      if (kind === 'editable') document.execCommand('delete');
      else {
        el.value = '';
        el.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'deleteContentBackward' }));
      }
      return { done: true, value: '' };
    }
    const focused = el.matches(':focus') || el.matches(':focus-within');
    if (!focused) return { error: 'no-focus' };
    watchInput(el, value);
    return { insert: true };
  }

  // watchInput notes whether el gets an input event from the
  // text the caller inserts next: that is what says the field took it,
  // whatever the page does with the value afterwards.
  let inputWatch = null;
  function watchInput(el, value) {
    unwatchInput();
    const w = { el, value, fired: false };
    w.on = () => { w.fired = true; };
    el.addEventListener('input', w.on, true);
    inputWatch = w;
  }

  function unwatchInput() {
    const w = inputWatch;
    inputWatch = null;
    if (w) {
      w.el.removeEventListener('input', w.on, true);
    }
    return w;
  }

  // finishFill fires change after inserted text (a browser does so when
  // the field loses focus) and returns the value now in the field and its
  // number of characters, {value, n}; for a secret field {secret, n}.
  //
  // accepted says that the field took the inserted text (an input event
  // fired); badNumber that it is a number field that holds text that is
  // not a number.
  function finishFill(el, fireChange) {
    const w = unwatchInput();
    if (!el) el = w && w.el;
    if (!el) return { gone: true, accepted: false };
    const accepted = !w || w.el !== el || w.fired;
    // A number field holds no text that is not a number: its value reads
    // empty right after the insertion.
    const badNumber = el.tagName === 'INPUT' && el.type === 'number' &&
      (!!(el.validity && el.validity.badInput) || (!!w && w.el === el && w.value !== '' && el.value === ''));
    if (el.isConnected && fireChange && !el.isContentEditable && !badNumber) fire(el, 'change');
    const value = el.isContentEditable ? textOf(el, null, true) : el.value;
    const secret = secretField(el);
    const r = secret ? { secret, n: chars(value) } : { value: clip(value, 2000), n: chars(value) };
    r.accepted = accepted;
    r.badNumber = badNumber;
    r.gone = !el.isConnected;
    return r;
  }

  // text returns the text of el (innerText, or a form field's value)
  // and its html the innerHTML, each cut to max characters: {s, total}.
  function text(el, max) {
    const tag = el.tagName;
    let s;
    if (tag === 'INPUT' || tag === 'TEXTAREA') s = el.value;
    else if (tag === 'SELECT') s = Array.from(el.selectedOptions, (o) => o.text).join(', ');
    else s = (el.innerText || el.textContent || '').trim();
    return cut(s, max);
  }

  function html(el, max) {
    return cut(el.innerHTML, max);
  }

  function cut(s, max) {
    return s.length > max ? { s: s.slice(0, max), total: s.length } : { s, total: s.length };
  }

  function focus(el, prefix) {
    el.focus({ focusVisible: true });
    return { desc: describe(el, prefix), ok: el.matches(':focus') || el.matches(':focus-within') };
  }

  // scroll scrolls the page, or the largest scrollable element in the middle
  // of the viewport when the page itself cannot scroll that way.
  function scroll(dx, dy) {
    const page = document.scrollingElement || document.documentElement;
    const can = (el) => (dy && el.scrollHeight > el.clientHeight) || (dx && el.scrollWidth > el.clientWidth);
    const scrollable = (el) => {
      if (!can(el)) return false;
      const cs = getComputedStyle(el);
      const o = dy ? cs.overflowY : cs.overflowX;
      return o === 'auto' || o === 'scroll' || o === 'overlay';
    };
    let target = page;
    if (!can(page) || getComputedStyle(document.body || page).overflow === 'hidden') {
      for (let el = document.elementFromPoint(innerWidth / 2, innerHeight / 2); el; el = el.parentElement) {
        if (el !== page && scrollable(el)) {
          target = el;
          break;
        }
      }
    }
    const x0 = target.scrollLeft, y0 = target.scrollTop;
    target.scrollBy({ left: dx, top: dy, behavior: 'instant' });
    return {
      page: target === page, moved: target.scrollLeft !== x0 || target.scrollTop !== y0,
      x: Math.round(target.scrollLeft), y: Math.round(target.scrollTop),
      w: target.scrollWidth, h: target.scrollHeight, vw: target.clientWidth, vh: target.clientHeight,
    };
  }

  // find reports on the first element that matches selector: null when there
  // is none, else whether it is visible and its snapshot line.
  function find(selector, prefix) {
    const el = document.querySelector(selector);
    if (!el) return null;
    const shown = el.checkVisibility({ visibilityProperty: true }) && el.getClientRects().length > 0;
    return { visible: shown, desc: shown ? describe(el, prefix) : '' };
  }

  // query returns the first element of the document that selector matches
  // (a selector that is not CSS throws).
  function query(selector) {
    return document.querySelector(selector);
  }

  // attr returns the value of el's attribute name, null when it has none.
  function attr(el, name) {
    return el.getAttribute(name);
  }

  // startInput describes el and gets it ready for fill or type
  // (prepareInput): the first call of both, in one round trip.
  function startInput(el, prefix, value, mode, mask) {
    const desc = describe(el, prefix);
    return Object.assign(prepareInput(el, value, mode, mask), { desc });
  }

  // fileInput says whether el is a file input that upload_file can set.
  function fileInput(el, prefix) {
    const file = el.tagName === 'INPUT' && (el.type || '').toLowerCase() === 'file';
    return { file, multiple: file && el.multiple, disabled: !!el.disabled, desc: describe(el, prefix) };
  }

  // docTitle returns the document's title cut to max characters: {s, total}.
  function docTitle(max) {
    return cut(document.title, max);
  }

  // hasText reports whether the body's visible text contains s (lower case).
  function hasText(s) {
    const b = document.body;
    return !!b && b.innerText.toLowerCase().includes(s);
  }

  // viewport returns the viewport's size as "WxH" in CSS pixels.
  function viewport() {
    return innerWidth + 'x' + innerHeight;
  }

  // probe returns the viewport's size and the snapshot line of the element
  // at the point (x, y) of it, for a raw mouse action there.
  function probe(x, y) {
    const el = document.elementFromPoint(x, y);
    return { w: innerWidth, h: innerHeight, desc: el ? describe(el, '') : '' };
  }

  // styles returns the computed values of the CSS properties props of el.
  function styles(el, props, prefix) {
    if (!el.isConnected) return { gone: true };
    const cs = getComputedStyle(el), values = {};
    for (const p of props) values[p] = cs.getPropertyValue(p);
    return { desc: describe(el, prefix), values };
  }

  // webVitals reads the page's Web Vitals: the navigation and paint entries,
  // and LCP and layout shifts from buffered PerformanceObservers (they are not
  // in getEntriesByType). An observer with nothing buffered never calls back,
  // so each waits at most 200 ms.
  async function webVitals() {
    const buffered = (type) => new Promise((done) => {
      let list = [];
      try {
        const o = new PerformanceObserver((l) => { list = list.concat(l.getEntries()); });
        o.observe({ type, buffered: true });
        setTimeout(() => { o.disconnect(); done(list); }, 200);
      } catch {
        done([]); // a type this Chromium does not know
      }
    });
    const [lcps, shifts] = await Promise.all([buffered('largest-contentful-paint'), buffered('layout-shift')]);
    const nav = performance.getEntriesByType('navigation')[0];
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    const out = {};
    if (nav) {
      out.ttfb_ms = nav.responseStart;
      out.dom_content_loaded_ms = nav.domContentLoadedEventEnd;
      out.load_ms = nav.loadEventEnd;
    }
    if (fcp) out.fcp_ms = fcp.startTime;
    const lcp = lcps[lcps.length - 1];
    if (lcp) {
      out.lcp_ms = lcp.startTime;
      const el = lcp.element;
      if (el) {
        let d = el.localName + (el.id ? '#' + el.id : '');
        if (typeof el.className === 'string' && el.className.trim()) d += '.' + el.className.trim().split(/\s+/).join('.');
        out.lcp_element = '<' + d.slice(0, 118) + '>';
      }
    }
    // CLS: the largest session window (1 s gap, 5 s at most).
    let cls = 0, win = 0, start = 0, last = 0, n = 0;
    for (const sh of shifts) {
      if (sh.hadRecentInput) continue;
      if (n++ === 0 || sh.startTime - last > 1000 || sh.startTime - start > 5000) {
        win = 0;
        start = sh.startTime;
      }
      win += sh.value;
      last = sh.startTime;
      cls = Math.max(cls, win);
    }
    out.cls = Math.round(cls * 10000) / 10000;
    out.layout_shifts = n;
    return out;
  }

  globalThis.__sov = {
    next: () => nextRef,
    settle,
    snapshot,
    describe,
    el: lookup,
    point,
    prepareInput,
    finishFill,
    text,
    html,
    focus,
    scroll,
    find,
    query,
    attr,
    startInput,
    fileInput,
    title: docTitle,
    hasText,
    viewport,
    probe,
    styles,
    webVitals,
  };
  return nextRef;
})
