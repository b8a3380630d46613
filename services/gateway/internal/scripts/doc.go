// Package scripts runs the operators' script tools: JavaScript files
// (ECMAScript 5.1 and most of ES2015+, run by the pure-Go interpreter
// github.com/dop251/goja) that declare tools with describe() and implement
// them with a function per tool or one call(name, args) dispatcher. The
// gateway serves them next to its built-in tools.
//
// # A script
//
//	// jira.js → tools jira__search, jira__create
//	function describe() {
//	  return [
//	    {name: "search", description: "Search the issue tracker",
//	     inputSchema: {type: "object", properties: {query: {type: "string"}}, required: ["query"]}},
//	    {name: "create", description: "Open an issue"},
//	  ];
//	}
//	function search(args) {
//	  tools.open({url: "https://tracker.example/search?q=" + encodeURIComponent(args.query)});
//	  return tools.get_text({selector: "main"});
//	}
//	function create(args) { ... }
//
// Rules, checked at load ([Load]; every failure is a [*LoadError] naming
// the stem and, where there is one, the declaration):
//
//   - The file stem is the namespace: it matches ^[a-z][a-z0-9_]{0,31}$ and
//     each tool is "<stem>__<name>".
//   - The source is at most [MaxSource] bytes; a script declares at most
//     [MaxTools] tools.
//   - describe() is a global function returning one declaration or an array
//     of them. A declaration is an object with name (^[a-z][a-z0-9_]{0,63}$,
//     without "__", and neither "describe" nor "call"), an optional
//     description (a string of at most [MaxDescription] bytes) and an
//     optional inputSchema. Other keys are refused, so that a typo such as
//     "inputschema" is caught rather than ignored.
//   - inputSchema defaults to {"type":"object"}. It must be an object
//     schema: type "object", or no type and a properties object (type
//     "object" is then added); its JSON is at most [MaxSchema] bytes.
//   - Every declared name has a global function of that name defined by
//     the script, or the script defines a global call(name, args)
//     dispatcher, which then receives the declared name (not the prefixed
//     tool name). A script's own function wins over call().
//   - Top-level code and describe() each run with the load time budget
//     (5 s) and the memory budget; describe() runs at load only.
//
// # A call
//
// [Script.Call] runs a tool in a fresh interpreter: the top-level code runs
// again (keep it to declarations), then the tool's function gets the
// arguments as one object (parsed from JSON, so a plain JavaScript object).
// A returned string is the result as it is; undefined is the empty string;
// anything else is serialised with JSON.stringify. A Promise (an async
// function) is settled first: microtasks run, but there are no timers, so
// a promise that waits for anything else fails the call. A thrown error
// makes the result an error with the error's message. Time budget, memory
// budget, result size, a stack overflow: each ends the call with an error
// result that says which limit it hit.
//
// # The sandbox
//
// Globals are the ECMAScript built-ins, console and tools, nothing else: no
// require, no filesystem, network or process, no timers (nothing outlives a
// call). console.log, info, warn, error and debug go to the gateway's log
// with the script's stem (at most [MaxLogLines] lines per load or call,
// each cut at [MaxLogLine] bytes). tools.<name>(args) and tools.call(name,
// args) call the gateway's tools through [Host], the gateway's dispatcher:
// the caller's session, URL policy, approvals and audit apply to every
// inner call. They return the result text; a failing tool throws an Error
// with the tool's message, which the script may catch. (tools.then and
// tools.constructor are not tools, so that tools is not taken for a
// promise or a class; tools.call reaches any name.) At load there is no
// host: a tools call throws. Script tools may call each other through the
// host; the nesting is bounded by [MaxDepth].
//
// # Limits and what they really bound
//
// goja has no per-runtime memory accounting and its Interrupt takes effect
// only between JavaScript instructions, never inside a native built-in.
// The bounds are therefore layered:
//
//  1. Time: the load or call budget ends with Runtime.Interrupt; so does
//     the caller's context. A call blocked in a tool is released by the
//     context the tool receives (it carries the deadline).
//  2. Memory: a watchdog samples the Go heap (runtime/metrics) every few
//     milliseconds while a load or call runs. Its base is the live heap
//     when the call starts, after a collection (forced, unless one was
//     forced less than 250 ms ago: about 3 ms on a small heap, the main
//     cost of an idle call; a call is otherwise about 0.2 ms). When the
//     heap has grown by more than the budget, the watchdog asks the
//     collector what is live (forcing a collection at most every 250 ms
//     process-wide) and interrupts the interpreter if the live growth is
//     over the budget. Short-lived garbage does not count. The heap is the
//     process's, so the bound is approximate: a call overshoots by what it
//     allocates between two samples or in one native step (a string
//     concatenation that doubles a large string, for instance: the tests
//     see up to about 5× a 32 MiB budget), and a call running while
//     another call's allocation bomb goes off may be stopped too (with the
//     same error).
//  3. Single native calls: the built-ins that allocate in proportion to an
//     argument, or recurse on the Go stack, in one uninterruptible step are
//     capped: String.prototype repeat, padStart, padEnd, concat and split;
//     Array.prototype join (so toString), concat, fill and flat; Array.from;
//     ArrayBuffer and the typed array constructors; JSON.parse and
//     JSON.stringify (nesting depth [MaxJSONDepth]; stringify also checks
//     cycles in time quadratic in the depth). Exceeding a cap throws a
//     RangeError the script may catch. Not capped, bounded only by the
//     watchdog once they return: String.prototype.replace/replaceAll with
//     "$&"-style patterns and match with a global RegExp on huge strings,
//     and loops of built-ins over huge sparse arrays (new Array(1e9).indexOf
//     is CPU, not memory, and runs to its end). RegExp matches that need
//     the backtracking engine stop after [RegexpTimeout] (goja then reports
//     no match).
//  4. Giving up: a call whose interpreter has not stopped [Limits.Grace]
//     after its interrupt (it is inside a long native step, or inside a
//     tool that ignores its context) returns its error anyway; the
//     goroutine is abandoned, logged and counted ([Abandoned]). The gateway
//     stays responsive, at the price of that goroutine's CPU until the step
//     ends.
//
// # The store and the registry
//
// Scripts live in the JetStream KV bucket "<prefix>_scripts" ([Store]: key
// = stem, value = source), so every gateway serves the same set. A
// [Registry] holds the loaded set and the load errors, follows the bucket
// ([Registry.Watch]) and reloads on demand ([Registry.Reload]); it reports
// every change of the tool list to its OnChange callback, so that the
// gateway updates its MCP server and clients get tools/list_changed.
// [Registry.SeedDir] puts a directory's *.js files (SOVEREIGN_TOOLS_DIR)
// into the bucket at start. Built-in tools come first: the registry is
// told their names ([RegistryOptions.Builtin]) and never serves a script
// tool of such a name (it reports the clash as an error of the script), so
// that listing and calling agree.
//
// A gateway wires it so:
//
//	st, _ := scripts.OpenStore(ctx, nc, prefix)
//	reg := scripts.NewRegistry(st, scripts.RegistryOptions{
//		Builtin:  builtinNames,
//		OnChange: func(added, removed []scripts.Tool) { /* AddTools / DeleteTools on the MCP server */ },
//	})
//	reg.SeedDir(ctx, toolsDir) // if SOVEREIGN_TOOLS_DIR is set
//	reg.Reload(ctx, "")        // serve the stored set now
//	go reg.Watch(ctx)          // follow the other gateways' changes
//	// tools/call of a script tool, acting for its caller:
//	reg.Call(ctx, name, args, scripts.HostFunc(dispatchAsCaller))
//	// admin and sovereign__reload: reg.Validate, st.Put/Get/Delete,
//	// reg.Scripts, reg.Errors, reg.Reload(ctx, stem)
package scripts
