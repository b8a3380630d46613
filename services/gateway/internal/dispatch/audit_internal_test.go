package dispatch

import "testing"

// TestAuditTextFile: the trail names a file part by name, type and size,
// never its bytes.
func TestAuditTextFile(t *testing.T) {
	t.Parallel()
	r := &Result{Parts: []Part{{Text: "PDF of x"}, {Data: []byte("%PDF-secret"), MIME: "application/pdf", Name: "page.pdf"}}}
	if got, want := auditText(r), "PDF of x\n[file page.pdf application/pdf, 11 bytes]"; got != want {
		t.Errorf("auditText = %q, want %q", got, want)
	}
}
