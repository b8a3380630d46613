package page

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/gif"
	"image/jpeg"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
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

// movAtoms walks a QuickTime movie: it returns every atom's body by its
// path ("moov/trak/mdia/minf/stbl/stsz"); containers are walked into.
func movAtoms(tb testing.TB, data []byte) map[string][]byte {
	tb.Helper()
	containers := map[string]bool{"moov": true, "trak": true, "mdia": true, "minf": true, "stbl": true, "dinf": true}
	out := map[string][]byte{}
	var walk func(prefix string, b []byte)
	walk = func(prefix string, b []byte) {
		for len(b) > 0 {
			if len(b) < 8 {
				tb.Fatalf("%s: %d bytes left, not an atom", prefix, len(b))
			}
			size := int(binary.BigEndian.Uint32(b))
			if size < 8 || size > len(b) {
				tb.Fatalf("%s: atom %q of %d bytes in %d", prefix, b[4:8], size, len(b))
			}
			path := prefix + string(b[4:8])
			out[path] = b[8:size]
			if containers[string(b[4:8])] {
				walk(path+"/", b[8:size])
			}
			b = b[size:]
		}
	}
	walk("", data)
	return out
}

// checkMovie checks that data is a QuickTime movie of frames JPEG
// samples: each sample in stsz/stco is a whole JPEG in the file, and the
// durations in stts add up to the movie's.
func checkMovie(tb testing.TB, data []byte, frames int) {
	tb.Helper()
	a := movAtoms(tb, data)
	for _, p := range []string{"ftyp", "mdat", "moov/mvhd", "moov/trak/tkhd", "moov/trak/mdia/mdhd", "moov/trak/mdia/minf/stbl/stsd",
		"moov/trak/mdia/minf/stbl/stts", "moov/trak/mdia/minf/stbl/stsz", "moov/trak/mdia/minf/stbl/stco"} {
		if a[p] == nil {
			tb.Fatalf("movie: no %s atom", p)
		}
	}
	be := binary.BigEndian.Uint32
	if !bytes.Contains(a["moov/trak/mdia/minf/stbl/stsd"], []byte("jpeg")) {
		tb.Errorf("movie: the samples are not described as jpeg")
	}
	stsz, stco, stts := a["moov/trak/mdia/minf/stbl/stsz"], a["moov/trak/mdia/minf/stbl/stco"], a["moov/trak/mdia/minf/stbl/stts"]
	if n := int(be(stsz[8:])); n != frames || int(be(stco[4:])) != frames {
		tb.Fatalf("movie: %d sizes and %d offsets, want %d frames", n, be(stco[4:]), frames)
	}
	for i := range frames {
		off, size := int(be(stco[8+4*i:])), int(be(stsz[12+4*i:]))
		if off+size > len(data) || !bytes.HasPrefix(data[off:], []byte{0xff, 0xd8}) || !bytes.HasSuffix(data[:off+size], []byte{0xff, 0xd9}) {
			tb.Fatalf("movie: sample %d (%d bytes at %d) is not a whole JPEG", i, size, off)
		}
	}
	var samples, total uint32
	for e := stts[8:]; len(e) >= 8; e = e[8:] {
		samples += be(e)
		total += be(e) * be(e[4:])
	}
	if int(samples) != frames || total != be(a["moov/mvhd"][16:]) || total == 0 {
		tb.Errorf("movie: stts has %d samples over %d ms; want %d, over the movie's %d ms", samples, total, frames, be(a["moov/mvhd"][16:]))
	}
}

// TestScreencast: the frames of an animated page come back as JPEG files
// in a ZIP with their times; max_frames and the file cap stop the
// recording and say so; misuse and bad values are errors.
func TestScreencast(t *testing.T) {
	t.Parallel()
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
	// Let the page draw two frames or more: a fixed sleep was a guess at
	// how fast Chromium sends them, which a loaded machine can miss.
	kittest.Eventually(t, 30*time.Second, func() error {
		tab.perf.cast.mu.Lock()
		defer tab.perf.cast.mu.Unlock()
		return kittest.Check(len(tab.perf.cast.frames) >= 2, "not yet: two frames")
	})
	res := must(t, tab, castStopReq())
	if s := text(res); !strings.Contains(s, "Screencast of "+srv.URL) || !strings.Contains(s, "Attached as screencast.mov") {
		t.Fatalf("screencast_stop = %q", s)
	}
	r := res.GetContent()[1].GetResource()
	if r.GetName() != "screencast.mov" || r.GetMimeType() != "video/quicktime" {
		t.Fatalf("screencast_stop attached %s (%s), want screencast.mov", r.GetName(), r.GetMimeType())
	}
	var facts struct {
		Screencast struct {
			Frames  int     `json:"frames"`
			FrameMS []int64 `json:"frame_ms"`
		} `json:"screencast"`
	}
	err = json.Unmarshal(structured.JSON(res.GetStructured()), &facts)
	meta := facts.Screencast
	if err != nil || meta.Frames < 2 || len(meta.FrameMS) != meta.Frames {
		t.Fatalf("structured content %s: %v; want two frames or more with their times", string(structured.JSON(res.GetStructured())), err)
	}
	checkMovie(t, r.GetData(), meta.Frames)
	jpegs := meta.Frames
	if len(res.GetContent()) < 3 {
		t.Fatalf("screencast_stop attached %d parts, want the text, the movie and the GIF", len(res.GetContent()))
	}
	g := res.GetContent()[2].GetResource()
	anim, err := gif.DecodeAll(bytes.NewReader(g.GetData()))
	if err != nil || g.GetName() != "screencast.gif" || g.GetMimeType() != "image/gif" || len(anim.Image) != jpegs || anim.Config.Width > gifMaxWidth {
		t.Errorf("screencast.gif: %v, %s %s, want %d frames at most %d wide", err, g.GetName(), g.GetMimeType(), jpegs, gifMaxWidth)
	}

	must(t, tab, castStartReq(2, 30))
	kittest.Eventually(t, 30*time.Second, func() error {
		tab.perf.cast.mu.Lock()
		defer tab.perf.cast.mu.Unlock()
		return kittest.Check(tab.perf.cast.full != "", "not yet: two frames")
	})
	res = must(t, tab, castStopReq())
	if s := text(res); !strings.Contains(s, ": 2 frames over") || !strings.Contains(s, "it stopped keeping frames at max_frames=2") {
		t.Errorf("screencast_stop after max_frames 2 = %q", s)
	}

	small := newTab(t, Options{MaxProfileFileBytes: 3000})
	must(t, small, openReq(srv.URL))
	must(t, small, castStartReq(0, 100))
	kittest.Eventually(t, 30*time.Second, func() error {
		small.perf.cast.mu.Lock()
		defer small.perf.cast.mu.Unlock()
		return kittest.Check(small.perf.cast.full != "", "not yet: the file limit")
	})
	res = must(t, small, castStopReq())
	if s := text(res); !strings.Contains(s, "at 3000 bytes, the limit of the file (the worker's --max-profile-file-mb)") {
		t.Errorf("screencast_stop with a 3000-byte cap = %q", s)
	}
}

// TestScreencastMovieFitsItsLimit: frames are kept while the movie that
// holds them fits the file limit, so a recording the byte limit stopped is
// still attached (the frames alone filling the limit made a movie a few
// hundred bytes over it, which was then left out).
func TestScreencastMovieFitsItsLimit(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 64, 48)), nil); err != nil {
		t.Fatal(err)
	}
	frame := append(buf.Bytes(), make([]byte, 4000)...) // padding after EOI
	for _, limit := range []int{10 * len(frame), 10*len(frame) + 500, 50 * len(frame)} {
		c := &screencast{started: time.Now(), maxFrames: 1000, maxBytes: limit}
		for c.add(bytes.Clone(frame)) {
		}
		mov, err := movFrames(c.frames, time.Since(c.started))
		if err != nil {
			t.Fatal(err)
		}
		if len(mov) > limit {
			t.Errorf("limit %d: %d frames kept, a movie of %d bytes: past the limit, so screencast_stop leaves it out", limit, len(c.frames), len(mov))
		}
		if bound := movSize(len(c.frames), len(c.frames)*len(frame)); len(mov) > bound {
			t.Errorf("movie of %d bytes, more than movSize's bound %d", len(mov), bound)
		}
	}
}

// TestScreencastReplyFitsTheBus: at the largest file limit the worker
// accepts (half a bus reply), a movie that fills it leaves the GIF only
// what still fits in one reply, so screencast_stop never answers "reply
// too large" and loses the recording.
func TestScreencastReplyFitsTheBus(t *testing.T) {
	t.Parallel()
	fileMax := bus.MaxReply / 2
	for _, movie := range []int{0, 1 << 20, fileMax - 1, fileMax} {
		g := gifLimit(fileMax, movie)
		if g > fileMax || g <= 0 {
			t.Errorf("movie %d: GIF limit %d; want 1-%d", movie, g, fileMax)
		}
		if movie+g+replyOverhead > bus.MaxReply {
			t.Errorf("movie %d + GIF %d + %d for the rest = %d bytes, past the bus's %d", movie, g, replyOverhead, movie+g+replyOverhead, bus.MaxReply)
		}
	}
	if g := gifLimit(10<<20, 1<<20); g != 10<<20 {
		t.Errorf("a small movie under a 10 MiB limit leaves the GIF %d bytes; want the whole limit", g)
	}
}
