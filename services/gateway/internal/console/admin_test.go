package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// memScripts is an in-test Scripts source: the handler layer is under
// test here; the gateway's tests run the real store.
type memScripts struct {
	mu  sync.Mutex
	src map[string][]byte
}

func (m *memScripts) check(name string, src []byte) (ScriptInfo, error) {
	if !bytes.Contains(src, []byte("describe")) {
		return ScriptInfo{}, fmt.Errorf("%w: script %s: it defines no describe()", ErrInvalid, name)
	}
	return ScriptInfo{Name: name, Tools: []string{name + "__search"}, Size: len(src)}, nil
}

func (m *memScripts) List(context.Context) ([]ScriptInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ScriptInfo
	for n, s := range m.src {
		out = append(out, ScriptInfo{Name: n, Size: len(s)})
	}
	return out, nil
}

func (m *memScripts) Get(_ context.Context, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.src[name]
	if !ok {
		return nil, fmt.Errorf("script %s: %w", name, ErrNotFound)
	}
	return s, nil
}

func (m *memScripts) Validate(_ context.Context, name string, src []byte) (ScriptInfo, error) {
	return m.check(name, src)
}

func (m *memScripts) Put(_ context.Context, name string, src []byte) (ScriptInfo, error) {
	info, err := m.check(name, src)
	if err != nil {
		return info, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.src[name] = src
	return info, nil
}

func (m *memScripts) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.src[name]; !ok {
		return fmt.Errorf("script %s: %w", name, ErrNotFound)
	}
	delete(m.src, name)
	return nil
}

type memProfiles struct {
	mu   sync.Mutex
	data map[string][]byte
}

func (m *memProfiles) List(context.Context) ([]ProfileInfo, error) { return nil, nil }

func (m *memProfiles) Put(_ context.Context, name string, r io.Reader) (ProfileInfo, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return ProfileInfo{}, err
	}
	if bytes.Contains(b, []byte("../")) {
		return ProfileInfo{}, fmt.Errorf("%w: entry ../x escapes the profile", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[name] = b
	return ProfileInfo{Name: name, Size: int64(len(b))}, nil
}

func (m *memProfiles) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.data[name]; !ok {
		return fmt.Errorf("profile %s: %w", name, ErrNotFound)
	}
	delete(m.data, name)
	return nil
}

func (m *memProfiles) Export(_ context.Context, name string, w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.data[name]
	if !ok {
		return fmt.Errorf("profile %s: %w", name, ErrNotFound)
	}
	_, err := w.Write(b)
	return err
}

func adminFixture(t *testing.T, export bool) (*fixture, *memScripts) {
	t.Helper()
	scripts := &memScripts{src: map[string][]byte{}}
	f := &fixture{t: t, clock: &testClock{}}
	sessions := Sources{
		Sessions:     func(context.Context) ([]Session, error) { return []Session{{ID: "mcp.1", Kind: "mcp"}}, nil },
		CloseSession: func(context.Context, string) error { return nil },
	}
	c, err := New(Config{Token: testToken, Sources: sessions, Admin: Admin{
		Scripts:  scripts,
		Profiles: &memProfiles{data: map[string][]byte{}},
		Reload: func(_ context.Context, target, name string) (ReloadResult, error) {
			return ReloadResult{Target: target, Added: []string{"jira__search"}, Tools: 40}, nil
		},
		HTTPTools: func(context.Context) ([]byte, []string, error) {
			return []byte(`{"tools":[]}`), []string{"tool GetX: bad method"}, nil
		},
		PutHTTPTools: func(_ context.Context, file []byte) (ReloadResult, error) {
			if !json.Valid(file) {
				return ReloadResult{}, fmt.Errorf("%w: the tools file is not JSON", ErrInvalid)
			}
			return ReloadResult{Target: "http-tools"}, nil
		},
		ProfileExport:    export,
		MaxProfileUpload: 1024,
		Storage:          &memStorage{data: map[string][]byte{}},
		StorageExport:    export,
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(c)
	t.Cleanup(f.srv.Close)
	return f, scripts
}

const goodScript = `function describe() { return {name: "search"} } function search(a) { return "ok" }`

// TestAdminAuth: every admin route answers 401 without a token and with a
// wrong one (and with only a console login cookie), and works with the
// admin token.
func TestAdminAuth(t *testing.T) {
	t.Parallel()
	f, _ := adminFixture(t, true)
	routes := []struct{ method, path, body string }{
		{"GET", "/admin/scripts", ""},
		{"PUT", "/admin/scripts/jira", goodScript},
		{"GET", "/admin/scripts/jira", ""},
		{"POST", "/admin/scripts/jira/validate", goodScript},
		{"DELETE", "/admin/scripts/jira", ""},
		{"GET", "/admin/profiles", ""},
		{"PUT", "/admin/profiles/gemini", "archive"},
		{"GET", "/admin/profiles/gemini/export", ""},
		{"DELETE", "/admin/profiles/gemini", ""},
		{"GET", "/admin/http-tools", ""},
		{"PUT", "/admin/http-tools", `{"tools":[]}`},
		{"POST", "/admin/reload", `{"target":"all"}`},
		{"GET", "/admin/sessions", ""},
		{"DELETE", "/admin/sessions/mcp.1", ""},
		{"GET", "/admin/nothing", ""},
	}
	c := f.client()
	if r := f.login(c, testToken); r.status != http.StatusSeeOther {
		t.Fatalf("login = %d", r.status)
	}
	for _, rt := range routes {
		for _, tc := range []struct {
			name   string
			header map[string]string
			client *http.Client
		}{
			{"no token", nil, f.client()},
			{"cookie only", map[string]string{"Origin": f.srv.URL}, c},
			{"wrong token", map[string]string{"Authorization": "Bearer wrong-token-0123456789"}, f.client()},
			{"basic auth", map[string]string{"Authorization": "Basic " + testToken}, f.client()},
		} {
			// After a few wrong tokens the client is rate-limited (429):
			// refused as well.
			r := f.do(tc.client, rt.method, rt.path, strings.NewReader(rt.body), tc.header)
			refused := r.status == http.StatusUnauthorized || r.status == http.StatusTooManyRequests && tc.header["Authorization"] != ""
			if !refused || !strings.Contains(r.body, `"error"`) {
				t.Errorf("%s %s with %s = %d %s; want 401 with a JSON error", rt.method, rt.path, tc.name, r.status, r.body)
			}
		}
	}
	// With the token every route answers (404 only for what does not
	// exist). A fresh console: the wrong tokens above got this client
	// rate-limited, as they should.
	f, _ = adminFixture(t, true)
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	for _, rt := range routes {
		r := f.do(f.client(), rt.method, rt.path, strings.NewReader(rt.body), auth)
		want := http.StatusOK
		if rt.path == "/admin/nothing" {
			want = http.StatusNotFound
		}
		if r.status == http.StatusUnauthorized || r.status != want {
			t.Errorf("%s %s with the token = %d %s; want %d", rt.method, rt.path, r.status, r.body, want)
		}
	}
}

// TestAdminScripts: validate, put, get, list, delete, with the errors and
// limits of each.
func TestAdminScripts(t *testing.T) {
	t.Parallel()
	f, scripts := adminFixture(t, false)
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	c := f.client()

	r := f.do(c, "POST", "/admin/scripts/jira/validate", strings.NewReader(goodScript), auth)
	if r.status != 200 || !strings.Contains(r.body, `"jira__search"`) {
		t.Fatalf("validate = %d %s", r.status, r.body)
	}
	if _, err := scripts.Get(context.Background(), "jira"); err == nil {
		t.Fatal("validate stored the script")
	}
	r = f.do(c, "POST", "/admin/scripts/jira/validate", strings.NewReader("var x = 1"), auth)
	if r.status != 400 || !strings.Contains(r.body, "no describe()") {
		t.Fatalf("validate a bad script = %d %s; want 400 saying why", r.status, r.body)
	}
	for _, bad := range []string{"Jira", "1jira", "ji-ra", "%2E%2E", "a.b", strings.Repeat("a", 33)} {
		r = f.do(c, "PUT", "/admin/scripts/"+bad, strings.NewReader(goodScript), auth)
		if r.status != 400 || !strings.Contains(r.body, "bad script name") {
			t.Errorf("PUT /admin/scripts/%s = %d %s; want 400", bad, r.status, r.body)
		}
	}
	r = f.do(c, "PUT", "/admin/scripts/jira", strings.NewReader(strings.Repeat(" ", MaxScriptBody+1)), auth)
	if r.status != 413 {
		t.Fatalf("an oversize script = %d %s; want 413", r.status, r.body)
	}
	r = f.do(c, "PUT", "/admin/scripts/jira", strings.NewReader(goodScript), auth)
	if r.status != 200 || !strings.Contains(r.body, `"tools"`) {
		t.Fatalf("put = %d %s", r.status, r.body)
	}
	r = f.do(c, "GET", "/admin/scripts/jira", nil, auth)
	if r.status != 200 || r.body != goodScript {
		t.Fatalf("get = %d %q", r.status, r.body)
	}
	r = f.do(c, "GET", "/admin/scripts", nil, auth)
	if r.status != 200 || !strings.Contains(r.body, `"name": "jira"`) {
		t.Fatalf("list = %d %s", r.status, r.body)
	}
	r = f.do(c, "DELETE", "/admin/scripts/jira", nil, auth)
	if r.status != 200 {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r = f.do(c, m, "/admin/scripts/jira", nil, auth); r.status != 404 {
			t.Errorf("%s of a deleted script = %d %s; want 404", m, r.status, r.body)
		}
	}
}

// TestAdminProfiles: upload limits and errors, export refused while off.
func TestAdminProfiles(t *testing.T) {
	t.Parallel()
	f, _ := adminFixture(t, false)
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	c := f.client()
	if r := f.do(c, "PUT", "/admin/profiles/gemini", strings.NewReader("archive"), auth); r.status != 200 {
		t.Fatalf("put = %d %s", r.status, r.body)
	}
	if r := f.do(c, "PUT", "/admin/profiles/evil", strings.NewReader("../x"), auth); r.status != 400 || !strings.Contains(r.body, "escapes") {
		t.Fatalf("an unsafe archive = %d %s; want 400", r.status, r.body)
	}
	if r := f.do(c, "PUT", "/admin/profiles/big", strings.NewReader(strings.Repeat("x", 2048)), auth); r.status != 413 || !strings.Contains(r.body, "SOVEREIGN_PROFILE_MAX_UPLOAD_MB") {
		t.Fatalf("an oversize archive = %d %s; want 413 naming the limit", r.status, r.body)
	}
	// A body without a length (chunked) is cut at the limit too.
	req, _ := http.NewRequest("PUT", f.srv.URL+"/admin/profiles/big", io.MultiReader(strings.NewReader(strings.Repeat("x", 2048))))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.ContentLength = -1
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 413 {
		t.Fatalf("a chunked oversize archive = %d; want 413", res.StatusCode)
	}
	if r := f.do(c, "PUT", "/admin/profiles/Bad.Name", strings.NewReader("x"), auth); r.status != 400 {
		t.Fatalf("a bad profile name = %d %s", r.status, r.body)
	}
	r := f.do(c, "GET", "/admin/profiles/gemini/export", nil, auth)
	if r.status != 403 || !strings.Contains(r.body, "SOVEREIGN_PROFILE_EXPORT=1") {
		t.Fatalf("export while off = %d %s; want 403 naming the switch", r.status, r.body)
	}
	if r := f.do(c, "DELETE", "/admin/profiles/nope", nil, auth); r.status != 404 {
		t.Fatalf("delete unknown = %d %s", r.status, r.body)
	}

	on, _ := adminFixture(t, true)
	c = on.client()
	on.do(c, "PUT", "/admin/profiles/gemini", strings.NewReader("archive"), auth)
	r = on.do(c, "GET", "/admin/profiles/gemini/export", nil, auth)
	if r.status != 200 || r.body != "archive" || r.header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("export while on = %d %q %v", r.status, r.body, r.header)
	}
}

// TestAdminReload: targets and names are checked.
func TestAdminReload(t *testing.T) {
	t.Parallel()
	f, _ := adminFixture(t, false)
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	c := f.client()
	for body, want := range map[string]int{
		``:                                     200,
		`{"target":"scripts","name":"jira"}`:   200,
		`{"target":"profiles"}`:                200,
		`{"target":"everything"}`:              400,
		`{"target":"profiles","name":"jira"}`:  400,
		`{"target":"scripts","name":"../etc"}`: 400,
		`{"targets":"all"}`:                    400,
		`not json`:                             400,
	} {
		if r := f.do(c, "POST", "/admin/reload", strings.NewReader(body), auth); r.status != want {
			t.Errorf("reload %s = %d %s; want %d", body, r.status, r.body, want)
		}
	}
	if r := f.do(c, "PUT", "/admin/http-tools", strings.NewReader("nope"), auth); r.status != 400 {
		t.Errorf("a tools file that is not JSON = %d %s; want 400", r.status, r.body)
	}
}
