package secrets

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchCache holds 100 secrets of 8 to 40 bytes.
func benchCache(b *testing.B) (*Cache, []string) {
	vals := make(map[string]string, 100)
	var list []string
	for i := range 100 {
		v := fmt.Sprintf("s3cr3t-%03d-%s", i, strings.Repeat("xY+/", i%9))
		vals[fmt.Sprintf("SECRET_%03d", i)] = v
		list = append(list, v)
	}
	_, c := cacheWith(b, vals)
	return c, list
}

// snapshot1MB is about 1 MB of accessibility snapshot with a few secrets
// in it.
func snapshot1MB(secrets []string) string {
	const chunk = "- textbox \"Email\" [ref=e5]: ada@example.com\n- button \"Sign in\" [ref=e6]\n- link \"Forgot password?\" [ref=e7]:\n  - /url: /reset?next=%2Fhome&lang=en\n- paragraph: Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n"
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		sb.WriteString(chunk)
		if i%500 == 0 {
			sb.WriteString("- textbox \"Password\" [ref=e9]: " + secrets[i%len(secrets)] + "\n")
		}
	}
	return sb.String()
}

func BenchmarkScrub(b *testing.B) {
	c, list := benchCache(b)
	text := snapshot1MB(list)
	if out := c.Scrub(text); strings.Contains(out, list[0]) || !strings.Contains(out, "{{secrets.SECRET_000}}") {
		b.Fatal("Scrub missed a secret")
	}
	clean := strings.ReplaceAll(text, "s3cr3t", "public")
	b.Run("1MB_100secrets", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			c.Scrub(text)
		}
	})
	b.Run("1MB_100secrets_none_present", func(b *testing.B) {
		b.SetBytes(int64(len(clean)))
		b.ReportAllocs()
		for b.Loop() {
			c.Scrub(clean)
		}
	})
	doc, _ := json.Marshal(map[string]string{"snapshot": text})
	b.Run("JSON_1MB_100secrets", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			c.ScrubJSON(doc)
		}
	})
}

func BenchmarkSubstitute(b *testing.B) {
	c, _ := benchCache(b)
	args := `{"ref":"e9","text":"{{secrets.SECRET_042}}","submit":true}`
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.Substitute(args); err != nil {
			b.Fatal(err)
		}
	}
}
