package browser

import "testing"

func TestPlaceholderOutsideHost(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://example.com/login?pw={{secrets.PW}}":    true,
		"https://ada:{{secrets.PW}}@example.com/":        true,
		"https://example.com/{{secrets.PATH}}#x":         true,
		"example.com/?q={{ secrets.Q }}":                 true,
		"https://{{secrets.HOST}}.example.com/":          false,
		"https://example.com:{{secrets.PORT}}/":          false,
		"https://a@{{secrets.HOST}}/":                    false,
		"{{secrets.SCHEME}}://example.com/":              false,
		"{{secrets.HOST}}/path":                          false,
		"https://example.com@{{secrets.HOST}}/?x=1":      false,
		"https://example.com/a@{{secrets.NOT_HOST}}/":    true,
		"https://example.com?next=//{{secrets.PW}}.evil": true,
	} {
		if err := placeholderOutsideHost(raw); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", raw, err, ok)
		}
	}
}
