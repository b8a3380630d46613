package page

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Screencast limits: max_frames is 1-MaxScreencastFrames (0:
// DefaultScreencastFrames); the frames kept are also bounded by
// Options.MaxProfileFileBytes, as the movie that holds them is.
const (
	DefaultScreencastFrames  = 300
	MaxScreencastFrames      = 1000
	defaultScreencastQuality = 60
	screencastMaxSide        = 1280 // frames are scaled to fit this box
	// replyOverhead is room kept in a reply for its text, structured
	// content and protobuf framing besides the attached files.
	replyOverhead = 256 << 10
)

// screencast is a recording of the frames a tab draws (Page.startScreencast)
// between screencast_start and screencast_stop. A goroutine started by
// screencast_start keeps the frames and ends at screencast_stop or with the
// tab.
type screencast struct {
	started   time.Time
	maxFrames int
	maxBytes  int
	stop      context.CancelFunc
	done      chan struct{}

	mu     sync.Mutex
	frames []castFrame
	bytes  int
	full   string // which limit stopped the recording, "" while it runs
}

type castFrame struct {
	at   time.Duration
	data []byte
}

// add keeps a frame unless a limit is reached; it reports whether it did
// (a frame not kept is not acknowledged, so Chromium sends no more).
func (c *screencast) add(data []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.full != "":
		return false
	case len(c.frames) >= c.maxFrames:
		c.full = fmt.Sprintf("it stopped keeping frames at max_frames=%d", c.maxFrames)
		return false
	case movSize(len(c.frames)+1, c.bytes+len(data)) > c.maxBytes: // the movie, not only its frames, must fit
		c.full = fmt.Sprintf("it stopped keeping frames at %d bytes, the limit of the file (the worker's --max-profile-file-mb)", c.maxBytes)
		return false
	}
	c.frames = append(c.frames, castFrame{at: time.Since(c.started), data: data})
	c.bytes += len(data)
	return true
}

// gifLimit is the largest GIF a screencast_stop reply can carry beside a
// movie of movie bytes: both travel in one reply, which the bus bounds, so
// the GIF gets what the movie leaves of it (with room for the text and
// framing), up to the file limit.
func gifLimit(fileMax, movie int) int {
	return min(fileMax, bus.MaxReply-movie-replyOverhead)
}

// screencastStart starts recording the tab's frames.
func (p *perfTools) screencastStart(ctx context.Context, req *browserv1.ScreencastStart) (*browserv1.ToolResult, error) {
	if p.cast != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"a screencast of this tab is already running (started %s ago): call screencast_stop first", time.Since(p.cast.started).Round(time.Second))
	}
	frames := int(req.GetMaxFrames())
	if frames == 0 {
		frames = DefaultScreencastFrames
	}
	if frames < 1 || frames > MaxScreencastFrames {
		return nil, badArg("max_frames must be 1-%d, not %d", MaxScreencastFrames, frames)
	}
	quality := int64(req.GetQuality())
	if quality == 0 {
		quality = defaultScreencastQuality
	}
	if quality < 1 || quality > 100 {
		return nil, badArg("quality must be 1-100, not %d", quality)
	}
	cctx, cancel := context.WithCancel(p.tab.ctx)
	c := &screencast{started: time.Now(), maxFrames: frames, maxBytes: p.tab.opts.maxProfileFileBytes(), stop: cancel, done: make(chan struct{})}
	events := chromedp.Events(cctx, page.ScreencastFrame) // subscribed before the start
	_, err := chromedp.Call(ctx, page.StartScreencast, page.StartScreencastParams{Format: page.StartScreencastFormatJpeg,
		Quality: &quality, MaxWidth: screencastMaxSide, MaxHeight: screencastMaxSide, EveryNthFrame: 1})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start the screencast: %w", err)
	}
	go func() {
		defer close(c.done)
		for ev, err := range events {
			if err != nil {
				return
			}
			if c.add(ev.Data) {
				_, _ = chromedp.Call(cctx, page.ScreencastFrameAck, page.ScreencastFrameAckParams{SessionID: ev.SessionID})
			}
		}
	}()
	p.cast = c
	u, _ := p.tab.currentURL(ctx)
	return textResult("Recording the frames of %s (at most %d; the page draws a frame only when it changes); call screencast_stop to get them.",
		clipTo(u, maxURL), frames), nil
}

// screencastStop ends the recording and answers with its frames as a
// movie (screencast_mov.go) and an animated GIF (screencast_gif.go).
func (p *perfTools) screencastStop(ctx context.Context) (*browserv1.ToolResult, error) {
	c := p.cast
	if c == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"no screencast is running in this tab: start one with screencast_start (a screencast belongs to the tab it started in)")
	}
	p.cast = nil
	_, _ = chromedp.Call(ctx, page.StopScreencast, cdp.Empty{})
	c.stop()
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	elapsed := time.Since(c.started)
	c.mu.Lock()
	frames, full := c.frames, c.full
	c.mu.Unlock()
	u, _ := p.tab.currentURL(ctx)
	msg := fmt.Sprintf("Screencast of %s: %d frames over %s", clipTo(u, maxURL), len(frames), elapsed.Round(100*time.Millisecond))
	if full != "" {
		msg += "; " + full
	}
	if len(frames) == 0 {
		return textResult("%s (the page drew nothing new).", msg), nil
	}
	data, err := movFrames(frames, elapsed)
	if err != nil {
		return nil, fmt.Errorf("make the screencast's movie: %w", err)
	}
	index := make([]int64, len(frames))
	for i, f := range frames {
		index[i] = f.at.Milliseconds()
	}
	if len(data) > c.maxBytes {
		return textResult("%s. The movie (%d bytes) is not attached: it is larger than the limit of %d bytes (the worker's --max-profile-file-mb); record a shorter span or fewer frames.",
			msg, len(data), c.maxBytes), nil
	}
	gifMax := gifLimit(c.maxBytes, len(data))
	anim, err := gifFrames(frames, elapsed, gifMax)
	if err != nil {
		return nil, fmt.Errorf("make the screencast's GIF: %w", err)
	}
	res := textResult("%s. Attached as screencast.mov (%d bytes): a QuickTime movie of the frames as drawn (Motion JPEG, up to %d px, each frame shown as long as the page showed it; QuickTime, VLC, mpv and ffmpeg play it).",
		msg, len(data), screencastMaxSide)
	res.Content = append(res.Content, resourcePart("screencast.mov", "video/quicktime", data))
	if anim != nil {
		AppendText(res, fmt.Sprintf("- and as screencast.gif (%d bytes), an animation at most %d pixels wide in web-safe colors, which any image viewer plays", len(anim), gifMaxWidth))
		res.Content = append(res.Content, resourcePart("screencast.gif", "image/gif", anim))
	} else {
		AppendText(res, fmt.Sprintf("- no screencast.gif: as a GIF it would pass %d bytes (the file limit, the worker's --max-profile-file-mb, or what the movie leaves of a %d-byte reply)", gifMax, bus.MaxReply))
	}
	SetStructured(res, "screencast", map[string]any{"frames": len(frames), "frame_ms": index, "bytes": len(data), "limited": full})
	return res, nil
}
