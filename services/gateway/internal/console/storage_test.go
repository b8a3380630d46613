package console

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// memStorage is saved storage in memory.
type memStorage struct{ data map[string][]byte }

func (m *memStorage) Import(_ context.Context, owner, name string, state []byte) (json.RawMessage, error) {
	if !json.Valid(state) {
		return nil, fmt.Errorf("%w: not JSON", ErrInvalid)
	}
	m.data[owner+"/"+name] = state
	return json.RawMessage(`{"name":"` + name + `","cookies":1}`), nil
}

func (m *memStorage) Export(_ context.Context, owner, name string) ([]byte, error) {
	b, ok := m.data[owner+"/"+name]
	if !ok {
		return nil, fmt.Errorf("storage %s: %w", name, ErrNotFound)
	}
	return b, nil
}

func (m *memStorage) Move(_ context.Context, fromScope, owner, name string) (json.RawMessage, error) {
	b, ok := m.data[fromScope+"/"+name]
	if !ok {
		return nil, fmt.Errorf("storage %s: %w", name, ErrNotFound)
	}
	delete(m.data, fromScope+"/"+name)
	m.data[owner+"/"+name] = b
	return json.RawMessage(`{"name":"` + name + `"}`), nil
}

// TestAdminStorage: import answers the summary; export needs the switch
// on top of the admin token; bad owners, names and bodies are refused.
func TestAdminStorage(t *testing.T) {
	t.Parallel()
	f, _ := adminFixture(t, false)
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	c := f.client()
	const state = `{"cookies":[{"name":"sid","value":"v","domain":"example.com"}],"origins":[]}`
	if r := f.do(c, "PUT", "/admin/storage/anonymous/site-login", strings.NewReader(state), nil); r.status != 401 {
		t.Fatalf("import without the token = %d", r.status)
	}
	if r := f.do(c, "PUT", "/admin/storage/anonymous/site-login", strings.NewReader(state), auth); r.status != 200 || !strings.Contains(r.body, `"cookies": 1`) {
		t.Fatalf("import = %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/admin/storage/anonymous/Bad.Name", state, 400, "bad storage name"},
		{"/admin/storage/a%20b/site", state, 400, "bad owner"},
		{"/admin/storage/anonymous/site", "not json", 400, "not JSON"},
		{"/admin/storage/anonymous/site", strings.Repeat("x", MaxStorageBody+1), 413, "too large"},
	} {
		if r := f.do(c, "PUT", tc.path, strings.NewReader(tc.body), auth); r.status != tc.status || !strings.Contains(r.body, tc.want) {
			t.Errorf("PUT %s = %d %.200s, want %d with %q", tc.path, r.status, r.body, tc.status, tc.want)
		}
	}
	if r := f.do(c, "GET", "/admin/storage/anonymous/site-login/export", nil, auth); r.status != 403 || !strings.Contains(r.body, "SOVEREIGN_STORAGE_EXPORT=1") {
		t.Fatalf("export while off = %d %s; want 403 naming the switch", r.status, r.body)
	}

	on, _ := adminFixture(t, true)
	c = on.client()
	on.do(c, "PUT", "/admin/storage/anonymous/site-login", strings.NewReader(state), auth)
	if r := on.do(c, "GET", "/admin/storage/anonymous/site-login/export", nil, auth); r.status != 200 || r.body != state || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("export while on = %d %q %v", r.status, r.body, r.header)
	}
	if r := on.do(c, "GET", "/admin/storage/someone/site-login/export", nil, auth); r.status != 404 {
		t.Fatalf("export of another owner's = %d %s", r.status, r.body)
	}
	// move hands a legacy scope's storage to an owner.
	on.do(c, "PUT", "/admin/storage/0123456789abcdef01234567/old-login", strings.NewReader(state), auth)
	if r := on.do(c, "POST", "/admin/storage/someone/old-login/move", strings.NewReader(`{"from_scope":"0123456789abcdef01234567"}`), auth); r.status != 200 {
		t.Fatalf("move = %d %s", r.status, r.body)
	}
	if r := on.do(c, "GET", "/admin/storage/someone/old-login/export", nil, auth); r.status != 200 || r.body != state {
		t.Fatalf("export after the move = %d %s", r.status, r.body)
	}
	if r := on.do(c, "POST", "/admin/storage/someone/old-login/move", strings.NewReader(`{}`), auth); r.status != 400 || !strings.Contains(r.body, "from_scope") {
		t.Fatalf("move without from_scope = %d %s, want 400 naming it", r.status, r.body)
	}
}
