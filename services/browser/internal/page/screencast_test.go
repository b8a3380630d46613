package page

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"image/gif"
	"io"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

func castStartReq(frames, quality int32) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_ScreencastStart{ScreencastStart: &browserv1.ScreencastStart{MaxFrames: frames, Quality: quality}}}
}

func castStopReq() *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_ScreencastStop{ScreencastStop: &browserv1.NoArgs{}}}
}

// castPage changes what it shows every 30 ms, so Chromium draws frames.
const castPage = `<!doctype html><title>cast</title><h1 id="n">0</h1><script>
let i = 0; setInterval(() => { document.getElementById("n").textContent = ++i; document.body.style.background = i % 2 ? "#fee" : "#eef"; }, 30);
</script>`

// unzipFrames returns the JPEG frames and frames.json of a screencast.zip.
func unzipFrames(tb testing.TB, data []byte) (jpegs int, index []castIndex) {
	tb.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		tb.Fatalf("screencast.zip: %v", err)
	}
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			tb.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		_ = r.Close()
		switch {
		case f.Name == "frames.json":
			if err := json.Unmarshal(b, &index); err != nil {
				tb.Fatalf("frames.json: %v", err)
			}
		case strings.HasSuffix(f.Name, ".jpg") && bytes.HasPrefix(b, []byte{0xff, 0xd8}):
			jpegs++
		default:
			tb.Errorf("screencast.zip holds %s (%d bytes), not a JPEG frame", f.Name, len(b))
		}
	}
	return jpegs, index
}

// TestScreencast: the frames of an animated page come back as JPEG files
// in a ZIP with their times; max_frames and the file cap stop the
// recording and say so; misuse and bad values are errors.
func TestScreencast(t *testing.T) {
	srv := serve(t, map[string]string{"/": castPage})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))

	_, err := call(t, tab, castStopReq())
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "no screencast is running", "screencast_start")
	for _, tc := range []struct {
		name            string
		frames, quality int32
		want            string
	}{
		{"too many frames", 1001, 0, "max_frames must be 1-1000, not 1001"},
		{"bad quality", 10, 101, "quality must be 1-100, not 101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, tab, castStartReq(tc.frames, tc.quality))
			wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, tc.want)
		})
	}

	if s := text(must(t, tab, castStartReq(0, 0))); !strings.Contains(s, "Recording the frames of "+srv.URL+"/ (at most 300;") {
		t.Errorf("screencast_start = %q", s)
	}
	_, err = call(t, tab, castStartReq(0, 0))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "already running", "screencast_stop")
	time.Sleep(400 * time.Millisecond) // let the page draw (no assertion on time)
	res := must(t, tab, castStopReq())
	if s := text(res); !strings.Contains(s, "Screencast of "+srv.URL) || !strings.Contains(s, "attached as screencast.zip") {
		t.Fatalf("screencast_stop = %q", s)
	}
	r := res.GetContent()[1].GetResource()
	jpegs, index := unzipFrames(t, r.GetData())
	if r.GetName() != "screencast.zip" || r.GetMimeType() != "application/zip" || jpegs < 2 || len(index) != jpegs || index[0].File != "frame-0001.jpg" ||
		index[len(index)-1].MS < index[0].MS {
		t.Errorf("screencast.zip: %d JPEGs, index %v", jpegs, index)
	}
	if len(res.GetContent()) < 3 {
		t.Fatalf("screencast_stop attached %d parts, want the text, the ZIP and the GIF", len(res.GetContent()))
	}
	g := res.GetContent()[2].GetResource()
	anim, err := gif.DecodeAll(bytes.NewReader(g.GetData()))
	if err != nil || g.GetName() != "screencast.gif" || g.GetMimeType() != "image/gif" || len(anim.Image) != jpegs || anim.Config.Width > gifMaxWidth {
		t.Errorf("screencast.gif: %v, %s %s, want %d frames at most %d wide", err, g.GetName(), g.GetMimeType(), jpegs, gifMaxWidth)
	}

	must(t, tab, castStartReq(2, 30))
	eventually(t, "two frames", func() bool {
		tab.cast.mu.Lock()
		defer tab.cast.mu.Unlock()
		return tab.cast.full != ""
	})
	res = must(t, tab, castStopReq())
	if s := text(res); !strings.Contains(s, ": 2 frames over") || !strings.Contains(s, "it stopped keeping frames at max_frames=2") {
		t.Errorf("screencast_stop after max_frames 2 = %q", s)
	}

	small := newTab(t, Options{MaxProfileFileBytes: 3000})
	must(t, small, openReq(srv.URL))
	must(t, small, castStartReq(0, 100))
	time.Sleep(300 * time.Millisecond)
	res = must(t, small, castStopReq())
	if s := text(res); !strings.Contains(s, "at 3000 bytes, the limit of the file (the worker's --max-profile-file-mb)") {
		t.Errorf("screencast_stop with a 3000-byte cap = %q", s)
	}
}
