package profiles

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Errors of archives and the store. Status maps them to HTTP statuses.
var (
	// ErrUnsafePath: an entry's path is absolute or climbs out of the
	// profile root with "..". The whole archive is refused.
	ErrUnsafePath = errors.New("unsafe path in profile archive")
	// ErrTooLarge: the archive or its contents exceed Limits.
	ErrTooLarge = errors.New("profile archive too large")
	// ErrBadArchive: the upload is not a readable tar.gz.
	ErrBadArchive = errors.New("not a readable tar.gz profile archive")
	// ErrBadName: a profile name does not match NamePattern.
	ErrBadName = errors.New("bad profile name")
	// ErrNotFound: no profile of that name is stored.
	ErrNotFound = errors.New("no such profile")
)

// Status is the HTTP status for an error of this package: 400 for an
// unsafe path, a bad archive or a bad name, 413 for a size limit, 404 for
// an unknown profile, 500 otherwise.
func Status(err error) int {
	switch {
	case errors.Is(err, ErrUnsafePath), errors.Is(err, ErrBadArchive), errors.Is(err, ErrBadName):
		return http.StatusBadRequest
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// Default limits (SOVEREIGN_PROFILE_MAX_UPLOAD_MB, SOVEREIGN_PROFILE_MAX_UNPACKED_MB).
const (
	DefaultMaxUpload   = 200 << 20
	DefaultMaxUnpacked = 500 << 20
)

// headerCost is what every entry costs against Limits.MaxUnpacked besides
// its content (a tar header's size), so that an archive of millions of
// empty files is too large as well.
const headerCost = 512

// Limits bound what an archive may hold. A zero field is its default.
type Limits struct {
	// MaxUpload caps the archive itself (compressed bytes read).
	MaxUpload int64
	// MaxUnpacked caps its contents: the sizes of all its entries, those
	// the filter drops included (they are read too), plus 512 bytes per
	// entry.
	MaxUnpacked int64
}

// LimitsFromEnv reads SOVEREIGN_PROFILE_MAX_UPLOAD_MB (default 200) and
// SOVEREIGN_PROFILE_MAX_UNPACKED_MB (default 500), in MiB.
func LimitsFromEnv() (Limits, error) {
	up, err := config.EnvInt("SOVEREIGN_PROFILE_MAX_UPLOAD_MB", DefaultMaxUpload>>20)
	if err != nil {
		return Limits{}, err
	}
	un, err := config.EnvInt("SOVEREIGN_PROFILE_MAX_UNPACKED_MB", DefaultMaxUnpacked>>20)
	if err != nil {
		return Limits{}, err
	}
	if up < 1 {
		return Limits{}, fmt.Errorf("SOVEREIGN_PROFILE_MAX_UPLOAD_MB=%d: must be at least 1", up)
	}
	if un < 1 {
		return Limits{}, fmt.Errorf("SOVEREIGN_PROFILE_MAX_UNPACKED_MB=%d: must be at least 1", un)
	}
	return Limits{MaxUpload: int64(up) << 20, MaxUnpacked: int64(un) << 20}, nil
}

func (l Limits) withDefaults() Limits {
	if l.MaxUpload <= 0 {
		l.MaxUpload = DefaultMaxUpload
	}
	if l.MaxUnpacked <= 0 {
		l.MaxUnpacked = DefaultMaxUnpacked
	}
	return l
}

// maxSkippedNames is how many skipped entries Stats names.
const maxSkippedNames = 20

// Stats counts what an archive operation kept, dropped and skipped.
type Stats struct {
	// Files and Dirs kept; Bytes is the size of the kept files.
	Files int   `json:"files"`
	Dirs  int   `json:"dirs"`
	Bytes int64 `json:"bytes"`
	// Dropped entries (the filter's), and the bytes of the dropped files.
	Dropped      int   `json:"dropped"`
	DroppedBytes int64 `json:"dropped_bytes"`
	// Skipped entries: symlinks, hard links, devices, FIFOs and other
	// special files, never unpacked; SkippedNames lists the first 20.
	Skipped      int      `json:"skipped"`
	SkippedNames []string `json:"skipped_names,omitempty"`
}

func (s *Stats) skip(name string) {
	s.Skipped++
	if len(s.SkippedNames) < maxSkippedNames {
		s.SkippedNames = append(s.SkippedNames, name)
	}
}

// capReader fails with ErrTooLarge once more than max bytes were read.
type capReader struct {
	r        io.Reader
	n, max   int64
	exceeded bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.exceeded {
		return 0, c.err()
	}
	if room := c.max - c.n + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.exceeded = true
		return n, c.err()
	}
	return n, err
}

func (c *capReader) err() error {
	return fmt.Errorf("%w: the archive is larger than %d MiB (SOVEREIGN_PROFILE_MAX_UPLOAD_MB)", ErrTooLarge, c.max>>20)
}

// entry is one archive entry that passed the checks and the filter.
type entry struct {
	name string // clean, relative, "/"-separated
	hdr  *tar.Header
	body io.Reader // the content of a regular file
}

// scan reads the tar.gz r, checks every entry and calls fn with those the
// filter keeps, in archive order. Special entries are skipped and counted;
// an unsafe path or a limit ends the scan with its error.
func scan(r io.Reader, lim Limits, fn func(e entry) error) (Stats, error) {
	lim = lim.withDefaults()
	var st Stats
	cr := &capReader{r: r, max: lim.MaxUpload}
	fail := func(err error) (Stats, error) {
		if cr.exceeded {
			return st, cr.err()
		}
		return st, fmt.Errorf("%w: %v", ErrBadArchive, err)
	}
	gz, err := gzip.NewReader(cr)
	if err != nil {
		return fail(err)
	}
	tr := tar.NewReader(gz)
	var unpacked int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // archive metadata, not a file
		}
		unpacked += headerCost + max(hdr.Size, 0)
		if unpacked > lim.MaxUnpacked {
			return st, fmt.Errorf("%w: its contents are larger than %d MiB (SOVEREIGN_PROFILE_MAX_UNPACKED_MB)", ErrTooLarge, lim.MaxUnpacked>>20)
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return st, err
		}
		if name == "" {
			continue // the root itself ("./")
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeDir:
		default: // symlink, hard link, device, FIFO, …
			st.skip(name)
			continue
		}
		if keep, _ := Filter(name); !keep {
			st.Dropped++
			if hdr.Typeflag != tar.TypeDir {
				st.DroppedBytes += hdr.Size
			}
			continue
		}
		e := entry{name: name, hdr: hdr}
		if hdr.Typeflag == tar.TypeDir {
			st.Dirs++
		} else {
			st.Files++
			st.Bytes += hdr.Size
			e.body = archiveReader{tr}
		}
		if err := fn(e); err != nil {
			var ae archiveError
			if cr.exceeded || errors.As(err, &ae) {
				return fail(err)
			}
			return st, err // writing the result failed: not the archive's fault
		}
	}
	// Read to the end of the gzip stream, so that its checksum is checked
	// and the upload limit covers the whole archive.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return fail(err)
	}
	return st, nil
}

// archiveReader marks the errors of reading an entry's content, so that
// scan tells them (a truncated or corrupt archive) from errors of writing.
type archiveReader struct{ r io.Reader }

type archiveError struct{ err error }

func (e archiveError) Error() string { return e.err.Error() }
func (e archiveError) Unwrap() error { return e.err }

func (a archiveReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		err = archiveError{err}
	}
	return n, err
}

// cleanName returns the entry's path relative to the profile root ("" for
// the root itself), or ErrUnsafePath when it is absolute or climbs out.
func cleanName(raw string) (string, error) {
	if strings.HasPrefix(raw, "/") || strings.ContainsRune(raw, 0) {
		return "", fmt.Errorf("%w: entry %q is absolute", ErrUnsafePath, raw)
	}
	name := path.Clean(raw)
	if name == "." {
		return "", nil
	}
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("%w: entry %q points outside the profile", ErrUnsafePath, raw)
	}
	return name, nil
}

// Unpack extracts the tar.gz r into dir (which must exist), confined to it
// (os.Root), keeping only what Filter keeps. Symlinks, hard links, devices
// and FIFOs are skipped and counted. An entry whose path is absolute or
// climbs out of dir is ErrUnsafePath; an archive over lim is ErrTooLarge;
// one that is not a tar.gz is ErrBadArchive. On error dir holds part of
// the archive: the caller removes it. Files are private to the process's
// user (0600, directories 0700): a profile holds credentials.
func Unpack(r io.Reader, dir string, lim Limits) (Stats, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Stats{}, fmt.Errorf("unpack profile: %w", err)
	}
	defer root.Close()
	return scan(r, lim, func(e entry) error {
		if e.hdr.Typeflag == tar.TypeDir {
			return root.MkdirAll(e.name, 0o700)
		}
		if parent := path.Dir(e.name); parent != "." {
			if err := root.MkdirAll(parent, 0o700); err != nil {
				return err
			}
		}
		f, err := root.OpenFile(e.name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, e.body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if !e.hdr.ModTime.IsZero() {
			_ = root.Chtimes(e.name, e.hdr.ModTime, e.hdr.ModTime)
		}
		return nil
	})
}

// Normalize reads the tar.gz upload r and writes to w the archive to
// store: the entries Filter keeps, with clean relative names, as regular
// files (0600) and directories (0700) without owners. It checks r as
// Unpack does (ErrUnsafePath, ErrTooLarge, ErrBadArchive); on error, w
// holds part of an archive and must be discarded.
func Normalize(r io.Reader, w io.Writer, lim Limits) (Stats, error) {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	st, err := scan(r, lim, func(e entry) error {
		return writeEntry(tw, e.name, e.hdr.Typeflag == tar.TypeDir, e.hdr.Size, e.hdr.ModTime, e.body)
	})
	if err != nil {
		return st, err
	}
	if err := tw.Close(); err != nil {
		return st, err
	}
	return st, gz.Close()
}

func writeEntry(tw *tar.Writer, name string, dir bool, size int64, mtime time.Time, body io.Reader) error {
	h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: size, ModTime: mtime.Truncate(time.Second)}
	if dir {
		h.Name, h.Typeflag, h.Mode, h.Size = name+"/", tar.TypeDir, 0o700, 0
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if dir {
		return nil
	}
	if _, err := io.CopyN(tw, body, size); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// Pack writes the profile directory dir to w as a tar.gz, with the
// entries Filter keeps (paths relative to dir); symlinks and special
// files are skipped and counted. Pack a profile no Chromium is using: a
// file that changes size while it is read fails the pack.
func Pack(dir string, w io.Writer) (Stats, error) {
	var st Stats
	root, err := os.OpenRoot(dir)
	if err != nil {
		return st, fmt.Errorf("pack profile: %w", err)
	}
	defer root.Close()
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			st.skip(name)
			return nil
		}
		if keep, _ := Filter(name); !keep {
			st.Dropped++
			if d.IsDir() {
				return fs.SkipDir
			}
			st.DroppedBytes += info.Size()
			return nil
		}
		if d.IsDir() {
			st.Dirs++
			return writeEntry(tw, name, true, 0, info.ModTime(), nil)
		}
		f, err := root.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		st.Files++
		st.Bytes += info.Size()
		return writeEntry(tw, name, false, info.Size(), info.ModTime(), f)
	})
	if err != nil {
		return st, fmt.Errorf("pack profile %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return st, err
	}
	return st, gz.Close()
}
