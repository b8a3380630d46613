// call.js is the one function declaration through which the Go side calls the
// in-page apis by name (jscall.go): page.js's (globalThis.__sov) and forms.js's
// (globalThis.__sovForms), both installed in Sovereign's isolated world of each
// frame document. Runtime.callFunctionOn sends it with two kinds of argument:
//
//   - req, one JSON value {api, name, args, at, self, objects} (the protocol
//     client leaves out an argument whose JSON is "", null, [] or {}, so the
//     function's arguments travel inside it, as an array);
//   - with objects, then remote objects of the world, which reach the function
//     as one array after its other arguments (snapshot's frame owners).
//
// A function of an element takes the element as its first argument. With self,
// the element is this (the remote object the call is made on). With at, {ref}
// or {selector}, call finds the element itself, so that finding and reading
// take one round trip, and answers {v} with the function's result (awaited),
// {missing: true} when there is no such element, or {badCSS} when the selector
// is not valid CSS.
/* exported call -- Runtime.callFunctionOn's function declaration */
// (No 'use strict' here: V8 refuses it in a function with a rest parameter.)
function call(req, ...objects) {
  const api = globalThis[req.api];
  const fn = api[req.name];
  const args = req.args || [];
  if (req.objects) args.push(objects);
  if (req.self) return fn.call(api, this, ...args);
  if (!req.at) return fn.apply(api, args);
  let el;
  if (req.at.selector) {
    try {
      el = document.querySelector(req.at.selector);
    } catch (e) {
      return { badCSS: String(e.message || e) };
    }
  } else {
    el = globalThis.__sov.el(req.at.ref);
  }
  if (!el) return { missing: true };
  const v = fn.call(api, el, ...args);
  return v instanceof Promise ? v.then((r) => ({ v: r })) : { v };
}
