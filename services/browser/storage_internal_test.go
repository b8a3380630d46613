package browser

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
)

// TestStorageSummaryBounded: a summary names at most maxSummaryNames
// cookie domains and origins, and says how many more there are.
func TestStorageSummaryBounded(t *testing.T) {
	t.Parallel()
	st := &savedStorage{Name: "many"}
	for i := range 25 {
		st.Cookies = append(st.Cookies, &network.Cookie{Name: "c", Value: "v", Domain: fmt.Sprintf(".d%02d.example", i)})
		st.Storage = append(st.Storage, originStorage{Origin: fmt.Sprintf("https://o%02d.example", i), Items: [][2]string{{"k", "v"}}})
	}
	line := summarize(st).Line()
	if !strings.Contains(line, "d19.example and 5 more; 25 local storage items") || strings.Contains(line, "d20.example") ||
		!strings.HasSuffix(line, "o19.example and 5 more") {
		t.Errorf("Line = %q, want 20 names of each and the rest counted", line)
	}
}
