// eval_element.js calls an eval script, a function, with an element (this) in
// the page's main world of the element's frame. eval.go puts the script in place
// of the placeholder and sends this as Runtime.callFunctionOn's function declaration
// for an element of a child frame (V8's deadline does not reach such a call), or
// for one of the main frame inside eval_parked.js.
/* exported evalElement -- Runtime.callFunctionOn's function declaration */
function evalElement() {
  const f = (
__SCRIPT__
  );
  if (typeof f !== 'function') throw new TypeError('with an element, script must be a function of it, such as (el) => el.textContent');
  return f(this);
}
