package browser

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Downloads (issue 19). Each session's browser context saves downloads
// into the session's temporary directory (Browser.setDownloadBehavior,
// allowAndName: files are named by their GUID), with download events on.
// The session follows the events; after each tool that acts on a page it
// waits (a bounded while) for the downloads that a frame of its tabs
// started during the call, names them d1, d2, … and stores them in the
// fleet's object store (a JetStream object store bucket with a TTL, one
// object per download, named <session>/<id>), so that they outlive the
// worker's disk. The result of the tool says "downloaded report.pdf,
// 12 KiB, as d1". A download beyond the size limit is cancelled. The URL
// policy applies as to any navigation: the browser's request for the file
// passes the session's guard.

// DownloadLimits bound downloads.
type DownloadLimits struct {
	// MaxBytes is the largest download (default 20 MiB); a bigger one is
	// cancelled.
	MaxBytes int64
	// TTL is how long the fleet keeps a download (default 1h).
	TTL time.Duration
	// Wait is the longest an action waits for its downloads to finish
	// (default 20s); a download still running is reported as such.
	Wait time.Duration
	// SessionMaxBytes is the most bytes of downloads one session keeps
	// (default 100 MiB); a download past it is not kept.
	SessionMaxBytes int64
}

// Default download limits.
const (
	DefaultDownloadMaxBytes = 20 << 20
	DefaultDownloadTTL      = time.Hour
	DefaultDownloadWait     = 20 * time.Second
	DefaultDownloadSession  = 100 << 20
)

// maxDownloads is how many downloads one session keeps.
const maxDownloads = 100

func (l DownloadLimits) withDefaults() DownloadLimits {
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultDownloadMaxBytes
	}
	if l.TTL == 0 {
		l.TTL = DefaultDownloadTTL
	}
	if l.Wait == 0 {
		l.Wait = DefaultDownloadWait
	}
	if l.SessionMaxBytes == 0 {
		l.SessionMaxBytes = DefaultDownloadSession
	}
	return l
}

// registerDownloadFlags adds the download limits' flags.
func registerDownloadFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	sizeFlag(fs, errs, &cfg.Downloads.MaxBytes, "download-max-mb", "SOVEREIGN_DOWNLOAD_MAX_MB", DefaultDownloadMaxBytes>>20, 20,
		"largest download a session keeps, in MiB; a bigger one is cancelled")
	sizeFlag(fs, errs, &cfg.Downloads.SessionMaxBytes, "download-session-max-mb", "SOVEREIGN_DOWNLOAD_SESSION_MAX_MB", DefaultDownloadSession>>20, 20,
		"most MiB of downloads one session keeps; a download past it is not kept")
	fs.DurationVar(&cfg.Downloads.TTL, "download-ttl", config.MustDuration(errs, "SOVEREIGN_DOWNLOAD_TTL", DefaultDownloadTTL),
		"how long the fleet's object store keeps a session's downloads [SOVEREIGN_DOWNLOAD_TTL]")
	fs.DurationVar(&cfg.Downloads.Wait, "download-wait", config.MustDuration(errs, "SOVEREIGN_DOWNLOAD_WAIT", DefaultDownloadWait),
		"longest an action waits for the downloads it started to finish [SOVEREIGN_DOWNLOAD_WAIT]")
}

// downloadBucket is the name of the downloads object store of prefix.
func downloadBucket(prefix string) string { return bus.BucketName(prefix, "_browser_downloads") }

// openDownloads opens the fleet's downloads object store. Without
// JetStream the worker keeps downloads on its disk only.
func (w *Worker) openDownloads(ctx context.Context, c *bus.Conn) {
	js, err := jetstream.New(c.NATS())
	if err == nil {
		w.dlStore, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      downloadBucket(c.Prefix()),
			Description: "Sovereign browser sessions' downloads",
			TTL:         w.cfg.Downloads.TTL,
			Replicas:    config.JetStreamReplicas(),
		})
	}
	if err != nil {
		w.dlStore = nil
		w.log.Warn("downloads stay on this worker's disk: no object store", "err", err)
	}
}

// download is one file a session's browser downloaded.
type download struct {
	id              string // d1, d2, … once the session claimed it
	guid, url, name string
	frame           cdp.FrameID
	began           time.Time
	state           cdpbrowser.DownloadProgressState
	received, total int64
	path            string
	tooBig, stored  bool
	cancelRequested bool
	done            chan struct{} // closed when it completed or was cancelled
	mime            string
	size            int64
}

// downloads is what a session knows about downloads. Its listener sees
// the download events of the whole browser (every session's) and records
// them; the session claims those a frame of its own tabs began.
type downloads struct {
	mu     sync.Mutex
	dir    string // where the browser saves the session's downloads
	byGUID map[string]*download
	list   []*download // claimed, in order
	kept   int64       // bytes of the downloads kept
}

// enableDownloads has the session's browser context save downloads into
// the session's directory, with events, and starts following them.
func (s *session) enableDownloads(ctx context.Context) error {
	root, err := s.fileDir()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "downloads")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make the downloads directory: %w", err)
	}
	s.dl.byGUID, s.dl.dir = map[string]*download{}, dir
	lctx, cancel := context.WithCancel(s.browser)
	context.AfterFunc(s.ctx, cancel)
	if err := chromedp.ListenBrowser(lctx, s.onDownloadEvent); err != nil {
		cancel()
		return fmt.Errorf("follow downloads: %w", err)
	}
	cctx, ccancel := within(s.browser, ctx)
	defer ccancel()
	_, err = chromedp.CallBrowser(cctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, BrowserContextID: s.bcid,
		DownloadPath: dir, EventsEnabled: new(true),
	})
	if err != nil {
		return fmt.Errorf("set the download behavior: %w", err)
	}
	return nil
}

// onDownloadEvent records download events. It runs on the browser's event
// loop: it must not block nor call the browser (cancelling runs on a
// goroutine).
func (s *session) onDownloadEvent(ev any) {
	s.dl.mu.Lock()
	defer s.dl.mu.Unlock()
	switch ev := ev.(type) {
	case *cdpbrowser.EventDownloadWillBegin:
		if len(s.dl.byGUID) >= 4*maxDownloads {
			s.dl.pruneLocked(time.Now().Add(-time.Minute))
		}
		d := &download{guid: ev.GUID, url: ev.URL, name: ev.SuggestedFilename, frame: ev.FrameID,
			began: time.Now(), done: make(chan struct{})}
		s.dl.byGUID[ev.GUID] = d
		if s.betweenCalls(ev.FrameID) {
			// No call runs to claim it (a page that downloads on a timer):
			// it would fill the worker's disk unseen and uncounted.
			d.cancelRequested = true
			go s.cancelDownload(ev.GUID)
		}
	case *cdpbrowser.EventDownloadProgress:
		d := s.dl.byGUID[ev.GUID]
		if d == nil || d.state == cdpbrowser.DownloadProgressStateCompleted || d.state == cdpbrowser.DownloadProgressStateCanceled {
			return
		}
		d.received, d.total, d.state = int64(ev.ReceivedBytes), int64(ev.TotalBytes), ev.State
		limit := s.dlLimits.withDefaults().MaxBytes
		if ev.State == cdpbrowser.DownloadProgressStateInProgress && (d.received > limit || d.total > limit) && !d.cancelRequested {
			d.tooBig, d.cancelRequested = true, true
			go s.cancelDownload(ev.GUID)
		}
		if ev.State != cdpbrowser.DownloadProgressStateInProgress {
			d.path = ev.FilePath
			close(d.done)
			if d.state == cdpbrowser.DownloadProgressStateCompleted && d.cancelRequested && d.id == "" {
				// Its cancel came too late (a small or local download,
				// as from a blob, finishes within a moment): nothing
				// will claim, count or list it, so its file goes.
				s.dl.removeLocked(d)
			}
		}
	}
}

// betweenCalls reports whether no call runs in the session and frame is
// one of its tabs'. It takes the session's lock only when it is free, so
// the event listener never waits on a call.
func (s *session) betweenCalls(frame cdp.FrameID) bool {
	select {
	case s.lock <- struct{}{}:
		defer func() { <-s.lock }()
		return s.ownsFrame(frame)
	default:
		return false
	}
}

// removeLocked removes the file of a finished download that is not kept.
// It does not wait for the disk: the caller may be the browser's event
// loop. The caller holds d.mu.
func (d *downloads) removeLocked(x *download) {
	path := x.path
	if path == "" {
		path = filepath.Join(d.dir, x.guid)
	}
	go func() { _ = os.Remove(path) }()
}

// pruneLocked forgets downloads nobody claimed that began before cutoff
// (another session's).
func (d *downloads) pruneLocked(cutoff time.Time) {
	for g, x := range d.byGUID {
		if x.id == "" && x.began.Before(cutoff) {
			delete(d.byGUID, g)
		}
	}
}

// cancelDownload cancels a download of the session's browser context.
func (s *session) cancelDownload(guid string) {
	ctx, cancel := context.WithTimeout(s.browser, 5*time.Second)
	defer cancel()
	_, _ = chromedp.CallBrowser(ctx, cdpbrowser.CancelDownload, cdpbrowser.CancelDownloadParams{GUID: guid, BrowserContextID: s.bcid})
}

// ownsFrame reports whether frame belongs to one of the session's tabs.
// The caller holds the session's lock.
func (s *session) ownsFrame(frame cdp.FrameID) bool {
	for _, t := range s.tabs {
		if t.page.HasFrame(frame) {
			return true
		}
	}
	return false
}

// downloadBegan reports whether a frame of the session began a download
// since start, waiting a moment for its event.
func (s *session) downloadBegan(ctx context.Context, start time.Time) bool {
	if s.dl.byGUID == nil {
		return false
	}
	for try := 0; try < 10 && ctx.Err() == nil; try++ {
		s.dl.mu.Lock()
		for _, d := range s.dl.byGUID {
			if d.id == "" && !d.began.Before(start) && s.claims(d) {
				s.dl.mu.Unlock()
				return true
			}
		}
		s.dl.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// claims reports whether d is the session's: a frame of its tabs began it,
// or its file landed in the session's directory (a download that opened
// in a tab of its own, which closed before the session adopted it). The
// caller holds s.dl.mu and the session's lock.
func (s *session) claims(d *download) bool {
	return s.ownsFrame(d.frame) || s.dir != "" && d.path != "" && strings.HasPrefix(d.path, s.dir+string(filepath.Separator))
}

// collectDownloads claims the downloads that the session's frames began
// since start, waits (at most the download wait, and not past ctx) for
// them to finish, stores them and adds a line for each to res.
func (s *session) collectDownloads(ctx context.Context, start time.Time, res *browserv1.ToolResult, store jetstream.ObjectStore) {
	if s.dl.byGUID == nil || res == nil {
		return
	}
	var mine []*download
	s.dl.mu.Lock()
	var over []string
	for _, d := range s.dl.byGUID {
		switch {
		case d.id != "" || d.began.Before(start) || !s.claims(d):
		case len(s.dl.list) < maxDownloads:
			d.id = "d" + strconv.Itoa(len(s.dl.list)+1)
			s.dl.list = append(s.dl.list, d)
			mine = append(mine, d)
		case !d.cancelRequested:
			// Past the most a session lists: not kept.
			d.cancelRequested = true
			over = append(over, d.guid)
			if d.state == cdpbrowser.DownloadProgressStateCompleted {
				s.dl.removeLocked(d) // finished before its cancel
			}
		}
	}
	s.dl.mu.Unlock()
	for _, g := range over {
		s.cancelDownload(g)
	}
	if len(over) > 0 {
		page.AppendText(res, fmt.Sprintf("- %d more downloads were cancelled: a session keeps at most %d", len(over), maxDownloads))
	}
	if len(mine) == 0 {
		return
	}
	wait := s.dlLimits.withDefaults().Wait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-2*time.Second)
	}
	timer := time.NewTimer(max(wait, 0))
	defer timer.Stop()
	var lines []string
	for _, d := range mine {
		select {
		case <-d.done:
		case <-timer.C:
		case <-ctx.Done():
		}
		lines = append(lines, "- "+s.finishDownload(ctx, d, store))
	}
	page.AppendText(res, strings.Join(lines, "\n"))
	page.SetStructured(res, "downloads", s.downloadInfos(mine))
}

// finishDownload stores a finished download and says what became of it.
func (s *session) finishDownload(ctx context.Context, d *download, store jetstream.ObjectStore) string {
	s.dl.mu.Lock()
	state, tooBig, path, received := d.state, d.tooBig, d.path, d.received
	s.dl.mu.Unlock()
	name := clipName(d.name)
	switch {
	case tooBig:
		return fmt.Sprintf("the download of %s (%s) was stopped: it passed %s, the limit per download (the worker's --download-max-mb)",
			name, d.id, sizeText(s.dlLimits.withDefaults().MaxBytes))
	case state == cdpbrowser.DownloadProgressStateCanceled:
		return fmt.Sprintf("the download of %s (%s) was cancelled", name, d.id)
	case state != cdpbrowser.DownloadProgressStateCompleted:
		return fmt.Sprintf("downloading %s as %s (%s so far); download_list shows when it is done", name, d.id, sizeText(received))
	}
	if path == "" {
		path = filepath.Join(s.dir, "downloads", d.guid)
	}
	// A download can finish before any progress event passed the limit
	// (a fast one): the size on disk decides before the file is read.
	if fi, err := os.Stat(path); err == nil && fi.Size() > s.dlLimits.withDefaults().MaxBytes {
		_ = os.Remove(path)
		s.dl.mu.Lock()
		d.tooBig = true
		s.dl.mu.Unlock()
		return fmt.Sprintf("the download of %s (%s) was not kept: it is %s, past %s, the limit per download (the worker's --download-max-mb)",
			name, d.id, sizeText(fi.Size()), sizeText(s.dlLimits.withDefaults().MaxBytes))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("the download of %s (%s) finished, but its file cannot be read: %v", name, d.id, err)
	}
	s.dl.mu.Lock()
	over := s.dl.kept+int64(len(data)) > s.dlLimits.withDefaults().SessionMaxBytes
	if over {
		d.tooBig = true
	} else {
		s.dl.kept += int64(len(data))
	}
	s.dl.mu.Unlock()
	if over {
		_ = os.Remove(path)
		return fmt.Sprintf("downloaded %s (%s, %s), but it is not kept: the session's downloads would pass %s, the limit per session (the worker's --download-session-max-mb)",
			name, d.id, sizeText(int64(len(data))), sizeText(s.dlLimits.withDefaults().SessionMaxBytes))
	}
	mt := downloadMIME(d.name, data)
	stored := false
	if store != nil {
		// The description names the file for whoever reads the bucket.
		_, err := store.Put(ctx, jetstream.ObjectMeta{Name: s.id + "/" + d.id, Description: clip(d.name, 200) + " (" + mt + ")"}, bytes.NewReader(data))
		stored = err == nil
	}
	s.dl.mu.Lock()
	d.path, d.size, d.mime, d.stored = path, int64(len(data)), mt, stored
	s.dl.mu.Unlock()
	return fmt.Sprintf("downloaded %s, %s, as %s (download_get %s)", name, sizeText(int64(len(data))), d.id, d.id)
}

// downloadMIME guesses a download's type from its name, then its bytes.
func downloadMIME(name string, data []byte) string {
	if t := mime.TypeByExtension(strings.ToLower(filepath.Ext(name))); t != "" {
		return t
	}
	return http.DetectContentType(data)
}

// downloadInfo is a download in structured results.
type downloadInfo struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	URL   string `json:"url"`
	State string `json:"state"`
	Bytes int64  `json:"bytes"`
	MIME  string `json:"mime_type,omitempty"`
}

func (s *session) downloadInfos(list []*download) []downloadInfo {
	s.dl.mu.Lock()
	defer s.dl.mu.Unlock()
	out := make([]downloadInfo, 0, len(list))
	for _, d := range list {
		state := string(d.state)
		if d.tooBig {
			state = "too_big"
		}
		n := d.size
		if n == 0 {
			n = d.received
		}
		out = append(out, downloadInfo{ID: d.id, Name: clipName(d.name), URL: page.ClipURL(d.url), State: state, Bytes: n, MIME: d.mime})
	}
	return out
}

// downloadTools read the session's downloads.
var downloadTools = map[string]sessionTool{
	"download_list": {run: func(s *session, _ context.Context, _ *browserv1.ToolRequest, _ page.Options) (*browserv1.ToolResult, error) {
		return s.downloadList()
	}},
	"download_get": {run: func(s *session, ctx context.Context, r *browserv1.ToolRequest, _ page.Options) (*browserv1.ToolResult, error) {
		return s.downloadGet(ctx, r, s.dlStore)
	}},
}

// downloadList is the download_list tool.
func (s *session) downloadList() (*browserv1.ToolResult, error) {
	s.dl.mu.Lock()
	list := append([]*download(nil), s.dl.list...)
	s.dl.mu.Unlock()
	infos := s.downloadInfos(list)
	if len(infos) == 0 {
		return result("no downloads in this session yet", map[string]any{"downloads": infos})
	}
	var b strings.Builder
	if len(infos) == 1 {
		b.WriteString("1 download:")
	} else {
		fmt.Fprintf(&b, "%d downloads:", len(infos))
	}
	for _, d := range infos {
		fmt.Fprintf(&b, "\n%s %s — %s, %s, from %s", d.ID, d.Name, d.State, sizeText(d.Bytes), d.URL)
	}
	return result(b.String(), map[string]any{"downloads": infos})
}

// downloadGet is the download_get tool: a text file as text (cut at
// maxChars), any other as a file part (an MCP embedded resource).
func (s *session) downloadGet(ctx context.Context, req *browserv1.ToolRequest, store jetstream.ObjectStore) (*browserv1.ToolResult, error) {
	id := strings.TrimSpace(req.GetDownloadGet().GetId())
	s.dl.mu.Lock()
	var d *download
	for _, x := range s.dl.list {
		if x.id == id {
			d = x
		}
	}
	late := d != nil && d.state == cdpbrowser.DownloadProgressStateCompleted && d.mime == "" && !d.tooBig
	s.dl.mu.Unlock()
	if d == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "there is no download %q in this session; download_list shows them", clipName(id))
	}
	if late {
		// It finished after the action that began it had stopped waiting.
		s.finishDownload(ctx, d, store)
	}
	s.dl.mu.Lock()
	snapshot := *d
	s.dl.mu.Unlock()
	if snapshot.tooBig || snapshot.state != cdpbrowser.DownloadProgressStateCompleted || snapshot.mime == "" {
		state := string(snapshot.state)
		if snapshot.tooBig {
			state = "not kept: past the limit per download or per session"
		}
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "download %s (%s) has no file: %s", id, clipName(snapshot.name), state)
	}
	data, err := s.readDownload(ctx, &snapshot, store)
	if err != nil {
		return nil, err
	}
	name := clipName(snapshot.name)
	if isText(snapshot.mime) && utf8.Valid(data) {
		limit := int(req.GetMaxChars())
		if limit <= 0 {
			limit = defaultDownloadChars
		}
		n := utf8.RuneCount(data)
		text, left := secrets.Cut(string(data), limit, false) // scrub, then cut
		if left > 0 {
			text += fmt.Sprintf("\n… (cut at %d of %d characters; pass max_chars for more)", limit, n)
		}
		res, err := result(fmt.Sprintf("%s (%s, %s):\n%s", name, snapshot.mime, sizeText(int64(len(data))), text), nil)
		return res, err
	}
	res, err := result(fmt.Sprintf("%s (%s, %s) as an embedded resource", name, snapshot.mime, sizeText(int64(len(data)))), nil)
	if err != nil {
		return nil, err
	}
	res.Content = append(res.Content, &browserv1.Content{Part: &browserv1.Content_Resource{Resource: &browserv1.Resource{
		Name: safeFileName(snapshot.name), MimeType: snapshot.mime, Data: data}}})
	return res, nil
}

// defaultDownloadChars is the most characters download_get returns of a
// text file when the call gives no max_chars.
const defaultDownloadChars = 20000

// readDownload reads a download from the object store, or the worker's
// disk.
func (s *session) readDownload(ctx context.Context, d *download, store jetstream.ObjectStore) ([]byte, error) {
	if d.stored && store != nil {
		data, err := store.GetBytes(ctx, s.id+"/"+d.id)
		if err == nil {
			return data, nil
		}
		if !errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("read download %s from the object store: %w", d.id, err)
		}
	}
	data, err := os.ReadFile(d.path)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "download %s is no longer kept (downloads expire after the worker's --download-ttl)", d.id)
	}
	return data, nil
}

// removeDownloads deletes the session's downloads from the object store.
func (s *session) removeDownloads(store jetstream.ObjectStore) {
	if store == nil {
		return
	}
	s.dl.mu.Lock()
	list := append([]*download(nil), s.dl.list...)
	s.dl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, d := range list {
		if d.stored {
			_ = store.Delete(ctx, s.id+"/"+d.id)
		}
	}
}

// isText reports whether a MIME type is text a model reads as such.
func isText(mt string) bool {
	mt, _, _ = strings.Cut(mt, ";")
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || mt == "application/xml" ||
		strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") || mt == "application/javascript"
}

// sizeText says n bytes as "512 bytes", "12 KiB" or "3.4 MiB".
func sizeText(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KiB", (n+512)>>10)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// clipName cuts a name the page controls for messages.
func clipName(s string) string {
	if s == "" {
		return "(no name)"
	}
	return clip(s, 200)
}

// safeFileName keeps the characters of a name that any file system and URI
// take as they are.
func safeFileName(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
