// Package profiletest makes real Chromium profiles for tests of base
// profiles: a site with a persistent login, a profile logged into it by a
// real Chromium, and the archive an operator would upload.
package profiletest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sovereign-fleet/sovereign/services/browser/internal/chrome"
)

// LoginSite is a site with a persistent login cookie: /login sets it
// (and a localStorage entry), every other page says who is logged in,
// /more sets another persistent cookie.
func LoginSite(t testing.TB) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: "alice", Path: "/", Expires: time.Now().Add(48 * time.Hour)})
			fmt.Fprint(w, `<!doctype html><title>welcome</title><script>localStorage.setItem("user", "alice")</script>`)
		case "/more":
			http.SetCookie(w, &http.Cookie{Name: "extra", Value: "from-session", Path: "/", Expires: time.Now().Add(48 * time.Hour)})
			fmt.Fprint(w, `<!doctype html><title>more</title>`)
		default:
			title := "not logged in"
			if c, err := r.Cookie("sid"); err == nil {
				title = "logged in as " + c.Value
			}
			fmt.Fprintf(w, `<!doctype html><title>%s</title>`, title)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

// MakeProfile logs into site with the full Chromium (what an operator's
// profile comes from) on a fresh user data directory and closes it cleanly
// (cookies and Local Storage reach the disk), and returns the directory.
// Workers open it in the Chromium they drive: the headless shell when it
// is installed.
func MakeProfile(t testing.TB, site string) string {
	t.Helper()
	exec, err := chrome.Find(chrome.Full)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chrome.Options(exec, dir, chrome.SandboxAuto)...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	tctx, tcancel := context.WithTimeout(bctx, 60*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(site+"/login")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tctx, chromedp.Navigate(site+"/")); err != nil {
		t.Fatal(err)
	}
	if title, err := chromedp.Run(tctx, chromedp.Title()); err != nil || title != "logged in as alice" {
		t.Fatalf("the profile's own Chromium: title %q, %v", title, err)
	}
	if err := chromedp.Cancel(bctx); err != nil { // Browser.close: a clean exit
		t.Fatalf("close chromium: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "Default", "Cookies")); err != nil {
		t.Fatalf("the profile has no cookie database after a clean close: %v", err)
	}
	return dir
}

// RawTarGz archives dir as an operator would (tar -C dir -czf - .):
// everything, symlinks included, unfiltered.
func RawTarGz(t testing.TB, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if d.Type()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if !d.IsDir() && !info.Mode().IsRegular() && link == "" {
			return nil // sockets and the like: tar would warn and skip
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name = "./" + filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
