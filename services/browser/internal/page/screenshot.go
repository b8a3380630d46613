package page

import (
	"bytes"
	"context"
	"image"
	_ "image/jpeg" // DecodeConfig of screenshots
	_ "image/png"  // DecodeConfig of screenshots
	"math"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/attribute"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

const (
	// defaultQuality is the JPEG quality when none is given.
	defaultQuality = 80
	// maxShotHeight caps full-page screenshots: Chromium draws taller
	// captures blank.
	maxShotHeight = 16384
)

// shotFormat returns the capture format and MIME type for format.
func shotFormat(format string, quality int32) (page.CaptureScreenshotFormat, string, *int64, error) {
	if quality < 0 || quality > 100 {
		return "", "", nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "screenshot quality must be 1-100 (JPEG only), not %d", quality)
	}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", "png":
		return page.CaptureScreenshotFormatPng, "image/png", nil, nil
	case "jpeg", "jpg":
		q := int64(quality)
		if q == 0 {
			q = defaultQuality
		}
		return page.CaptureScreenshotFormatJpeg, "image/jpeg", &q, nil
	}
	return "", "", nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "screenshot format must be png or jpeg, not %q", format)
}

// screenshot captures the viewport, the whole page or one element as an
// image content part.
func (t *Tab) screenshot(ctx context.Context, s *browserv1.Screenshot) (*browserv1.ToolResult, error) {
	format, mime, quality, err := shotFormat(s.GetFormat(), s.GetQuality())
	if err != nil {
		return nil, err
	}
	p := page.CaptureScreenshotParams{Format: format, Quality: quality, FromSurface: new(true)}
	what := "viewport"
	area := what // for the span: what names an element by its text
	clipped := false
	switch {
	case s.GetElement().GetRef() != "" || s.GetElement().GetSelector() != "":
		e, err := t.resolve(ctx, s.GetElement(), "screenshot")
		if err != nil {
			return nil, err
		}
		clip, err := elementClip(ctx, e)
		if err != nil {
			return nil, err
		}
		p.Clip, p.CaptureBeyondViewport, what, area = clip, new(true), e.what, "element"
	case s.GetFullPage():
		m, err := chromedp.Call(ctx, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return nil, err
		}
		w, h := math.Ceil(m.CSSContentSize.Width), math.Ceil(m.CSSContentSize.Height)
		if h > maxShotHeight {
			h, clipped = maxShotHeight, true
		}
		p.Clip = &page.Viewport{X: 0, Y: 0, Width: w, Height: h, Scale: 1}
		p.CaptureBeyondViewport, what = new(true), "full page"
		area = what
	}
	sctx, span := startSpan(ctx, spanScreenshot, attribute.String("sovereign.screenshot.format", string(format)),
		attribute.String("sovereign.screenshot.area", area))
	shot, err := chromedp.Call(sctx, page.CaptureScreenshot, p)
	if err == nil {
		span.SetAttributes(attribute.Int("sovereign.screenshot.size", len(shot.Data)))
	}
	endSpan(span, err)
	if err != nil {
		return nil, err
	}
	return shotResult(shot.Data, mime, what, clipped)
}

// elementClip scrolls e into view and returns its box in page coordinates.
func elementClip(ctx context.Context, e *elem) (*page.Viewport, error) {
	// point scrolls it into view.
	if _, err := jsPointOn(ctx, e); err != nil {
		return nil, err
	}
	q, err := chromedp.Call(ctx, dom.GetContentQuads, dom.GetContentQuadsParams{ObjectID: e.obj})
	if err != nil || len(q.Quads) == 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s is not visible: it has no box on the screen", e.what)
	}
	m, err := chromedp.Call(ctx, page.GetLayoutMetrics, cdp.Empty{})
	if err != nil {
		return nil, err
	}
	minX, minY, maxX, maxY := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, quad := range q.Quads {
		for i := 0; i+1 < len(quad); i += 2 {
			minX, maxX = min(minX, quad[i]), max(maxX, quad[i])
			minY, maxY = min(minY, quad[i+1]), max(maxY, quad[i+1])
		}
	}
	if maxX-minX < 1 || maxY-minY < 1 {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s is not visible: it has no size", e.what)
	}
	vp := m.CSSVisualViewport
	x, y := math.Floor(minX+vp.PageX), math.Floor(minY+vp.PageY)
	return &page.Viewport{X: x, Y: y, Width: math.Ceil(maxX + vp.PageX - x), Height: math.Ceil(maxY + vp.PageY - y), Scale: 1}, nil
}

// shotResult wraps image data as an image part, with its size as JSON.
func shotResult(data []byte, mime, what string, clipped bool) (*browserv1.ToolResult, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	meta, err := structured.Object(struct {
		MIMEType string `json:"mime_type"`
		Width    int    `json:"width"`
		Height   int    `json:"height"`
		Bytes    int    `json:"bytes"`
		Of       string `json:"of"`
		Clipped  bool   `json:"clipped,omitempty"`
	}{mime, cfg.Width, cfg.Height, len(data), what, clipped})
	if err != nil {
		return nil, err
	}
	img := &browserv1.Content{Part: &browserv1.Content_Image{Image: &browserv1.Image{MimeType: mime, Data: data}}}
	return &browserv1.ToolResult{Content: []*browserv1.Content{img}, Structured: meta}, nil
}
