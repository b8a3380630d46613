package gateway

import (
	"encoding/base64"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// TestRenderResource: a file part of a worker's result (a PDF) becomes an
// MCP embedded resource with its MIME type and base64 bytes, and the bus
// and the audit trail name it by type and size.
func TestRenderResource(t *testing.T) {
	t.Parallel()
	pdf := []byte("%PDF-1.7 fake")
	r := render(&browserv1.ToolResult{Content: []*browserv1.Content{
		{Part: &browserv1.Content_Text{Text: "PDF of x"}},
		{Part: &browserv1.Content_Resource{Resource: &browserv1.Resource{Name: "page.pdf", MimeType: "application/pdf", Data: pdf}}},
	}})
	out := mcpResult(r)
	if len(out.Content) != 2 {
		t.Fatalf("content = %+v, want a text and a resource", out.Content)
	}
	res, ok := out.Content[1].(mcp.EmbeddedResource)
	if !ok {
		t.Fatalf("content[1] = %T, want mcp.EmbeddedResource", out.Content[1])
	}
	blob, ok := res.Resource.(mcp.BlobResourceContents)
	if !ok || blob.MIMEType != "application/pdf" || blob.URI != "sovereign://result/page.pdf" || blob.Blob != base64.StdEncoding.EncodeToString(pdf) {
		t.Errorf("resource = %+v", res.Resource)
	}
	if b := busResponse(r); b.GetContent()[1].GetType() != "resource" || string(b.GetContent()[1].GetData()) != string(pdf) {
		t.Errorf("bus content = %v, want a resource part", b.GetContent())
	}
	if got := r.TextContent(); got != "PDF of x" {
		t.Errorf("TextContent = %q, want the text only", got)
	}
}
