package catalog

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

func TestParseUploadFile(t *testing.T) {
	tool, _ := Lookup("upload_file")
	b64 := base64.StdEncoding.EncodeToString([]byte("hello"))
	c, err := tool.Parse(map[string]any{"ref": "e7", "files": []any{
		map[string]any{"name": "a.txt", "content_base64": b64},
		map[string]any{"url": "https://example.com/b.pdf"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	files := c.Request.GetUploadFile().GetFiles()
	if len(files) != 2 || string(files[0].GetContent()) != "hello" || files[0].GetName() != "a.txt" || files[1].GetUrl() != "https://example.com/b.pdf" {
		t.Errorf("Parse = %v", c.Request)
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, MaxInlineUpload+1))
	for _, tt := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"no element", map[string]any{"files": []any{map[string]any{"url": "https://x"}}}, "say which element"},
		{"no files", map[string]any{"ref": "e1", "files": []any{}}, `argument "files" must list at least one file`},
		{"not an array", map[string]any{"ref": "e1", "files": "a.txt"}, `argument "files" must be an array, got a string`},
		{"not an object", map[string]any{"ref": "e1", "files": []any{"a.txt"}}, `argument "files[0]" must be an object`},
		{"both", map[string]any{"ref": "e1", "files": []any{map[string]any{"name": "a", "content_base64": b64, "url": "https://x"}}}, "gives more than one of content_base64, url and path"},
		{"neither", map[string]any{"ref": "e1", "files": []any{map[string]any{"name": "a"}}}, "has none of content_base64, url and path"},
		{"no name", map[string]any{"ref": "e1", "files": []any{map[string]any{"content_base64": b64}}}, "has content_base64 but no name"},
		{"bad base64", map[string]any{"ref": "e1", "files": []any{map[string]any{"name": "a", "content_base64": "%%%"}}}, "is not valid base64"},
		{"unknown field", map[string]any{"ref": "e1", "files": []any{map[string]any{"file": "/etc/passwd"}}}, `unknown argument "file"`},
		{"too big", map[string]any{"ref": "e1", "files": []any{map[string]any{"name": "a", "content_base64": big}}}, "more than 786432 bytes of content_base64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tool.Parse(tt.args); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%s) error = %v, want %q", tt.name, err, tt.want)
			}
		})
	}
}

// TestHideFileContents: the audit trail keeps upload_file's names and URLs,
// never the files' contents.
func TestHideFileContents(t *testing.T) {
	args := map[string]any{"ref": "e1", "files": []any{map[string]any{"name": "secret.txt", "content_base64": "c2VjcmV0"}}}
	b, _ := json.Marshal(HideSecrets(args, "[hidden]"))
	if got := string(b); strings.Contains(got, "c2VjcmV0") || !strings.Contains(got, "secret.txt") || !strings.Contains(got, "8 characters of base64, not recorded") {
		t.Errorf("HideSecrets = %s", got)
	}
	if !strings.Contains(args["files"].([]any)[0].(map[string]any)["content_base64"].(string), "c2VjcmV0") {
		t.Error("HideSecrets changed its argument")
	}
}

func TestParseHandleDialog(t *testing.T) {
	tool, _ := Lookup("handle_dialog")
	c, err := tool.Parse(map[string]any{"accept": true, "prompt_text": ""})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Request.GetHandleDialog(); !h.GetAccept() || h.PromptText == nil || h.GetPromptText() != "" {
		t.Errorf("Parse = %v", c.Request)
	}
	if _, err := tool.Parse(map[string]any{}); err == nil || !strings.Contains(err.Error(), `argument "accept" is required`) {
		t.Errorf("Parse without accept: %v", err)
	}
	open, _ := Lookup("open")
	c, err = open.Parse(map[string]any{"url": "https://x", "dialogs": "dismiss"})
	if err != nil || c.Request.GetDialogs() != browserv1.DialogMode_DIALOG_MODE_DISMISS {
		t.Errorf("open with dialogs dismiss = %v, %v", c.Request, err)
	}
}

func TestParseDrop(t *testing.T) {
	tool, _ := Lookup("drop")
	c, err := tool.Parse(map[string]any{"ref": "e1", "data": []any{map[string]any{"mime_type": "Text/URI-List", "value": "https://example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Request.GetDrop(); len(d.GetData()) != 1 || d.GetData()[0].GetMimeType() != "text/uri-list" {
		t.Errorf("Parse = %v", c.Request)
	}
	for _, tt := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"nothing", map[string]any{"ref": "e1"}, "drop needs files or data"},
		{"both", map[string]any{"ref": "e1", "files": []any{map[string]any{"url": "https://x/a.txt"}},
			"data": []any{map[string]any{"mime_type": "text/plain", "value": "x"}}}, "not both in one call"},
		{"bad type", map[string]any{"ref": "e1", "data": []any{map[string]any{"mime_type": "text", "value": "x"}}}, `"data[0].mime_type" must be a MIME type`},
		{"no element", map[string]any{"data": []any{map[string]any{"mime_type": "text/plain", "value": "x"}}}, "ref"},
	} {
		if _, err := tool.Parse(tt.args); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse error = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestHideHeaderValues(t *testing.T) {
	args := map[string]any{"headers": []any{Args{"name": "Authorization", "value": "Bearer SUPERSECRET123"}}}
	b, _ := json.Marshal(HideSecrets(args, "[hidden]"))
	if got := string(b); strings.Contains(got, "SUPERSECRET123") || !strings.Contains(got, "Authorization") {
		t.Errorf("HideSecrets = %s, want the header named and its value hidden", got)
	}
}
