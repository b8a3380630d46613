// forms.js holds the page side of the form, drag and Markdown tools. It runs in
// Sovereign's isolated world next to page.js (whose __sov it uses for element
// descriptions) and is installed on first use: the Go side sends it as
//
//	(globalThis.__sovForms || (globalThis.__sovForms = (<this object>)))
//
// so it stays out of page.js, which every frame document loads whether or not a
// form tool ever runs.
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
      const o = opts.find((o) => o.value === v) || opts.find((o) => this.labelOf(o).toLowerCase() === want);
      if (!o) missing.push(v);
      else if (o.disabled) disabled.push(v);
      else chosen.add(o);
    }
    if (missing.length) return { error: 'option', desc, missing, options: labels, total: opts.length };
    if (disabled.length) return { error: 'option-disabled', desc, missing: disabled };
    const before = opts.map((o) => o.selected).join();
    if (el.multiple) {
      for (const o of opts) o.selected = chosen.has(o);
    } else if (chosen.size) {
      el.value = [...chosen][0].value;
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
})
