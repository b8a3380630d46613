package page

import (
	"bytes"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"time"
)

// A screencast also goes back as an animated GIF that any image viewer
// plays (there is no video encoder at hand): its frames scaled down to
// gifMaxWidth, in the 216 web-safe colors (mapped per pixel, without a
// search), each shown for as long as the page showed it.
const gifMaxWidth = 640

// gifFrames encodes frames as an animated GIF; end is when the recording
// stopped (the last frame's time on screen). It gives up, returning nil,
// once the GIF would pass maxBytes.
func gifFrames(frames []castFrame, end time.Duration, maxBytes int) ([]byte, error) {
	anim := &gif.GIF{LoopCount: 0}
	size := 0
	for i, f := range frames {
		img, err := jpeg.Decode(bytes.NewReader(f.data))
		if err != nil {
			return nil, err
		}
		p := webSafe(img, gifMaxWidth)
		next := end
		if i+1 < len(frames) {
			next = frames[i+1].at
		}
		anim.Image = append(anim.Image, p)
		anim.Delay = append(anim.Delay, max(2, int((next-f.at)/(10*time.Millisecond))))
		if size += len(p.Pix); size > 4*maxBytes {
			return nil, nil // hopeless: the GIF would be far past the limit
		}
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, anim); err != nil {
		return nil, err
	}
	if buf.Len() > maxBytes {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// webSafe returns img scaled down (nearest pixel) to at most maxWidth
// wide, in the web-safe palette.
func webSafe(img image.Image, maxWidth int) *image.Paletted {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w > maxWidth {
		h, w = h*maxWidth/w, maxWidth
	}
	out := image.NewPaletted(image.Rect(0, 0, w, h), palette.WebSafe)
	yc, isYCbCr := img.(*image.YCbCr)
	for y := 0; y < h; y++ {
		sy := b.Min.Y + y*b.Dy()/h
		for x := 0; x < w; x++ {
			sx := b.Min.X + x*b.Dx()/w
			var r, g, bl uint8
			if isYCbCr {
				yi, ci := yc.YOffset(sx, sy), yc.COffset(sx, sy)
				r, g, bl = color.YCbCrToRGB(yc.Y[yi], yc.Cb[ci], yc.Cr[ci])
			} else {
				r32, g32, b32, _ := img.At(sx, sy).RGBA()
				r, g, bl = uint8(r32>>8), uint8(g32>>8), uint8(b32>>8)
			}
			// palette.WebSafe is ordered r, g, b in steps of 0x33.
			out.Pix[y*out.Stride+x] = uint8((int(r)+25)/51*36 + (int(g)+25)/51*6 + (int(bl)+25)/51)
		}
	}
	return out
}
