package page

import (
	"bytes"
	"encoding/json"
	"image"
	"image/jpeg"
	"image/png"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// noisyPage is 2400 px tall with a canvas of random pixels at the bottom,
// so its PNG does not compress and is well over 1 MiB.
const noisyPage = `<body style="margin:0"><div style="height:1600px;background:linear-gradient(red, blue)"></div>
<canvas id=c width=1000 height=800 style="display:block"></canvas><script>
const c = document.getElementById('c'), g = c.getContext('2d');
const img = g.createImageData(c.width, c.height);
for (let i = 0; i < img.data.length; i++) img.data[i] = (i % 4 === 3) ? 255 : Math.random() * 256 | 0;
g.putImageData(img, 0, 0);
</script><div id=box style="position:absolute;left:10px;top:20px;width:120px;height:50px;background:green">box</div></body>`

// image of res: its MIME type and decoded picture.
func decodeShot(t *testing.T, res *browserv1.ToolResult) (string, image.Image, []byte) {
	t.Helper()
	if len(res.Content) != 1 || res.Content[0].GetImage() == nil {
		t.Fatalf("screenshot result is not one image: %v", res.Content)
	}
	im := res.Content[0].GetImage()
	var (
		pic image.Image
		err error
	)
	switch im.MimeType {
	case "image/png":
		pic, err = png.Decode(bytes.NewReader(im.Data))
	case "image/jpeg":
		pic, err = jpeg.Decode(bytes.NewReader(im.Data))
	default:
		t.Fatalf("mime type %q", im.MimeType)
	}
	if err != nil {
		t.Fatalf("decode %s of %d bytes: %v", im.MimeType, len(im.Data), err)
	}
	return im.MimeType, pic, im.Data
}

func TestScreenshot(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": noisyPage})
	must(t, tab, openReq(srv.URL))
	viewW := evalString(t, tab, `innerWidth`)
	viewH := evalString(t, tab, `innerHeight`)

	tests := []struct {
		name       string
		shot       *browserv1.Screenshot
		mime       string
		w, h       string
		minBytes   int
		structured string
	}{
		{name: "viewport_png", shot: &browserv1.Screenshot{}, mime: "image/png", w: viewW, h: viewH},
		{name: "viewport_jpeg", shot: &browserv1.Screenshot{Format: "jpeg", Quality: 40}, mime: "image/jpeg", w: viewW, h: viewH},
		{name: "jpg_default_quality", shot: &browserv1.Screenshot{Format: "JPG"}, mime: "image/jpeg", w: viewW, h: viewH},
		{name: "full_page_png", shot: &browserv1.Screenshot{FullPage: true}, mime: "image/png", w: viewW, h: "2400", minBytes: 1 << 20},
		{name: "element_by_selector", shot: &browserv1.Screenshot{Element: sel("#box")}, mime: "image/png", w: "120", h: "50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := must(t, tab, shotReq(tt.shot))
			mime, pic, data := decodeShot(t, res)
			if mime != tt.mime {
				t.Errorf("mime = %s, want %s", mime, tt.mime)
			}
			b := pic.Bounds()
			if itoa(b.Dx()) != tt.w || itoa(b.Dy()) != tt.h {
				t.Errorf("size = %dx%d, want %sx%s", b.Dx(), b.Dy(), tt.w, tt.h)
			}
			if len(data) < tt.minBytes {
				t.Errorf("image has %d bytes, want at least %d", len(data), tt.minBytes)
			}
			var meta struct {
				MIMEType      string `json:"mime_type"`
				Width, Height int
			}
			if err := json.Unmarshal(structured.JSON(res.GetStructured()), &meta); err != nil || meta.Width != b.Dx() || meta.MIMEType != mime {
				t.Errorf("structured content = %s (%v)", string(structured.JSON(res.GetStructured())), err)
			}
		})
	}
	t.Run("element_by_ref_is_green", func(t *testing.T) {
		snap := text(must(t, tab, snapReq(false, false)))
		_, pic, _ := decodeShot(t, must(t, tab, shotReq(&browserv1.Screenshot{Element: ref(refFor(t, snap, ": box"))})))
		r, g, b, _ := pic.At(5, 5).RGBA()
		if g>>8 < 100 || r>>8 > 50 || b>>8 > 50 {
			t.Errorf("corner of the green box is %d,%d,%d", r>>8, g>>8, b>>8)
		}
	})

	errs := []struct {
		name  string
		shot  *browserv1.Screenshot
		code  commonv1.ErrorCode
		parts []string
	}{
		{"bad_format", &browserv1.Screenshot{Format: "gif"}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{`format must be png or jpeg, not "gif"`}},
		{"quality_high", &browserv1.Screenshot{Format: "jpeg", Quality: 101}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"quality must be 1-100"}},
		{"quality_negative", &browserv1.Screenshot{Format: "jpeg", Quality: -1}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"quality must be 1-100"}},
		{"missing_element", &browserv1.Screenshot{Element: sel("#missing")}, commonv1.ErrorCode_NOT_FOUND, []string{`no element matches selector "#missing"`}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, tab, shotReq(tt.shot))
			wantErr(t, err, tt.code, tt.parts...)
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
