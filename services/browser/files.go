package browser

import (
	"context"
	"flag"
	"fmt"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Files (issue 19): upload_file puts the files it is given (bytes, or a
// URL the worker fetches under the session's URL policy) into the
// session's own temporary directory, removed when the session closes, and
// the page package sets them on the file input.

// FileLimits bound the files of one upload_file call.
type FileLimits struct {
	// MaxFileBytes is the largest file (default 10 MiB).
	MaxFileBytes int64
	// MaxFiles is the most files per call (default 10).
	MaxFiles int
	// MaxTotalBytes is the most bytes per call (default 25 MiB).
	MaxTotalBytes int64
}

// Default file limits.
const (
	DefaultUploadMaxFileBytes  = 10 << 20
	DefaultUploadMaxFiles      = 10
	DefaultUploadMaxTotalBytes = 25 << 20
)

// withDefaults fills zero limits.
func (l FileLimits) withDefaults() FileLimits {
	if l.MaxFileBytes == 0 {
		l.MaxFileBytes = DefaultUploadMaxFileBytes
	}
	if l.MaxFiles == 0 {
		l.MaxFiles = DefaultUploadMaxFiles
	}
	if l.MaxTotalBytes == 0 {
		l.MaxTotalBytes = DefaultUploadMaxTotalBytes
	}
	return l
}

// validate checks the limits after withDefaults.
func (l FileLimits) validate() error {
	switch {
	case l.MaxFileBytes < 0:
		return fmt.Errorf("upload max file size %d: must be positive", l.MaxFileBytes)
	case l.MaxFiles < 0:
		return fmt.Errorf("upload max files %d: must be positive", l.MaxFiles)
	case l.MaxTotalBytes < 0:
		return fmt.Errorf("upload max total size %d: must be positive", l.MaxTotalBytes)
	}
	return nil
}

// registerFileFlags adds the upload limits' flags.
func registerFileFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	sizeFlag(fs, errs, &cfg.Files.MaxFileBytes, "upload-max-file-mb", "SOVEREIGN_UPLOAD_MAX_FILE_MB", DefaultUploadMaxFileBytes>>20, 20,
		"largest file upload_file sets on a file input, in MiB, given or fetched by URL")
	fs.IntVar(&cfg.Files.MaxFiles, "upload-max-files", config.MustInt(errs, "SOVEREIGN_UPLOAD_MAX_FILES", DefaultUploadMaxFiles),
		"most files one upload_file call sets [SOVEREIGN_UPLOAD_MAX_FILES]")
	sizeFlag(fs, errs, &cfg.Files.MaxTotalBytes, "upload-max-total-mb", "SOVEREIGN_UPLOAD_MAX_TOTAL_MB", DefaultUploadMaxTotalBytes>>20, 20,
		"most MiB one upload_file call sets, all files together")
}

// fileDir returns the session's temporary directory, made on first use
// in the worker's files/ directory (profile.go; the system's temp dir
// when the session has none). closeTabs removes it.
func (s *session) fileDir() (string, error) {
	if s.dir != "" {
		return s.dir, nil
	}
	dir, err := os.MkdirTemp(s.fileRoot, "sovereign-session-"+s.id+"-")
	if err != nil {
		return "", fmt.Errorf("make the session's file directory: %w", err)
	}
	s.dir = dir
	return dir, nil
}

// removeFiles removes the session's temporary directory.
func (s *session) removeFiles() {
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// fileTools hand files to the active tab.
var fileTools = map[string]sessionTool{
	"upload_file": {run: runUpload},
	"drop":        {run: runUpload},
}

// runUpload is upload_file and drop in the active tab.
func runUpload(s *session, ctx context.Context, r *browserv1.ToolRequest, _ page.Options) (*browserv1.ToolResult, error) {
	return s.uploadFile(ctx, s.tabs[s.active], r)
}

// uploadFile runs upload_file, or drop, on tab t: it writes the files
// into a directory of their own in the session's directory and has the page
// set them on the input (or drop them on the element).
func (s *session) uploadFile(ctx context.Context, t *tab, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	files, tool := req.GetUploadFile().GetFiles(), "upload_file"
	if d := req.GetDrop(); d != nil {
		files, tool = d.GetFiles(), "drop"
	}
	lim := s.limits.withDefaults()
	switch {
	case len(files) == 0 && tool == "upload_file":
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "upload_file needs at least one file in files")
	case len(files) == 0:
		return t.page.Upload(ctx, req, nil)
	case len(files) > lim.MaxFiles:
		return nil, bus.Errorf(commonv1.ErrorCode_TOO_LARGE, "%s got %d files; the limit is %d per call (the worker's --upload-max-files)", tool, len(files), lim.MaxFiles)
	}
	root, err := s.fileDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(root, "upload-")
	if err != nil {
		return nil, fmt.Errorf("make the upload's directory: %w", err)
	}
	var paths []string
	var total int64
	for i, f := range files {
		name, data, err := s.fileContent(ctx, i, f, lim.MaxFileBytes)
		if err != nil {
			return nil, err
		}
		if total += int64(len(data)); total > lim.MaxTotalBytes {
			return nil, bus.Errorf(commonv1.ErrorCode_TOO_LARGE, "the files of %s add up to more than %d bytes, the limit per call (the worker's --upload-max-total-mb)", tool, lim.MaxTotalBytes)
		}
		// One directory per file: two files may have the same name.
		sub := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(sub, 0o700); err != nil {
			return nil, fmt.Errorf("write file %d: %w", i+1, err)
		}
		p := filepath.Join(sub, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return nil, fmt.Errorf("write file %d: %w", i+1, err)
		}
		paths = append(paths, p)
	}
	return t.page.Upload(ctx, req, paths)
}

// fileContent returns the name and bytes of file i of upload_file.
func (s *session) fileContent(ctx context.Context, i int, f *browserv1.UploadFileItem, limit int64) (string, []byte, error) {
	what := fmt.Sprintf("file %d", i+1)
	switch {
	case f.GetPath() != "":
		return "", nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s names a path: the gateway reads paths in its workspace; a worker takes content or url", what)
	case f.GetUrl() != "" && len(f.GetContent()) > 0:
		return "", nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s has both content and url: give one", what)
	case f.GetUrl() != "":
		data, name, err := s.fetchFile(ctx, f.GetUrl(), limit)
		if err != nil {
			return "", nil, err
		}
		if f.GetName() != "" {
			name = f.GetName()
		}
		name, err = fileName(what, name)
		return name, data, err
	}
	if int64(len(f.GetContent())) > limit {
		return "", nil, bus.Errorf(commonv1.ErrorCode_TOO_LARGE, "%s (%q) is %d bytes; the limit is %d per file (the worker's --upload-max-file-mb)", what, f.GetName(), len(f.GetContent()), limit)
	}
	name, err := fileName(what, f.GetName())
	return name, f.GetContent(), err
}

// fileName checks the name a page sees for a file: a plain file name.
func fileName(what, name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s has no name: give name (such as report.pdf)", what)
	case len(name) > 255:
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: the name has %d bytes; the limit is 255", what, len(name))
	case name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00"):
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %q is not a plain file name (no / or \\)", what, name)
	}
	return name, nil
}

// fileFetchTimeout bounds the fetch of one file by URL.
const fileFetchTimeout = 30 * time.Second

// fetchFile fetches raw under the session's URL policy (every redirect is
// checked, and the connection goes only to addresses that were), reading
// at most limit bytes. It returns the bytes and the last segment of the
// URL's path as the file's name.
func (s *session) fetchFile(ctx context.Context, raw string, limit int64) ([]byte, string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "url %q is not an absolute http or https URL", clip(raw, 200))
	}
	var pol *browserv1.UrlPolicy
	if s.policy.GetEnforced() {
		pol = s.policy
	}
	compiled, err := compilePolicy(pol)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, fileFetchTimeout)
	defer cancel()
	g := &httpGuard{pol: compiled, pinned: map[string][]net.IP{}}
	if err := g.check(ctx, u); err != nil {
		return nil, "", err
	}
	client := g.client(nil)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "url %s: %v", shortURL(u), err)
	}
	hreq.Header.Set("User-Agent", "Sovereign/"+Version+" (upload_file)")
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, "", sendError(ctx, http.MethodGet, u, fileFetchTimeout, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", bus.Errorf(commonv1.ErrorCode_NAVIGATION_FAILED, "fetch %s for upload_file: HTTP %s", shortURL(u), resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, "", sendError(ctx, http.MethodGet, u, fileFetchTimeout, fmt.Errorf("read the body: %w", err))
	}
	if int64(len(data)) > limit {
		return nil, "", bus.Errorf(commonv1.ErrorCode_TOO_LARGE, "%s is more than %d bytes, the limit per file (the worker's --upload-max-file-mb)", shortURL(u), limit)
	}
	return data, path.Base(u.Path), nil
}

// clip cuts s to n characters for a message, scrubbed first (secrets.Cut).
func clip(s string, n int) string {
	kept, left := secrets.Cut(s, n, false)
	if left > 0 {
		kept += "…"
	}
	return kept
}
