package catalog

import (
	"encoding/base64"
	"fmt"
	"path"
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// Dialogs, files and downloads (issue 19). The worker does the work:
// internal/page/dialog.go and files.go.

// DialogModes are the values of open's and tab_new's dialogs argument and
// of the gateway's --dialogs flag.
var DialogModes = map[string]browserv1.DialogMode{
	"accept":  browserv1.DialogMode_DIALOG_MODE_ACCEPT,
	"dismiss": browserv1.DialogMode_DIALOG_MODE_DISMISS,
	"ask":     browserv1.DialogMode_DIALOG_MODE_ASK,
}

var dialogsParam = Param{
	Name: "dialogs", Type: String, Enum: []string{"ask", "accept", "dismiss"},
	Description: "How the browser session answers the pages' dialogs from now on: ask (the operator's default unless " +
		"set otherwise) accepts alerts and leaves confirm, prompt and beforeunload dialogs open, naming them in the " +
		"result, until handle_dialog answers; accept and dismiss answer every dialog at once.",
}

// withDialogs sets the request's dialog mode from the dialogs argument.
func withDialogs(build func(Args) (*browserv1.ToolRequest, error)) func(Args) (*browserv1.ToolRequest, error) {
	return func(a Args) (*browserv1.ToolRequest, error) {
		req, err := build(a)
		if err != nil {
			return nil, err
		}
		req.Dialogs = DialogModes[a.str("dialogs")]
		return req, nil
	}
}

var filesTools = []Tool{
	{
		Name: "handle_dialog", Title: "Answer dialog",
		Acts: Always, MayNavigate: Always, WithDialog: true, // accepting a beforeunload dialog leaves the page
		Secrets: Secrets{In: promptText},
		Description: "Answer the dialog (confirm, prompt or beforeunload) that is open in the active tab. In the " +
			"session's ask mode such a dialog stays open: the call that raised it says so, and tools that need the " +
			"page fail naming it until it is answered. Accepting a beforeunload dialog leaves the page.",
		params: []Param{
			{Name: "accept", Type: Boolean, Required: true, Description: "true to accept (OK, leave the page), false to dismiss (Cancel, stay)"},
			{Name: "prompt_text", Type: String, Description: "The text a prompt dialog returns when accepted (default: the prompt's own default text)"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			h := &browserv1.HandleDialog{Accept: a.boolean("accept")}
			if v, ok := a["prompt_text"].(string); ok {
				h.PromptText = &v
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HandleDialog{HandleDialog: h}}, nil
		},
	},
	{

		Name: "upload_file", Title: "Upload file",
		Acts: Always, Level: OnSession,
		Description: "Set the files of a file input (in a snapshot: button \"Choose file: …\"), named by ref (or " +
			"target) or CSS selector, as a person picking files does: the page gets its change event. Each file is " +
			"given by content (content_base64 and name), by url (fetched by the browser worker under the session's " +
			"URL policy) or by path (a file in the gateway's workspace, where its system tools are on). A click that opens a file chooser says which input to call this on. Limits: the browser " +
			"worker's (by default 10 files, 10 MiB per file, 25 MiB per call), and at most 768 KiB of content_base64 " +
			"per call (give bigger files by url).",
		params: append(elementParams(""), Param{Name: FilesParam, Type: Array, Required: true, Items: fileItemParam,
			Description: "The files, in order: each {name, content_base64}, {url} or {path} (name optional with url and path)"}),
		build: buildUpload,
	},
	{
		Name: "drop", Title: "Drop files or data",
		Acts: Always, MayNavigate: Always, Level: OnSession,
		Description: "Drop files, or data (text, a URL, HTML), onto an element, named by ref (or target) or CSS " +
			"selector, as if a person dragged them there from outside the page: for drop zones that take no file " +
			"input (for one, use upload_file). The page gets dragenter, dragover and drop events with them; the " +
			"files are given as for upload_file, within its limits.",
		params: append(elementParams(""),
			Param{Name: FilesParam, Type: Array, Items: fileItemParam, MaxItems: 10,
				Description: "Files to drop: each {name, content_base64}, {url} or {path}, as upload_file's"},
			Param{Name: "data", Type: Array, MaxItems: MaxDropItems, Items: &Param{Type: Object, Fields: []Param{
				{Name: "mime_type", Type: String, Required: true, Description: "MIME type, e.g. text/plain, text/uri-list or text/html"},
				{Name: "value", Type: String, Required: true, Description: "The data"},
			}}, Description: "Data to drop, each {mime_type, value}"}),
		build: buildDrop,
	},
	{
		Name: "download_list", Title: "List downloads", ReadOnly: true,
		Level: OnSession,
		Description: "List the files this browser session downloaded (by a click, a script or open of a file's URL), " +
			"each with its id (d1, d2, …), name, state, size and URL. The result of the action that began a download " +
			"already names it.",
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_DownloadList{DownloadList: n}
		}),
	},
	{
		Name: "download_get", Title: "Get download", ReadOnly: true,
		MaxChars: TextChars, Level: OnSession,
		Description: "Return a file this browser session downloaded: a text file (text, JSON, XML, CSV) as text, " +
			"cut at max_chars; any other file as an embedded resource with its bytes. Downloads are kept for a while " +
			"(an hour by default) and are at most 20 MiB by default (the browser workers' limits).",
		params: []Param{{Name: "id", Type: String, Required: true, Description: "The download's id from the change report or download_list, e.g. d1"}},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			id, err := nonEmpty(a, "id")
			if err != nil {
				return nil, err
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadGet{DownloadGet: &browserv1.DownloadGet{Id: strings.TrimSpace(id)}}}, nil
		},
	},
}

// FilesParam is upload_file's argument that lists the files.
const FilesParam = "files"

// MaxInlineUpload is the most bytes of file content one upload_file call
// carries in its arguments: the request to the worker crosses NATS, whose
// messages are 1 MiB at most. Larger files go by url.
const MaxInlineUpload = 768 << 10

// fileItemParam is the schema of one member of upload_file's files.
var fileItemParam = &Param{Type: Object, Fields: []Param{
	{Name: "name", Type: String, Description: "File name the page sees, e.g. report.pdf (with url, default: the URL's last path segment)"},
	{Name: "content_base64", Type: String, Description: "The file's bytes, base64-encoded"},
	{Name: "url", Type: String, Description: "http(s) URL the browser worker fetches the file from, under the session's URL policy"},
	{Name: "path", Type: String, Description: "A file in the gateway's workspace (only where the gateway's system tools are on)"},
}}

// buildUpload builds upload_file's request.
func buildUpload(a Args) (*browserv1.ToolRequest, error) {
	el, err := requireElement(a)
	if err != nil {
		return nil, err
	}
	files, err := fileItems(a)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, argErr(FilesParam, "must list at least one file")
	}
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_UploadFile{UploadFile: &browserv1.UploadFile{Element: el, Files: files}}}, nil
}

// fileItems reads the files argument (absent: none), within
// MaxInlineUpload bytes of content.
func fileItems(a Args) ([]*browserv1.UploadFileItem, error) {
	list, _ := a[FilesParam].([]any)
	var out []*browserv1.UploadFileItem
	total := 0
	for i, raw := range list {
		item, err := fileItem(i, raw)
		if err != nil {
			return nil, err
		}
		if total += len(item.Content); total > MaxInlineUpload {
			return nil, argErr(FilesParam, "carry more than %d bytes of content_base64 (decoded) in one call, the limit of a call's arguments; give big files by url", MaxInlineUpload)
		}
		out = append(out, item)
	}
	return out, nil
}

// MaxDropData bounds drop's data: how many items, and the characters of
// them all.
const (
	MaxDropItems = 20
	MaxDropChars = 256 << 10
)

// buildDrop builds drop's request.
func buildDrop(a Args) (*browserv1.ToolRequest, error) {
	el, err := requireElement(a)
	if err != nil {
		return nil, err
	}
	files, err := fileItems(a)
	if err != nil {
		return nil, err
	}
	d := &browserv1.Drop{Element: el, Files: files}
	list, _ := a["data"].([]any)
	chars := 0
	for i, raw := range list {
		m, _ := raw.(Args)
		mt, _ := m["mime_type"].(string)
		v, _ := m["value"].(string)
		if mt = strings.ToLower(strings.TrimSpace(mt)); !strings.Contains(mt, "/") {
			return nil, argErr(fmt.Sprintf("data[%d].mime_type", i), "must be a MIME type such as text/plain or text/uri-list, got %q", mt)
		}
		if chars += len(v); chars > MaxDropChars {
			return nil, argErr("data", "holds more than %d characters in all", MaxDropChars)
		}
		d.Data = append(d.Data, &browserv1.DropItem{MimeType: mt, Value: v})
	}
	switch {
	case len(d.Files) == 0 && len(d.Data) == 0:
		return nil, &ArgError{Msg: "drop needs files or data"}
	case len(d.Files) > 0 && len(d.Data) > 0:
		// A drag of files from outside the page carries only the files in
		// Chromium: the data would be lost without a word.
		return nil, &ArgError{Msg: "drop carries files or data, not both in one call (Chromium drops only the files of such a drag): make two calls"}
	}
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Drop{Drop: d}}, nil
}

// fileItem reads member i of files.
func fileItem(i int, raw any) (*browserv1.UploadFileItem, error) {
	var m map[string]any
	switch v := raw.(type) {
	case map[string]any:
		m = v
	case Args: // an object member already checked against its fields
		m = v
	default:
		return nil, argErr(FilesParam, "member %d must be an object {name, content_base64}, {url} or {path}, got %s", i, JSONType(raw))
	}
	str := func(k string) (string, error) {
		switch v := m[k].(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		default:
			return "", argErr(FilesParam, "member %d: %s must be a string, got %s", i, k, JSONType(v))
		}
	}
	for k := range m {
		if k != "name" && k != "content_base64" && k != "url" && k != "path" {
			return nil, argErr(FilesParam, "member %d: unknown field %q; a file is {name, content_base64}, {url} or {path}", i, k)
		}
	}
	name, err := str("name")
	if err != nil {
		return nil, err
	}
	b64, err := str("content_base64")
	if err != nil {
		return nil, err
	}
	u, err := str("url")
	if err != nil {
		return nil, err
	}
	p, err := str("path")
	if err != nil {
		return nil, err
	}
	_, hasContent := m["content_base64"]
	given := 0
	for _, has := range []bool{hasContent, u != "", p != ""} {
		if has {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, argErr(FilesParam, "member %d gives more than one of content_base64, url and path: give one", i)
	case u != "":
		return &browserv1.UploadFileItem{Name: name, Url: strings.TrimSpace(u)}, nil
	case p != "":
		if name == "" {
			name = path.Base(strings.ReplaceAll(p, "\\", "/"))
		}
		return &browserv1.UploadFileItem{Name: name, Path: p}, nil
	case !hasContent:
		return nil, argErr(FilesParam, "member %d has none of content_base64, url and path", i)
	case strings.TrimSpace(name) == "":
		return nil, argErr(FilesParam, "member %d has content_base64 but no name", i)
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, argErr(FilesParam, "member %d: content_base64 is not valid base64 (standard alphabet, with padding): %v", i, err)
	}
	return &browserv1.UploadFileItem{Name: name, Content: data}, nil
}

// summarizeFiles returns upload_file's files for the audit trail: names and
// URLs stay, content_base64 becomes its size.
func summarizeFiles(v any) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, len(list))
	for i, raw := range list {
		m, ok := raw.(map[string]any)
		if !ok {
			out[i] = raw
			continue
		}
		c := make(map[string]any, len(m))
		for k, v := range m {
			c[k] = v
		}
		if s, ok := m["content_base64"].(string); ok {
			c["content_base64"] = fmt.Sprintf("[%d characters of base64, not recorded]", len(s))
		}
		out[i] = c
	}
	return out
}
