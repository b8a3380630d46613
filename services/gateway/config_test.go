package gateway_test

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/gateway"
)

func TestRegisterFlags(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(*gateway.Config) bool
		wantErr string // from the environment
	}{
		{name: "defaults", check: func(c *gateway.Config) bool {
			// No extra hosts or origins: the loopback names are always in.
			return c.Listen == "127.0.0.1:8080" && c.ToolTimeout == 60*time.Second &&
				len(c.AllowedHosts) == 0 && len(c.AllowedOrigins) == 0 &&
				!c.InsecureNoAuth && !c.RequireAuth && c.OAuthIssuer == "" && c.PublicURL == ""
		}},
		{name: "env", env: map[string]string{
			"SOVEREIGN_LISTEN": "0.0.0.0:9000", "SOVEREIGN_TOOL_TIMEOUT": "5s",
			"SOVEREIGN_ALLOWED_HOSTS": "a.example, b.example", "SOVEREIGN_ALLOWED_ORIGINS": "https://app.example",
		}, check: func(c *gateway.Config) bool {
			return c.Listen == "0.0.0.0:9000" && c.ToolTimeout == 5*time.Second &&
				slices.Equal(c.AllowedHosts, []string{"a.example", "b.example"}) && slices.Equal(c.AllowedOrigins, []string{"https://app.example"})
		}},
		{name: "flags win over env", env: map[string]string{"SOVEREIGN_LISTEN": "0.0.0.0:9000", "SOVEREIGN_ALLOWED_HOSTS": "a.example"},
			args: []string{"--listen", "127.0.0.1:1234", "--allowed-hosts", "x.example,y.example", "--tool-timeout", "2m"},
			check: func(c *gateway.Config) bool {
				return c.Listen == "127.0.0.1:1234" && c.ToolTimeout == 2*time.Minute && slices.Equal(c.AllowedHosts, []string{"x.example", "y.example"})
			}},
		{name: "bad env duration", env: map[string]string{"SOVEREIGN_TOOL_TIMEOUT": "soon"}, wantErr: `SOVEREIGN_TOOL_TIMEOUT="soon" is not a duration`},
		{name: "auth env", env: map[string]string{
			"SOVEREIGN_REQUIRE_AUTH": "true", "SOVEREIGN_PUBLIC_URL": "https://mcp.example.com",
			"SOVEREIGN_OAUTH_ISSUER": "https://auth.example.com", "SOVEREIGN_OAUTH_AUDIENCE": "sovereign", "SOVEREIGN_OAUTH_JWKS_URL": "https://auth.example.com/keys",
		}, check: func(c *gateway.Config) bool {
			return c.RequireAuth && !c.InsecureNoAuth && c.PublicURL == "https://mcp.example.com" && c.OAuthIssuer == "https://auth.example.com" &&
				c.OAuthAudience == "sovereign" && c.OAuthJWKSURL == "https://auth.example.com/keys"
		}},
		{name: "auth flags", env: map[string]string{"SOVEREIGN_REQUIRE_AUTH": "true"}, args: []string{"--require-auth=false", "--insecure-no-auth"},
			check: func(c *gateway.Config) bool { return !c.RequireAuth && c.InsecureNoAuth }},
		{name: "bad env bool", env: map[string]string{"SOVEREIGN_INSECURE_NO_AUTH": "yes please"}, wantErr: `SOVEREIGN_INSECURE_NO_AUTH="yes please" is not true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			var errs []error
			cfg := gateway.RegisterFlags(fs, &errs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.wantErr) {
					t.Fatalf("errs = %v, want one containing %q", errs, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("errs = %v", errs)
			}
			if !tt.check(cfg) {
				t.Errorf("RegisterFlags(%v, env %v) = %+v", tt.args, tt.env, *cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := gateway.Config{
		Listen: "127.0.0.1:8080", ToolTimeout: time.Minute, SessionTTL: time.Hour, MaxBody: 1 << 20,
		AllowedHosts: gateway.DefaultAllowed, AllowedOrigins: gateway.DefaultAllowed, Bucket: "sov_sessions",
	}
	tests := []struct {
		name   string
		modify func(*gateway.Config)
		want   []string // one error line each
	}{
		{"good", func(*gateway.Config) {}, nil},
		{"wildcards", func(c *gateway.Config) {
			c.AllowedHosts, c.AllowedOrigins = []string{"*"}, []string{"*.example.com", "http://localhost:3000"}
		}, nil},
		{"listen without port", func(c *gateway.Config) { c.Listen = "127.0.0.1" }, []string{`--listen: "127.0.0.1" is not host:port`}},
		{"listen bad port", func(c *gateway.Config) { c.Listen = "127.0.0.1:http" }, []string{`--listen: port "http"`}},
		{"timeout", func(c *gateway.Config) { c.ToolTimeout = -time.Second }, []string{"--tool-timeout: -1s must be more than 0"}},
		{"ttl", func(c *gateway.Config) { c.SessionTTL = time.Second }, []string{"--session-ttl: 1s must be at least 1m"}},
		{"body", func(c *gateway.Config) { c.MaxBody = 10 }, []string{"--max-body: 10 bytes is too small"}},
		{"host", func(c *gateway.Config) { c.AllowedHosts = []string{"exa mple"} }, []string{`--allowed-hosts: "exa mple" is not a host`}},
		{"host port", func(c *gateway.Config) { c.AllowedHosts = []string{"localhost:99999"} }, []string{`--allowed-hosts: "localhost:99999": port "99999"`}},
		{"no extra hosts or origins", func(c *gateway.Config) { c.AllowedHosts, c.AllowedOrigins = nil, []string{} }, nil},
		{"origin with path", func(c *gateway.Config) { c.AllowedOrigins = []string{"https://app.example/x"} }, []string{`--allowed-origins: "https://app.example/x" is not an origin`}},
		{"bucket", func(c *gateway.Config) { c.Bucket = "a.b" }, []string{`--kv-bucket: "a.b"`}},
		{"several at once", func(c *gateway.Config) { c.Listen, c.ToolTimeout = "nope", 0 }, []string{"--listen:", "--tool-timeout:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.modify(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %v", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("Validate() = %q, want %d errors", err, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("error %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}
