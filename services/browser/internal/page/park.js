// park.js, called on an element in the page's main world, parks it under the
// one-time global name req.key (eval_parked.js takes it back), or with req.on
// false takes it away again when that script never ran.
/* exported park -- Runtime.callFunctionOn's function declaration */
function park(req) {
  'use strict';
  if (req.on) Object.defineProperty(globalThis, req.key, { value: this, configurable: true });
  else delete globalThis[req.key];
}
