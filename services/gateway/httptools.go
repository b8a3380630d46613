package gateway

import (
	"flag"
	"os"

	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Custom HTTP tools (--http-tools; internal/extend serves them): their
// settings.

// registerHTTPToolsFlags adds --http-tools.
func registerHTTPToolsFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.HTTPToolsFile, "http-tools", config.Env("SOVEREIGN_HTTP_TOOLS", ""),
		"JSON file of custom HTTP tools ({\"tools\":[{name, description, endpoint, method, parameters, headers}]}; "+
			"headers and the endpoint may use {{secrets.NAME}}); see docs/extending.md [SOVEREIGN_HTTP_TOOLS]")
}

// validateHTTPTools checks that the tools file can be read (its content is
// checked when the gateway loads it).
func (c Config) validateHTTPTools(bad func(flag, format string, a ...any)) {
	if c.HTTPToolsFile == "" {
		return
	}
	if st, err := os.Stat(c.HTTPToolsFile); err != nil {
		bad("http-tools", "%v", err)
	} else if st.IsDir() {
		bad("http-tools", "%s is a directory, not a tools file", c.HTTPToolsFile)
	}
}
