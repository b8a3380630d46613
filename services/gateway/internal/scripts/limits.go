package scripts

import (
	"fmt"
	"time"
)

// Fixed limits of scripts and their declarations.
const (
	// MaxSource is the largest script, in bytes.
	MaxSource = 256 << 10
	// MaxTools is the most tools one script may declare.
	MaxTools = 64
	// MaxDescription is the longest description of a tool, in bytes.
	MaxDescription = 8 << 10
	// MaxSchema is the largest inputSchema of a tool, as JSON, in bytes.
	MaxSchema = 64 << 10
	// MaxDepth is how deeply script tools may call script tools (through
	// the host): a call at this depth is refused.
	MaxDepth = 4
	// MaxCallStack is the deepest JavaScript call stack; deeper recursion
	// ends the call with a stack overflow.
	MaxCallStack = 4096
	// MaxJSONDepth is the deepest nesting JSON.parse accepts.
	MaxJSONDepth = 1000
	// MaxLogLines is how many console lines one load or call may log; the
	// rest are dropped, with one line that says so.
	MaxLogLines = 100
	// MaxLogLine is the longest console line logged, in bytes; longer ones
	// are cut.
	MaxLogLine = 2048
	// RegexpTimeout bounds one match of a RegExp that needs the
	// backtracking engine (a process-wide setting of regexp2, which only
	// goja uses in the gateway).
	RegexpTimeout = 5 * time.Second
	// MaxMemory is the highest memory budget [Limits] accept: the budget
	// is approximate (it may be overshot several times, see the package
	// documentation), and one script call must not take a large part of
	// the gateway's memory.
	MaxMemory = 256 << 20
)

// Limits are the budgets of loads and calls. A zero field means its
// default; see [DefaultLimits].
type Limits struct {
	// Load bounds the top-level code and describe() at load, each.
	Load time.Duration
	// Call bounds one call, its top-level code and its tool calls included.
	Call time.Duration
	// Memory bounds how much the heap may grow while one load or call
	// runs, in bytes (approximate: see the package documentation).
	Memory int64
	// MaxString is the longest string, in UTF-16 code units, the capped
	// built-ins build; ArrayBuffers and typed arrays hold at most this
	// many bytes.
	MaxString int
	// MaxArray is the most elements the capped array built-ins create.
	MaxArray int
	// MaxResult is the largest result of a call, in bytes.
	MaxResult int
	// Grace is how long a call waits for an interrupted interpreter to
	// stop before it gives up on it.
	Grace time.Duration
}

// DefaultLimits are the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{
		Load:      5 * time.Second,
		Call:      30 * time.Second,
		Memory:    64 << 20,
		MaxString: 8 << 20,
		MaxArray:  1 << 20,
		MaxResult: 4 << 20,
		Grace:     2 * time.Second,
	}
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Load <= 0 {
		l.Load = d.Load
	}
	if l.Call <= 0 {
		l.Call = d.Call
	}
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	if l.MaxString <= 0 {
		l.MaxString = d.MaxString
	}
	if l.MaxArray <= 0 {
		l.MaxArray = d.MaxArray
	}
	if l.MaxResult <= 0 {
		l.MaxResult = d.MaxResult
	}
	if l.Grace <= 0 {
		l.Grace = d.Grace
	}
	return l
}

// Check reports a memory budget over [MaxMemory] (the only field with a
// ceiling; negative fields mean their defaults).
func (l Limits) Check() error {
	if l.Memory > MaxMemory {
		return fmt.Errorf("script memory budget %d MiB is over the %d MiB ceiling", l.Memory>>20, MaxMemory>>20)
	}
	return nil
}
