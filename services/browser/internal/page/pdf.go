package page

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// DefaultMaxPDFBytes caps a PDF when Options.MaxPDFBytes is 0: the whole
// file goes back in one result, over the bus and to the model's client.
const DefaultMaxPDFBytes = 10 << 20

// paper is a paper size in inches.
type paper struct {
	name          string
	width, height float64
}

var papers = []paper{
	{"Letter", 8.5, 11}, {"Legal", 8.5, 14}, {"Tabloid", 11, 17},
	{"A3", 11.69, 16.54}, {"A4", 8.27, 11.69}, {"A5", 5.83, 8.27},
}

// PaperFormats lists the paper formats pdf takes.
func PaperFormats() []string {
	out := make([]string, len(papers))
	for i, p := range papers {
		out[i] = p.name
	}
	return out
}

var pageRangesPattern = regexp.MustCompile(`^\s*\d+\s*(-\s*\d*\s*)?(,\s*\d+\s*(-\s*\d*\s*)?)*$`)

// pdf is the pdf tool: the page printed, as an embedded PDF resource.
func (t *Tab) pdf(ctx context.Context, req *browserv1.Pdf) (*browserv1.ToolResult, error) {
	format := strings.TrimSpace(req.GetFormat())
	if format == "" {
		format = "Letter"
	}
	var size *paper
	for i := range papers {
		if strings.EqualFold(papers[i].name, format) {
			size = &papers[i]
		}
	}
	if size == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "paper format %q is not one of %s", clipTo(format, 50), strings.Join(PaperFormats(), ", "))
	}
	ranges := strings.TrimSpace(req.GetPageRanges())
	if ranges != "" && !pageRangesPattern.MatchString(ranges) {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "page_ranges %q is not a list of pages and ranges such as \"1-3, 5\"", clipTo(ranges, 100))
	}
	out, err := chromedp.Call(ctx, page.PrintToPDF, page.PrintToPDFParams{
		Landscape: new(req.GetLandscape()), PrintBackground: new(req.GetPrintBackground()),
		PaperWidth: size.width, PaperHeight: size.height, PageRanges: ranges,
	})
	if err != nil {
		if ranges != "" && strings.Contains(strings.ToLower(err.Error()), "range") {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "page_ranges %q does not fit the document: %s", ranges, clipText(err.Error()))
		}
		return nil, fmt.Errorf("print to pdf: %w", err)
	}
	data := out.Data
	if max := t.opts.maxPDFBytes(); len(data) > max {
		return nil, bus.Errorf(commonv1.ErrorCode_TOO_LARGE,
			"the PDF is %d bytes, more than the limit of %d (the worker's --max-pdf-mb): print fewer pages with page_ranges", len(data), max)
	}
	orientation := "portrait"
	if req.GetLandscape() {
		orientation = "landscape"
	}
	u, _ := t.currentURL(ctx)
	res := textResult("PDF of %s: %d bytes, %s %s, attached as page.pdf", clipTo(u, maxURL), len(data), size.name, orientation)
	res.Content = append(res.Content, &browserv1.Content{Part: &browserv1.Content_Resource{Resource: &browserv1.Resource{
		Name: "page.pdf", MimeType: "application/pdf", Data: data}}})
	SetStructured(res, "pdf", map[string]any{"bytes": len(data), "format": size.name, "landscape": req.GetLandscape()})
	return res, nil
}
