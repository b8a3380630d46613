package sovereign

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/services/browser/profiletest"
)

// adminDo sends one admin API request with the admin token.
func adminDo(t *testing.T, method, url, token string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// tarNames lists the entries of a tar.gz.
func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// TestProfileThroughAdminAPI: an operator uploads a real Chromium profile
// logged into a site through the admin API; an MCP client's `open` with
// profile starts a browser session logged in there, another session is
// not; unsafe and oversize archives are refused; the export holds the
// login and none of the filtered entries.
func TestProfileThroughAdminAPI(t *testing.T) {
	const token = "profile-admin-token-0123456789abcdef"
	t.Setenv("SOVEREIGN_ADMIN_TOKEN", token)
	t.Setenv("SOVEREIGN_PROFILE_MAX_UPLOAD_MB", "20")
	site := profiletest.LoginSite(t)
	raw := profiletest.RawTarGz(t, profiletest.MakeProfile(t, site.URL))

	listen, _, dir := startUp(t, "--admin-listen", "127.0.0.1:0", "--profile-export", "--max-sessions", "4")
	base := consoleURL(t, dir) + "admin/profiles/"

	if code, body := adminDo(t, "PUT", base+"alice", "", bytes.NewReader(raw)); code != 401 {
		t.Fatalf("upload without the token = %d %s", code, body)
	}
	code, body := adminDo(t, "PUT", base+"alice", token, bytes.NewReader(raw))
	if code != 200 || !strings.Contains(string(body), `"dropped"`) {
		t.Fatalf("upload = %d %s", code, body)
	}

	// An archive with an entry escaping the profile: 400, nothing stored.
	var evil bytes.Buffer
	gz := gzip.NewWriter(&evil)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Name: "../../etc/cron.d/x", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	_ = gz.Close()
	if code, body := adminDo(t, "PUT", base+"evil", token, &evil); code != 400 || !strings.Contains(string(body), "unsafe path") {
		t.Fatalf("a traversal entry = %d %s; want 400", code, body)
	}
	// Past SOVEREIGN_PROFILE_MAX_UPLOAD_MB: 413.
	big := make([]byte, 21<<20)
	_, _ = rand.Read(big)
	if code, body := adminDo(t, "PUT", base+"big", token, bytes.NewReader(big)); code != 413 {
		t.Fatalf("a 21 MiB upload with a 20 MiB limit = %d %s; want 413", code, body)
	}
	code, body = adminDo(t, "GET", strings.TrimSuffix(base, "/"), token, nil)
	if code != 200 || !strings.Contains(string(body), `"alice"`) || strings.Contains(string(body), `"evil"`) || strings.Contains(string(body), `"big"`) {
		t.Fatalf("list = %d %s; want alice only", code, body)
	}

	// A session opened from the profile is logged in; another is not.
	c := mcpSession(t, listen)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "open"
	req.Params.Arguments = map[string]any{"url": site.URL + "/", "profile": "alice"}
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("open with profile: %v %v", err, res)
	}
	if got := callText(t, c, "get_title", nil); got != "logged in as alice" {
		t.Fatalf("the profile session's page says %q", got)
	}
	// The profile applies only when the session opens.
	req.Params.Arguments = map[string]any{"url": site.URL + "/", "profile": "alice"}
	if res, err := c.CallTool(ctx, req); err != nil || !res.IsError {
		t.Fatalf("open with profile in an open session = %v %v; want an error", res, err)
	}
	other := mcpSession(t, listen)
	callText(t, other, "open", map[string]any{"url": site.URL + "/"})
	if got := callText(t, other, "get_title", nil); got != "not logged in" {
		t.Fatalf("a session without the profile says %q", got)
	}
	unknown := mcpSession(t, listen)
	req.Params.Arguments = map[string]any{"url": site.URL + "/", "profile": "nobody"}
	if res, err := unknown.CallTool(ctx, req); err != nil || !res.IsError || !strings.Contains(resultText(res), "nobody") {
		t.Fatalf("open with an unknown profile = %v %v; want an error naming it", res, err)
	}

	// Export (allowed here by --profile-export): the login is there, the
	// filtered entries are not.
	code, body = adminDo(t, "GET", base+"alice/export", token, nil)
	if code != 200 {
		t.Fatalf("export = %d %s", code, body)
	}
	names := strings.Join(tarNames(t, body), "\n")
	if !strings.Contains(names, "Default/Cookies") {
		t.Fatalf("the export has no cookie database:\n%s", names)
	}
	for _, dropped := range []string{"Default/History", "Default/Cache/", "Default/Code Cache/", "SingletonLock", "Crashpad"} {
		if strings.Contains(names, dropped) {
			t.Errorf("the export holds %q, which the filter drops", dropped)
		}
	}
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, ct := range r.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
