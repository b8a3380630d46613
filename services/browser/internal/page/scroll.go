package page

import (
	"context"
	"fmt"
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// defaultScroll is how far scroll goes when amount is 0.
const defaultScroll = 500

// scrolled is what page.js's scroll says.
type scrolled struct {
	Page  bool `json:"page"`
	Moved bool `json:"moved"`
	X     int  `json:"x"`
	Y     int  `json:"y"`
	W     int  `json:"w"`
	H     int  `json:"h"`
	VW    int  `json:"vw"`
	VH    int  `json:"vh"`
}

// scroll scrolls the page (or the main scrollable area when the page
// itself does not scroll) by amount pixels (default 500) in direction.
func (t *Tab) scroll(ctx context.Context, direction string, amount int32) (*browserv1.ToolResult, error) {
	if amount < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "scroll needs amount >= 0 (pixels), not %d; pick the direction with direction", amount)
	}
	if amount == 0 {
		amount = defaultScroll
	}
	dir := strings.ToLower(strings.TrimSpace(direction))
	dx, dy := 0, 0
	switch dir {
	case "up":
		dy = -int(amount)
	case "down":
		dy = int(amount)
	case "left":
		dx = -int(amount)
	case "right":
		dx = int(amount)
	default:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "scroll needs direction up, down, left or right, not %q", direction)
	}
	s, err := jsScroll(ctx, t, dx, dy)
	if err != nil {
		return nil, err
	}
	what := "the page"
	if !s.Page {
		what = "the main scrollable area"
	}
	pos := func() string {
		if dy != 0 {
			return fmt.Sprintf("y=%d of %d (viewport %d)", s.Y, s.H, s.VH)
		}
		return fmt.Sprintf("x=%d of %d (viewport %d)", s.X, s.W, s.VW)
	}
	if !s.Moved {
		return textResult("Scrolled %s: %s is already at the end that way; now at %s", dir, what, pos()), nil
	}
	return textResult("Scrolled %s %s by %d px; now at %s", what, dir, amount, pos()), nil
}
