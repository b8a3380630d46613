// eval_body.js runs an eval script that does not parse as a REPL script (a
// top-level return) as the body of an async function, so return gives the
// result. eval.go evaluates it (Runtime.evaluate, which V8 stops at the
// deadline) with the script in place of the placeholder.
(async () => {
__SCRIPT__
})()
