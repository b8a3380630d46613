package harness

import "context"

// SovereignDriver drives a Sovereign gateway with its own tool names.
type SovereignDriver struct {
	C *MCPClient
}

// Name implements Driver.
func (SovereignDriver) Name() string { return "sovereign" }

func (s SovereignDriver) call(ctx context.Context, name string, args map[string]any) (string, error) {
	res, err := s.C.Tool(ctx, name, args)
	if res == nil {
		return "", err
	}
	return res.Text(), err
}

// Open implements Driver.
func (s SovereignDriver) Open(ctx context.Context, url string) (string, error) {
	return s.call(ctx, "open", map[string]any{"url": url})
}

// Snapshot implements Driver.
func (s SovereignDriver) Snapshot(ctx context.Context) (string, error) {
	return s.call(ctx, "snapshot", nil)
}

// Add implements Driver: fill with submit, which presses Enter in the
// same call (one settle, one change report).
func (s SovereignDriver) Add(ctx context.Context, ref, text string) (string, error) {
	return s.call(ctx, "fill", map[string]any{"ref": ref, "value": text, "submit": true})
}

// AddCalls implements Driver: one fill.
func (SovereignDriver) AddCalls() int { return 1 }

// Click implements Driver.
func (s SovereignDriver) Click(ctx context.Context, ref string) (string, error) {
	return s.call(ctx, "click", map[string]any{"ref": ref})
}

// Eval implements Driver.
func (s SovereignDriver) Eval(ctx context.Context, fn string) (string, error) {
	return s.call(ctx, "eval", map[string]any{"script": "(" + fn + ")()"})
}
