package page

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image/jpeg"
	"time"
)

// A screencast goes back as a video file: a QuickTime movie (.mov) whose
// samples are the JPEG frames Chromium drew, as they are ("Photo - JPEG",
// the Motion-JPEG of QuickTime), each lasting until the next one, so no
// frame is re-encoded or repeated and the times are the page's own.
// QuickTime, VLC, mpv and ffmpeg play it; no encoder is needed on the
// worker. Times are in milliseconds (movTimescale).
const movTimescale = 1000

// movHeader bounds the bytes of a movie besides its frames' data: the
// atoms (ftyp, the mdat header, moov, about 620 bytes) and, per frame, at
// most movPerFrame bytes of tables (its stsz size, stco offset and an stts
// run).
const (
	movHeader   = 1024
	movPerFrame = 16
)

// movSize bounds the size of the movie of n frames of data bytes in all.
func movSize(n, data int) int { return movHeader + movPerFrame*n + data }

// movFrames packs frames into a QuickTime movie; end is when the
// recording stopped (the last frame lasts until then). The movie starts at
// the first frame.
func movFrames(frames []castFrame, end time.Duration) ([]byte, error) {
	if len(frames) == 0 {
		return nil, fmt.Errorf("a movie needs at least one frame")
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(frames[0].data))
	if err != nil {
		return nil, fmt.Errorf("read the first frame: %w", err)
	}
	w, h := cfg.Width, cfg.Height

	// Each frame lasts until the next (at least 1 ms); stts holds runs of
	// equal durations.
	type run struct{ count, delta uint32 }
	var runs []run
	var total uint32
	for i, f := range frames {
		next := end
		if i+1 < len(frames) {
			next = frames[i+1].at
		}
		d := uint32(max((next-f.at)/time.Millisecond, 1))
		total += d
		if n := len(runs); n > 0 && runs[n-1].delta == d {
			runs[n-1].count++
		} else {
			runs = append(runs, run{1, d})
		}
	}

	var out bytes.Buffer
	ftyp := atom("ftyp", []byte("qt  "), be32(0x20050300), []byte("qt  "))
	out.Write(ftyp)
	mdatStart := out.Len()
	size := 8
	for _, f := range frames {
		size += len(f.data)
	}
	out.Write(be32(uint32(size)))
	out.WriteString("mdat")
	offsets := make([]byte, 0, 4*len(frames))
	sizes := make([]byte, 0, 4*len(frames))
	for _, f := range frames {
		offsets = append(offsets, be32(uint32(out.Len()))...)
		sizes = append(sizes, be32(uint32(len(f.data)))...)
		out.Write(f.data)
	}
	if out.Len()-mdatStart != size {
		return nil, fmt.Errorf("movie data is %d bytes, want %d", out.Len()-mdatStart, size)
	}

	stts := []byte{}
	for _, r := range runs {
		stts = append(stts, be32(r.count)...)
		stts = append(stts, be32(r.delta)...)
	}
	n := uint32(len(frames))
	matrix := joinBytes(be32(0x00010000), be32(0), be32(0), be32(0), be32(0x00010000), be32(0), be32(0), be32(0), be32(0x40000000))
	// The sample description of Photo - JPEG frames.
	name := make([]byte, 32)
	name[0] = byte(copy(name[1:], "Photo - JPEG"))
	jpegEntry := atom("jpeg",
		make([]byte, 6), be16(1), // reserved, data reference 1
		be16(0), be16(0), be32(0), // version, revision, vendor
		be32(0), be32(512), // temporal and spatial quality (normal)
		be16(uint16(w)), be16(uint16(h)),
		be32(0x00480000), be32(0x00480000), // 72 dpi
		be32(0), be16(1), name, // data size, frames per sample, compressor
		be16(24), be16(0xffff)) // depth, no color table
	stbl := atom("stbl",
		fullAtom("stsd", 0, be32(1), jpegEntry),
		fullAtom("stts", 0, be32(uint32(len(runs))), stts),
		fullAtom("stsc", 0, be32(1), be32(1), be32(1), be32(1)), // one sample per chunk
		fullAtom("stsz", 0, be32(0), be32(n), sizes),
		fullAtom("stco", 0, be32(n), offsets))
	minf := atom("minf",
		fullAtom("vmhd", 1, be16(0x40), be16(0x8000), be16(0x8000), be16(0x8000)),
		fullAtom("hdlr", 0, []byte("dhlr"), []byte("alis"), be32(0), be32(0), be32(0), []byte{0}),
		atom("dinf", fullAtom("dref", 0, be32(1), fullAtom("alis", 1))),
		stbl)
	mdia := atom("mdia",
		fullAtom("mdhd", 0, be32(0), be32(0), be32(movTimescale), be32(total), be16(0), be16(0)),
		fullAtom("hdlr", 0, []byte("mhlr"), []byte("vide"), be32(0), be32(0), be32(0), append([]byte{12}, "VideoHandler"...)),
		minf)
	trak := atom("trak",
		fullAtom("tkhd", 3, be32(0), be32(0), be32(1), be32(0), be32(total), make([]byte, 8),
			be16(0), be16(0), be16(0), be16(0), matrix, be32(uint32(w)<<16), be32(uint32(h)<<16)),
		mdia)
	moov := atom("moov",
		fullAtom("mvhd", 0, be32(0), be32(0), be32(movTimescale), be32(total),
			be32(0x00010000), be16(0x0100), make([]byte, 10), matrix, make([]byte, 24), be32(2)),
		trak)
	out.Write(moov)
	return out.Bytes(), nil
}

// atom is an atom: its size, its type, then its parts.
func atom(typ string, parts ...[]byte) []byte {
	body := joinBytes(parts...)
	return joinBytes(be32(uint32(8+len(body))), []byte(typ), body)
}

// fullAtom is an atom with a version (0) and flags.
func fullAtom(typ string, flags uint32, parts ...[]byte) []byte {
	return atom(typ, append([][]byte{be32(flags & 0xffffff)}, parts...)...)
}

func joinBytes(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
