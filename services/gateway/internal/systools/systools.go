// Package systools gives agents a workspace: a directory they may read,
// write, list and delete in, and run shell commands in.
//
// File operations go through an [os.Root], so no path leaves the
// workspace: not by "..", not by an absolute path and not by a symbolic
// link, including one planted inside the workspace that points out (a link
// to a place inside the workspace is followed). Paths are relative to the
// workspace, with "/" as separator; "." is the workspace itself. An
// absolute path is refused with an error, not read as relative to the
// workspace.
//
// [Workspace.Exec] is not confined that way: it runs "sh -c" with the
// workspace as its working directory, HOME and a minimal environment, in
// its own process group that is killed when the command ends, times out or
// is cancelled, but as the calling process's user, with everything that
// user may do. Whoever enables it lets the caller run arbitrary commands.
//
// Limits: [MaxRead] per read (the result says when it is clipped),
// [MaxWrite] per write, [MaxList] entries per listing, [MaxOutput] of
// stdout and of stderr per command, [MaxTimeout] per command.
package systools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Limits.
const (
	// MaxRead is the most Read returns at once: a larger file is clipped
	// and read on from ReadResult.Next.
	MaxRead = 1 << 20
	// MaxWrite is the largest content Write takes.
	MaxWrite = 10 << 20
	// MaxList is the most entries List returns; the rest are counted.
	MaxList = 1000
	// MaxOutput is how much of stdout and of stderr Exec keeps each.
	MaxOutput = 64 << 10
	// DefaultTimeout and MaxTimeout bound a command.
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 10 * time.Minute
)

// Permissions of what the workspace creates (before the umask). The
// workspace directory itself is private to the user.
const (
	workspacePerm = 0o700
	dirPerm       = 0o755
	filePerm      = 0o644
)

// ErrEscape is wrapped by the errors of paths that lead out of the
// workspace.
var ErrEscape = errors.New("path escapes the workspace")

// Error is a failed operation on a path: its message names the path and
// what was wrong with it, and it wraps the cause (fs.ErrNotExist,
// ErrEscape, ...).
type Error struct {
	Path string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	if errors.Is(e.Err, ErrEscape) {
		return e.Msg + ": " + e.Path
	}
	return e.Path + ": " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Workspace is a directory the operations are confined to. It is safe for
// concurrent use.
type Workspace struct {
	dir     string // absolute
	root    *os.Root
	escapes error // what os.Root returns for a path that leaves it
}

// New opens the workspace at dir, creating it (mode 0700) when it is
// missing.
func New(dir string) (*Workspace, error) {
	if strings.TrimSpace(dir) == "" {
		return nil, errors.New("workspace: no directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, workspacePerm); err != nil {
		return nil, fmt.Errorf("workspace %s: create it: %w", abs, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", abs, err)
	}
	w := &Workspace{dir: abs, root: root}
	// os.Root does not export its "path escapes from parent" error: learn
	// it from a path that surely escapes.
	var pe *os.PathError
	if _, err := root.Lstat(".."); errors.As(err, &pe) {
		w.escapes = pe.Err
	}
	return w, nil
}

// Dir is the workspace's absolute path.
func (w *Workspace) Dir() string { return w.dir }

// Close releases the workspace's directory handle.
func (w *Workspace) Close() error { return w.root.Close() }

// clean checks a workspace path and returns it cleaned ("." for the
// workspace itself). An empty path is "." only when emptyIsRoot.
func clean(p string, emptyIsRoot bool) (string, error) {
	switch {
	case p == "" && emptyIsRoot:
		return ".", nil
	case strings.TrimSpace(p) == "":
		return "", &Error{Path: p, Msg: `path is required (relative to the workspace, e.g. notes/a.txt; "." is the workspace itself)`}
	case strings.ContainsRune(p, 0):
		return "", &Error{Path: strings.ReplaceAll(p, "\x00", `\0`), Msg: "path holds a NUL byte"}
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/"):
		return "", &Error{Path: p, Msg: "path must be relative to the workspace, not absolute", Err: ErrEscape}
	}
	c := filepath.Clean(filepath.FromSlash(p))
	if !filepath.IsLocal(c) && c != "." {
		return "", &Error{Path: p, Msg: ErrEscape.Error(), Err: ErrEscape}
	}
	return c, nil
}

// fail turns an error of os.Root into an *Error that says what was wrong
// in the workspace's terms.
func (w *Workspace) fail(p string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	p = filepath.ToSlash(p)
	var cause error = err
	var pe *os.PathError
	if errors.As(err, &pe) {
		cause = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		cause = le.Err
	}
	switch {
	case w.escapes != nil && errors.Is(cause, w.escapes):
		return &Error{Path: p, Msg: "path escapes the workspace (through a symbolic link or ..)", Err: ErrEscape}
	case errors.Is(cause, fs.ErrNotExist):
		return &Error{Path: p, Msg: "no such file or directory in the workspace", Err: fs.ErrNotExist}
	case errors.Is(cause, syscall.ENOTDIR):
		return &Error{Path: p, Msg: "a part of the path is not a directory", Err: cause}
	case errors.Is(cause, syscall.EISDIR):
		return &Error{Path: p, Msg: "is a directory", Err: cause}
	case errors.Is(cause, syscall.ENOTEMPTY):
		return &Error{Path: p, Msg: "is a directory that is not empty; pass recursive to delete it with its contents", Err: cause}
	case errors.Is(cause, fs.ErrExist):
		return &Error{Path: p, Msg: "already exists", Err: fs.ErrExist}
	case errors.Is(cause, fs.ErrPermission):
		return &Error{Path: p, Msg: "permission denied", Err: fs.ErrPermission}
	case errors.Is(cause, syscall.ELOOP):
		return &Error{Path: p, Msg: "too many levels of symbolic links", Err: cause}
	case errors.Is(cause, syscall.ENXIO):
		return &Error{Path: p, Msg: "is a pipe or device nobody reads: only regular files can be written", Err: cause}
	}
	return &Error{Path: p, Msg: cause.Error(), Err: cause}
}

// ReadResult is a piece of a text file.
type ReadResult struct {
	Path    string
	Content string
	// Offset is where Content starts in the file, in bytes; Size is the
	// file's size.
	Offset, Size int64
	// Clipped is set when the file goes on after Content: read on from
	// Next.
	Clipped bool
	Next    int64
}

// Read returns the text of the file at p from byte offset on, at most
// limit bytes (MaxRead when limit is 0 or more than MaxRead). It refuses
// what is not a regular file, and files that are not UTF-8 text (with a
// NUL byte, or invalid UTF-8). A clipped piece ends before a UTF-8
// character it would cut; an offset inside a character is refused.
func (w *Workspace) Read(p string, offset, limit int64) (ReadResult, error) {
	c, err := clean(p, false)
	if err != nil {
		return ReadResult{}, err
	}
	if offset < 0 {
		return ReadResult{}, &Error{Path: p, Msg: fmt.Sprintf("offset %d is negative", offset)}
	}
	if limit <= 0 || limit > MaxRead {
		limit = MaxRead
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := w.root.OpenFile(c, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ReadResult{}, w.fail(c, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ReadResult{}, w.fail(c, err)
	}
	switch {
	case st.IsDir():
		return ReadResult{}, &Error{Path: p, Msg: "is a directory; list it instead"}
	case !st.Mode().IsRegular():
		return ReadResult{}, &Error{Path: p, Msg: fmt.Sprintf("is not a regular file (%s)", kind(st.Mode()))}
	case offset > st.Size():
		return ReadResult{}, &Error{Path: p, Msg: fmt.Sprintf("offset %d is past the end of the file (%d bytes)", offset, st.Size())}
	}
	buf := make([]byte, min(limit, st.Size()-offset))
	n, err := io.ReadFull(io.NewSectionReader(f, offset, int64(len(buf))), buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return ReadResult{}, w.fail(c, err)
	}
	buf = buf[:n]
	clipped := offset+int64(n) < st.Size()
	if clipped {
		buf = trimPartialRune(buf)
	}
	if offset > 0 && len(buf) > 0 && !utf8.RuneStart(buf[0]) {
		return ReadResult{}, &Error{Path: p, Msg: fmt.Sprintf("offset %d is inside a UTF-8 character; start at the Next offset of the previous read", offset)}
	}
	if !utf8.Valid(buf) || slices.Contains(buf, 0) {
		return ReadResult{}, &Error{Path: p, Msg: "is not a UTF-8 text file (binary?): only text can be read"}
	}
	r := ReadResult{Path: filepath.ToSlash(c), Content: string(buf), Offset: offset, Size: st.Size(), Clipped: clipped}
	if clipped {
		r.Next = offset + int64(len(buf))
	}
	return r, nil
}

// trimPartialRune drops an incomplete UTF-8 character at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// WriteResult says what Write did.
type WriteResult struct {
	Path string
	// Bytes written; Size of the file afterwards.
	Bytes, Size int64
	// Created is set when the file did not exist before.
	Created bool
	// Appended is set for an append.
	Appended bool
}

// Write writes content to the file at p, replacing it, or at its end when
// appending. Missing parent directories are created. It refuses content
// over MaxWrite, directories and what is not a regular file.
func (w *Workspace) Write(p, content string, appendTo bool) (WriteResult, error) {
	c, err := clean(p, false)
	if err != nil {
		return WriteResult{}, err
	}
	if c == "." {
		return WriteResult{}, &Error{Path: p, Msg: "is the workspace itself, not a file"}
	}
	if len(content) > MaxWrite {
		return WriteResult{}, &Error{Path: p, Msg: fmt.Sprintf("content is %d bytes; at most %d (10 MiB) can be written at once: append the rest", len(content), MaxWrite)}
	}
	if dir := filepath.Dir(c); dir != "." {
		if err := w.root.MkdirAll(dir, dirPerm); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return WriteResult{}, &Error{Path: filepath.ToSlash(dir), Msg: "is a file, not a directory", Err: err}
			}
			return WriteResult{}, w.fail(c, err)
		}
	}
	_, err = w.root.Stat(c)
	created := errors.Is(err, fs.ErrNotExist)
	flags := os.O_WRONLY | os.O_CREATE | syscall.O_NONBLOCK
	if appendTo {
		flags |= os.O_APPEND
	}
	f, err := w.root.OpenFile(c, flags, filePerm)
	if err != nil {
		return WriteResult{}, w.fail(c, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return WriteResult{}, w.fail(c, err)
	}
	if !st.Mode().IsRegular() {
		return WriteResult{}, &Error{Path: p, Msg: fmt.Sprintf("is not a regular file (%s)", kind(st.Mode()))}
	}
	if !appendTo {
		if err := f.Truncate(0); err != nil {
			return WriteResult{}, w.fail(c, err)
		}
	}
	n, err := io.WriteString(f, content)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return WriteResult{}, w.fail(c, err)
	}
	r := WriteResult{Path: filepath.ToSlash(c), Bytes: int64(n), Created: created, Appended: appendTo}
	if st, err := w.root.Stat(c); err == nil {
		r.Size = st.Size()
	}
	return r, nil
}

// Entry is one entry of a directory listing.
type Entry struct {
	Name string `json:"name"`
	// Type is file, dir, symlink or other.
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	// Target is where a symbolic link points (it may lead out of the
	// workspace, and is then not followed).
	Target string `json:"target,omitempty"`
}

// ListResult is a directory listing, sorted by name.
type ListResult struct {
	Path    string
	Entries []Entry
	// Total counts the directory's entries; Clipped is set when there are
	// more than MaxList and Entries holds the first MaxList.
	Total   int
	Clipped bool
}

// List lists the directory at p ("" or "." for the workspace itself).
func (w *Workspace) List(p string) (ListResult, error) {
	c, err := clean(p, true)
	if err != nil {
		return ListResult{}, err
	}
	f, err := w.root.OpenFile(c, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ListResult{}, w.fail(c, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ListResult{}, w.fail(c, err)
	}
	if !st.IsDir() {
		return ListResult{}, &Error{Path: p, Msg: "is not a directory"}
	}
	des, err := f.ReadDir(-1)
	if err != nil {
		return ListResult{}, w.fail(c, err)
	}
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	r := ListResult{Path: filepath.ToSlash(c), Entries: []Entry{}, Total: len(des), Clipped: len(des) > MaxList}
	for _, de := range des[:min(len(des), MaxList)] {
		e := Entry{Name: de.Name(), Type: kind(de.Type())}
		if info, err := de.Info(); err == nil {
			e.Size, e.ModTime = info.Size(), info.ModTime().UTC()
		}
		if e.Type == "symlink" {
			e.Target, _ = w.root.Readlink(filepath.Join(c, de.Name()))
		}
		r.Entries = append(r.Entries, e)
	}
	return r, nil
}

// kind names a file type.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	}
	return "other"
}

// Mkdir creates the directory at p with its missing parents. It reports
// whether it created it: an existing directory is no error.
func (w *Workspace) Mkdir(p string) (created bool, err error) {
	c, err := clean(p, false)
	if err != nil {
		return false, err
	}
	if st, err := w.root.Stat(c); err == nil {
		if st.IsDir() {
			return false, nil
		}
		return false, &Error{Path: p, Msg: "already exists and is not a directory", Err: fs.ErrExist}
	}
	if err := w.root.MkdirAll(c, dirPerm); err != nil {
		return false, w.fail(c, err)
	}
	return true, nil
}

// Delete removes the file, symbolic link or empty directory at p; a
// directory with contents only when recursive. A symbolic link is removed
// itself, never what it points to. The workspace itself cannot be deleted.
// It returns the type of what it removed (file, dir, symlink or other).
func (w *Workspace) Delete(p string, recursive bool) (string, error) {
	c, err := clean(p, false)
	if err != nil {
		return "", err
	}
	if c == "." {
		return "", &Error{Path: p, Msg: "is the workspace itself, which cannot be deleted (delete its entries instead)"}
	}
	st, err := w.root.Lstat(c)
	if err != nil {
		return "", w.fail(c, err)
	}
	if st.IsDir() && recursive {
		err = w.root.RemoveAll(c)
	} else {
		err = w.root.Remove(c)
	}
	if err != nil {
		return "", w.fail(c, err)
	}
	return kind(st.Mode()), nil
}

// ExecResult is what a command did.
type ExecResult struct {
	// ExitCode is the command's exit status; -1 when a signal ended it
	// (Signal names it).
	ExitCode int
	Signal   string
	// Stdout and Stderr are the first MaxOutput bytes of each (invalid
	// UTF-8 replaced); StdoutBytes and StderrBytes count all of it.
	Stdout, Stderr           string
	StdoutBytes, StderrBytes int64
	// TimedOut is set when the command ran out of time and was killed.
	TimedOut bool
	Duration time.Duration
}

// StdoutClipped reports whether Stdout misses part of the output.
func (r ExecResult) StdoutClipped() bool { return r.StdoutBytes > int64(len(r.Stdout)) }

// StderrClipped reports whether Stderr misses part of the output.
func (r ExecResult) StderrClipped() bool { return r.StderrBytes > int64(len(r.Stderr)) }

// env is the environment of a command: PATH, HOME (the workspace) and
// LANG, nothing else of the calling process's.
func (w *Workspace) env() []string {
	pathEnv := os.Getenv("PATH")
	if pathEnv == "" {
		pathEnv = "/usr/local/bin:/usr/bin:/bin"
	}
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	return []string{"PATH=" + pathEnv, "HOME=" + w.dir, "LANG=" + lang, "PWD=" + w.dir}
}

// checkTimeout applies DefaultTimeout and refuses more than MaxTimeout.
func checkTimeout(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return DefaultTimeout, nil
	case d < 0:
		return 0, fmt.Errorf("timeout %s is negative", d)
	case d > MaxTimeout:
		return 0, fmt.Errorf("timeout %s is more than the %s maximum", d, MaxTimeout)
	}
	return d, nil
}

// capture keeps the first max bytes written to it and counts the rest.
type capture struct {
	max   int
	buf   []byte
	total int64
}

func (c *capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// text is the kept output as valid UTF-8.
func (c *capture) text() string {
	b := c.buf
	if c.total > int64(len(b)) {
		b = trimPartialRune(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// ReadBytes returns the bytes of the regular file at p, refusing one of
// more than max bytes.
func (w *Workspace) ReadBytes(p string, max int64) ([]byte, error) {
	c, err := clean(p, false)
	if err != nil {
		return nil, err
	}
	f, err := w.root.OpenFile(c, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, w.fail(c, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, w.fail(c, err)
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, &Error{Path: p, Msg: fmt.Sprintf("is not a regular file (%s)", kind(st.Mode()))}
	case st.Size() > max:
		return nil, &Error{Path: p, Msg: fmt.Sprintf("is %d bytes; at most %d can be read here", st.Size(), max)}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, w.fail(c, err)
	}
	if int64(len(b)) > max {
		return nil, &Error{Path: p, Msg: fmt.Sprintf("grew past %d bytes while it was read", max)}
	}
	return b, nil
}
