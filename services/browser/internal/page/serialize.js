// serialize.js is called on the result of eval (this) in the page's main world.
// It returns JSON text for values that Runtime cannot return by value: DOM
// nodes, cycles, functions, Maps, Sets, BigInts and errors become readable
// stand-ins instead of failing the call.
/* exported serialize -- Runtime.callFunctionOn's function declaration */
function serialize() {
  'use strict';
  const seen = new WeakSet();
  const describeNode = (n) => {
    if (n.nodeType !== 1) return '#' + n.nodeName.replace(/^#/, '').toLowerCase();
    let s = '<' + n.localName;
    if (n.id) s += ' id="' + n.id + '"';
    if (typeof n.className === 'string' && n.className) s += ' class="' + n.className + '"';
    return s + '>';
  };
  const replacer = function (key, v) {
    switch (typeof v) {
      case 'bigint':
        return v.toString() + 'n';
      case 'function':
        return '[function ' + (v.name || 'anonymous') + ']';
      case 'symbol':
        return v.toString();
      case 'number':
        return Number.isFinite(v) ? v : String(v);
      case 'object':
        break;
      default:
        return v;
    }
    if (v === null) return v;
    if (typeof Node !== 'undefined' && v instanceof Node) return describeNode(v);
    if (typeof Window !== 'undefined' && v instanceof Window) return '[Window ' + (v === window ? 'self' : 'other') + ']';
    if (v instanceof Error) return v.toString();
    if (seen.has(v)) return '[Circular]';
    seen.add(v);
    if (v instanceof Map) return Object.fromEntries(v);
    if (v instanceof Set) return Array.from(v);
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return Array.from(v);
    return v;
  };
  return JSON.stringify(this, replacer);
}
