package page

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Emulation is how a session's tabs present themselves (resize and
// emulate). The session keeps one and applies it whole to each of its
// tabs, those it opens later included; the zero value emulates nothing.
type Emulation struct {
	Device string `json:"device,omitempty"`
	// Width and Height are the viewport in CSS pixels (0: the window's);
	// Scale the device pixel ratio (0: the screen's).
	Width  int     `json:"width,omitempty"`
	Height int     `json:"height,omitempty"`
	Scale  float64 `json:"device_scale_factor,omitempty"`
	Mobile bool    `json:"mobile,omitempty"`
	Touch  bool    `json:"touch,omitempty"`

	UserAgent     string       `json:"user_agent,omitempty"`
	Locale        string       `json:"locale,omitempty"`
	Timezone      string       `json:"timezone,omitempty"`
	Geolocation   *Geolocation `json:"geolocation,omitempty"`
	ColorScheme   string       `json:"color_scheme,omitempty"`
	ReducedMotion string       `json:"reduced_motion,omitempty"`
	// Media is the CSS media type (screen, print); ForcedColors and
	// Contrast the forced-colors and prefers-contrast media features.
	Media        string `json:"media,omitempty"`
	ForcedColors string `json:"forced_colors,omitempty"`
	Contrast     string `json:"contrast,omitempty"`
	Offline      bool   `json:"offline,omitempty"`
	// Network is a throttling preset (networkPresets); CPU the CPU
	// slowdown factor (0 or 1: none).
	Network string  `json:"network,omitempty"`
	CPU     float64 `json:"cpu_throttling,omitempty"`
	// Headers are the extra HTTP headers of every request, as
	// "Name: value" lines sorted by name (a string keeps Emulation
	// comparable). Summaries name them, never show their values.
	Headers string `json:"headers,omitempty"`
}

// Limits of emulate's headers.
const (
	MaxHeaders     = 20
	maxHeaderValue = 4096
)

// headerName matches an HTTP header name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")

// headerLines checks headers and returns them as Emulation.Headers.
func headerLines(hs []*browserv1.Header) (string, error) {
	if len(hs) > MaxHeaders {
		return "", badArg("headers lists %d headers; at most %d", len(hs), MaxHeaders)
	}
	lines := make([]string, 0, len(hs))
	seen := map[string]bool{}
	for _, h := range hs {
		name, value := strings.TrimSpace(h.GetName()), h.GetValue()
		switch low := strings.ToLower(name); {
		case !headerName.MatchString(name):
			return "", badArg("%q is not an HTTP header name (letters, digits and !#$%%&'*+.^_`|~-)", clipTo(name, 100))
		case strings.ContainsAny(value, "\r\n\x00") || len(value) > maxHeaderValue:
			return "", badArg("the value of header %s must be one line of at most %d characters", name, maxHeaderValue)
		case strings.Contains(value, "{{"):
			return "", badArg("the value of header %s holds a placeholder; emulate takes no {{secrets.NAME}} (the value is kept with the session)", name)
		case low == "host" || low == "cookie" || low == "content-length":
			return "", badArg("header %s is set by the browser; emulate cannot set it (use storage for cookies)", name)
		case seen[low]:
			return "", badArg("header %s is listed twice", name)
		default:
			seen[low] = true
			lines = append(lines, name+": "+value)
		}
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	return strings.Join(lines, "\n"), nil
}

// headerMap returns Emulation.Headers for Network.setExtraHTTPHeaders.
func headerMap(lines string) network.Headers {
	m := network.Headers{}
	for l := range strings.SplitSeq(lines, "\n") {
		if name, value, ok := strings.Cut(l, ": "); ok {
			m[name] = value
		}
	}
	return m
}

// netPreset is a network throttling preset: added latency and throughput
// in bytes per second, close to Chrome DevTools' presets of the same
// names.
type netPreset struct {
	latency          float64 // ms
	download, upload float64
}

// networkPresets are the network throttling presets emulate knows.
var networkPresets = map[string]netPreset{
	"slow-3g": {2000, 50_000, 50_000},
	"fast-3g": {562.5, 180_000, 84_375},
	"slow-4g": {150, 450_000, 337_500},
	"fast-4g": {40, 1_012_500, 1_012_500},
}

// NetworkPresets lists the names of the network presets, for the catalog.
func NetworkPresets() []string { return []string{"slow-3g", "fast-3g", "slow-4g", "fast-4g", "none"} }

// MaxCPUThrottling bounds emulate's cpu_throttling.
const MaxCPUThrottling = 20

// Geolocation is an emulated position.
type Geolocation struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
	Accuracy  float64 `json:"accuracy"`
}

// Viewport bounds of resize (CSS pixels).
const (
	MinViewport = 100
	MaxViewport = 8192
)

// device is one entry of the device table.
type device struct {
	name          string
	width, height int
	scale         float64
	mobile, touch bool
	ua            string
}

const (
	uaIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
	uaIPad    = "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
	uaAndroid = "Mozilla/5.0 (Linux; Android 14; %s) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"
	uaTablet  = "Mozilla/5.0 (Linux; Android 14; %s) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	uaDesktop = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
)

// devices are the phones, tablets and desktops emulate knows.
var devices = []device{
	{"iPhone SE", 375, 667, 2, true, true, uaIPhone},
	{"iPhone 13", 390, 844, 3, true, true, uaIPhone},
	{"iPhone 15 Pro", 393, 852, 3, true, true, uaIPhone},
	{"iPhone 15 Pro Max", 430, 932, 3, true, true, uaIPhone},
	{"Pixel 7", 412, 915, 2.625, true, true, fmt.Sprintf(uaAndroid, "Pixel 7")},
	{"Galaxy S23", 360, 780, 3, true, true, fmt.Sprintf(uaAndroid, "SM-S911B")},
	{"iPad Mini", 768, 1024, 2, true, true, uaIPad},
	{"iPad Pro 11", 834, 1194, 2, true, true, uaIPad},
	{"Galaxy Tab S9", 800, 1280, 2, true, true, fmt.Sprintf(uaTablet, "SM-X710")},
	{"Desktop 1080p", 1920, 1080, 1, false, false, uaDesktop},
	{"Laptop", 1366, 768, 1, false, false, uaDesktop},
}

// DeviceNames lists the devices emulate knows, for the catalog and errors.
func DeviceNames() []string {
	names := make([]string, len(devices))
	for i, d := range devices {
		names[i] = d.name
	}
	return names
}

var localePattern = regexp.MustCompile(`^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$`)

func badArg(format string, a ...any) error {
	return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, format, a...)
}

// WithSize returns e with its viewport set to width×height, checked
// against MinViewport and MaxViewport.
func (e Emulation) WithSize(width, height int32) (Emulation, error) {
	for _, d := range []struct {
		name string
		v    int32
	}{{"width", width}, {"height", height}} {
		if d.v < MinViewport || d.v > MaxViewport {
			return e, badArg("resize: %s must be %d-%d CSS pixels, not %d", d.name, MinViewport, MaxViewport, d.v)
		}
	}
	e.Width, e.Height = int(width), int(height)
	return e, nil
}

// Merge returns e changed as req asks: the fields req sets replace e's
// (a device sets the viewport, pixel ratio, mobile, touch and user agent
// at once), reset starts from nothing. Bad values are INVALID_ARGUMENT
// errors that say what is accepted.
func (e Emulation) Merge(req *browserv1.Emulate) (Emulation, error) {
	if req.GetResetAll() {
		e = Emulation{}
	}
	if name := strings.TrimSpace(req.GetDevice()); name != "" {
		i := slices.IndexFunc(devices, func(d device) bool { return strings.EqualFold(d.name, name) })
		if i < 0 {
			return e, badArg("unknown device %q; the devices are: %s", clipTo(name, 100), strings.Join(DeviceNames(), ", "))
		}
		d := devices[i]
		e.Device, e.Width, e.Height, e.Scale, e.Mobile, e.Touch, e.UserAgent = d.name, d.width, d.height, d.scale, d.mobile, d.touch, d.ua
	}
	if ua := strings.TrimSpace(req.GetUserAgent()); ua != "" {
		if len(ua) > 1000 || strings.ContainsAny(ua, "\r\n") {
			return e, badArg("user_agent must be one line of at most 1000 characters")
		}
		e.UserAgent = ua
	}
	if l := strings.TrimSpace(req.GetLocale()); l != "" {
		if !localePattern.MatchString(l) {
			return e, badArg("locale %q is not a BCP 47 language tag such as en-US, de-DE or pt-BR", clipTo(l, 100))
		}
		e.Locale = l
	}
	if tz := strings.TrimSpace(req.GetTimezone()); tz != "" {
		if len(tz) > 100 || strings.ContainsAny(tz, " \r\n") {
			return e, badArg("timezone %q is not an IANA time zone such as Europe/Berlin or America/New_York", clipTo(tz, 100))
		}
		e.Timezone = tz
	}
	if g := req.GetGeolocation(); g != nil {
		switch {
		case g.GetLatitude() < -90 || g.GetLatitude() > 90:
			return e, badArg("geolocation latitude must be -90 to 90, not %g", g.GetLatitude())
		case g.GetLongitude() < -180 || g.GetLongitude() > 180:
			return e, badArg("geolocation longitude must be -180 to 180, not %g", g.GetLongitude())
		case g.GetAccuracy() < 0:
			return e, badArg("geolocation accuracy must be 0 or more metres, not %g", g.GetAccuracy())
		}
		acc := g.GetAccuracy()
		if acc == 0 {
			acc = 100
		}
		e.Geolocation = &Geolocation{Latitude: g.GetLatitude(), Longitude: g.GetLongitude(), Accuracy: acc}
	}
	if c := strings.ToLower(strings.TrimSpace(req.GetColorScheme())); c != "" {
		if c != "light" && c != "dark" && c != "no-preference" {
			return e, badArg("color_scheme must be light, dark or no-preference, not %q", clipTo(c, 100))
		}
		e.ColorScheme = c
	}
	if m := strings.ToLower(strings.TrimSpace(req.GetReducedMotion())); m != "" {
		if m != "reduce" && m != "no-preference" {
			return e, badArg("reduced_motion must be reduce or no-preference, not %q", clipTo(m, 100))
		}
		e.ReducedMotion = m
	}
	for _, f := range []struct {
		name, value string
		allowed     []string
		dst         *string
	}{
		{"media", req.GetMedia(), []string{"screen", "print"}, &e.Media},
		{"forced_colors", req.GetForcedColors(), []string{"active", "none"}, &e.ForcedColors},
		{"contrast", req.GetContrast(), []string{"more", "less", "no-preference"}, &e.Contrast},
	} {
		v := strings.ToLower(strings.TrimSpace(f.value))
		if v == "" {
			continue
		}
		if !slices.Contains(f.allowed, v) {
			last := len(f.allowed) - 1
			return e, badArg("%s must be %s or %s, not %q", f.name, strings.Join(f.allowed[:last], ", "), f.allowed[last], clipTo(v, 100))
		}
		*f.dst = v
	}
	if req.Offline != nil {
		e.Offline = req.GetOffline()
	}
	if n := strings.ToLower(strings.TrimSpace(req.GetNetwork())); n != "" {
		if _, ok := networkPresets[n]; !ok && n != "none" {
			return e, badArg("network must be one of %s, not %q", strings.Join(NetworkPresets(), ", "), clipTo(n, 100))
		}
		e.Network = n
		if n == "none" {
			e.Network = ""
		}
	}
	if req.GetSetHeaders() {
		h, err := headerLines(req.GetHeaders())
		if err != nil {
			return e, err
		}
		e.Headers = h
	}
	if c := req.GetCpuThrottling(); c != 0 {
		if c < 1 || c > MaxCPUThrottling {
			return e, badArg("cpu_throttling must be 1 (none) to %d, not %g", MaxCPUThrottling, c)
		}
		e.CPU = c
		if c == 1 {
			e.CPU = 0
		}
	}
	return e, nil
}

// Shown is e as results may show it: the extra headers' values hidden
// (they are often credentials; the sealed checkpoint keeps them).
func (e Emulation) Shown() Emulation {
	if e.Headers == "" {
		return e
	}
	var lines []string
	for l := range strings.SplitSeq(e.Headers, "\n") {
		name, _, _ := strings.Cut(l, ": ")
		lines = append(lines, name+": (hidden)")
	}
	e.Headers = strings.Join(lines, "\n")
	return e
}

// IsZero reports whether e emulates nothing.
func (e Emulation) IsZero() bool { return e == Emulation{} }

// Summary says in one line what e emulates.
func (e Emulation) Summary() string {
	var parts []string
	if e.Device != "" {
		parts = append(parts, "device "+e.Device)
	}
	if e.Width > 0 {
		s := fmt.Sprintf("viewport %dx%d", e.Width, e.Height)
		if e.Scale > 0 {
			s += fmt.Sprintf(" @%gx", e.Scale)
		}
		if e.Mobile {
			s += " mobile"
		}
		parts = append(parts, s)
	}
	if e.Device == "" && e.UserAgent != "" {
		parts = append(parts, "user agent "+clipTo(e.UserAgent, 80))
	}
	for _, kv := range [][2]string{{"locale", e.Locale}, {"timezone", e.Timezone}, {"color scheme", e.ColorScheme}, {"reduced motion", e.ReducedMotion},
		{"media", e.Media}, {"forced colors", e.ForcedColors}, {"contrast", e.Contrast}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	if g := e.Geolocation; g != nil {
		parts = append(parts, fmt.Sprintf("geolocation %g,%g (±%gm)", g.Latitude, g.Longitude, g.Accuracy))
	}
	if e.Offline {
		parts = append(parts, "offline")
	}
	if e.Network != "" {
		parts = append(parts, "network "+e.Network)
	}
	if e.CPU > 1 {
		parts = append(parts, fmt.Sprintf("CPU %gx slower", e.CPU))
	}
	if e.Headers != "" {
		var names []string
		for l := range strings.SplitSeq(e.Headers, "\n") {
			name, _, _ := strings.Cut(l, ": ")
			names = append(names, name)
		}
		parts = append(parts, "extra headers "+strings.Join(names, ", ")+" (values not shown)")
	}
	if len(parts) == 0 {
		return "nothing emulated"
	}
	return strings.Join(parts, ", ")
}

// Emulate applies e, whole, to the tab: what e leaves unset goes back to
// the browser's own. A timezone or locale Chromium does not know is an
// INVALID_ARGUMENT error. The session uses it for the tabs it does not
// act in (resize and emulate run in the active tab with Do, which settles
// and reports what changed).
func (t *Tab) Emulate(ctx context.Context, e Emulation) error {
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-ctx.Done():
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "emulate: the tab was busy with another tool until the request deadline")
	}
	if t.Closed() {
		return closedError("emulate")
	}
	if t.dialogs.open() != nil {
		// A page frozen by a dialog would not answer until the deadline:
		// its next tool applies e, once the dialog is answered.
		t.emuLater = &e
		return nil
	}
	rctx, cancel := t.runCtx(ctx)
	defer cancel()
	if err := t.init(rctx); err != nil {
		return t.fail(ctx, rctx, "emulate", err)
	}
	if err := applyEmulation(rctx, e); err != nil {
		_ = applyEmulation(rctx, t.emu) // what the tab had
		return t.fail(ctx, rctx, "emulate", err)
	}
	t.emu = e
	return nil
}

// emulateHandlers are resize and emulate in the tab they act in (the
// session keeps the emulation for its other tabs).
var emulateHandlers = map[string]handler{
	"resize": func(t *Tab, ctx context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.emulateTool(ctx, Resizing(r.GetResize()))
	},
	"emulate": func(t *Tab, ctx context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.emulateTool(ctx, Emulating(r.GetEmulate()))
	},
}

// emulateTool is resize and emulate in the tab they act in: the tab's
// emulation changed by change, then the page settles (its media queries,
// resize handlers and matchMedia listeners may change it) and the result
// reports what changed. A value Chromium refuses leaves the tab as it was.
func (t *Tab) emulateTool(ctx context.Context, change EmulationChange) (*browserv1.ToolResult, error) {
	next, err := change(t.emu)
	if err != nil {
		return nil, err
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := applyEmulation(ctx, next); err != nil {
		_ = applyEmulation(ctx, t.emu)
		return nil, err
	}
	t.emu = next
	t.call.inputAt = time.Now()
	return t.acted(ctx, w, "Emulating: "+next.Summary())
}

// An EmulationChange is what one resize or emulate call does to an
// emulation: the tab and the session apply the same one.
type EmulationChange func(Emulation) (Emulation, error)

// Resizing is the change of a resize call.
func Resizing(r *browserv1.Resize) EmulationChange {
	return func(e Emulation) (Emulation, error) { return e.WithSize(r.GetWidth(), r.GetHeight()) }
}

// Emulating is the change of an emulate call.
func Emulating(m *browserv1.Emulate) EmulationChange {
	return func(e Emulation) (Emulation, error) { return e.Merge(m) }
}

// applyEmulation sets e, whole, in the tab of ctx: what e leaves unset
// goes back to the browser's own.
func applyEmulation(ctx context.Context, e Emulation) error {
	var err error
	if e.Width > 0 {
		_, err = chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: int64(e.Width), Height: int64(e.Height), DeviceScaleFactor: e.Scale, Mobile: e.Mobile})
	} else {
		_, err = chromedp.Call(ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
	}
	if err != nil {
		return fmt.Errorf("set the viewport: %w", err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetTouchEmulationEnabled, emulation.SetTouchEmulationEnabledParams{Enabled: e.Touch, MaxTouchPoints: 5}); err != nil {
		return fmt.Errorf("set touch emulation: %w", err)
	}
	ua := e.UserAgent
	if ua == "" && e.Locale != "" {
		// Accept-Language goes with a user agent: keep the browser's own.
		v, err := chromedp.Call(ctx, browser.GetVersion, cdp.Empty{})
		if err != nil {
			return fmt.Errorf("read the user agent: %w", err)
		}
		ua = v.UserAgent
	}
	if _, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: e.Locale}); err != nil {
		return fmt.Errorf("set the user agent: %w", err)
	}
	// A locale or time zone override cannot replace another: clear first.
	if _, err := chromedp.Call(ctx, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{}); err != nil {
		return fmt.Errorf("clear the locale: %w", err)
	}
	if e.Locale != "" {
		if _, err := chromedp.Call(ctx, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: e.Locale}); err != nil {
			return badArg("locale %q is not one Chromium knows (e.g. en-US, de-DE): %s", e.Locale, clipText(err.Error()))
		}
	}
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{}); err != nil {
		return fmt.Errorf("clear the time zone: %w", err)
	}
	if e.Timezone != "" {
		if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: e.Timezone}); err != nil {
			return badArg("timezone %q is not an IANA time zone Chromium knows (e.g. Europe/Berlin, America/New_York): %s", e.Timezone, clipText(err.Error()))
		}
	}
	if g := e.Geolocation; g != nil {
		_, err = chromedp.Call(ctx, emulation.SetGeolocationOverride, emulation.SetGeolocationOverrideParams{
			Latitude: &g.Latitude, Longitude: &g.Longitude, Accuracy: &g.Accuracy})
	} else {
		_, err = chromedp.Call(ctx, emulation.ClearGeolocationOverride, cdp.Empty{})
	}
	if err != nil {
		return fmt.Errorf("set the geolocation: %w", err)
	}
	// Every feature, "" for the browser's own: a feature left out keeps
	// an earlier value (forced-colors does).
	features := []*emulation.MediaFeature{
		{Name: "prefers-color-scheme", Value: e.ColorScheme},
		{Name: "prefers-reduced-motion", Value: e.ReducedMotion},
		{Name: "forced-colors", Value: e.ForcedColors},
		{Name: "prefers-contrast", Value: e.Contrast},
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: e.Media, Features: features}); err != nil {
		return fmt.Errorf("set the media features: %w", err)
	}
	cond := &network.Conditions{Offline: e.Offline, DownloadThroughput: -1, UploadThroughput: -1}
	if p, ok := networkPresets[e.Network]; ok && !e.Offline {
		cond.Latency, cond.DownloadThroughput, cond.UploadThroughput = p.latency, p.download, p.upload
	}
	if _, err := chromedp.Call(ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{cond}}); err != nil {
		return fmt.Errorf("set the network conditions: %w", err)
	}
	if _, err := chromedp.Call(ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{
		Offline: e.Offline, DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
		return fmt.Errorf("set navigator.onLine: %w", err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: headerMap(e.Headers)}); err != nil {
		return fmt.Errorf("set the extra HTTP headers: %w", err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetCPUThrottlingRate, emulation.SetCPUThrottlingRateParams{Rate: max(e.CPU, 1)}); err != nil {
		return fmt.Errorf("set the CPU throttling: %w", err)
	}
	return nil
}
