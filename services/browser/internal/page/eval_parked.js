// eval_parked.js calls eval_element.js (in place of the function placeholder)
// with an element of the main frame that eval.go parked under a one-time global
// name (park.js; in place of the key placeholder). It takes the element back before the script runs. eval.go
// evaluates it as an expression (Runtime.evaluate), which V8 stops at the
// deadline.
(() => {
  const el = globalThis[__KEY__];
  delete globalThis[__KEY__];
  return (__FUNCTION__).call(el);
})()
