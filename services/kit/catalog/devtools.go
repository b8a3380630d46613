package catalog

import (
	"strconv"
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// The developer tools: what the page logged and loaded, one body of a
// request, how the session presents itself (viewport, device, locale,
// time zone, position, media features, offline) and the page as a PDF.
// The worker does the work (internal/page console.go, network.go,
// emulate.go, pdf.go).

// deviceNames are the devices of the worker's table (page.DeviceNames;
// the catalog does not import the worker).
var deviceNames = []string{"iPhone SE", "iPhone 13", "iPhone 15 Pro", "iPhone 15 Pro Max", "Pixel 7", "Galaxy S23",
	"iPad Mini", "iPad Pro 11", "Galaxy Tab S9", "Desktop 1080p", "Laptop"}

// bufferSize is the worker's default ring of console messages and requests.
const bufferSize = 500

var devtoolsTools = []Tool{
	{
		Name: "console_messages", Title: "Console messages", ReadOnly: true,
		MaxChars: TextChars,
		Description: "List what the active tab's page logged to the console, oldest first, with level, text and " +
			"source line: console.log/info/debug/warn/error calls, uncaught exceptions and unhandled promise " +
			"rejections. The tab keeps its last 500 messages. Pass the result's next as since to see only newer ones.",
		params: []Param{
			{Name: "level", Type: String, Enum: []string{"debug", "info", "warning", "error"}, Default: "info",
				Description: "Least severe level to list: each level includes the more severe ones (info includes console.log)"},
			{Name: "since", Type: Integer, Min: bound(0), Description: "Only messages numbered above this: the next of an earlier call"},
			{Name: "limit", Type: Integer, Min: bound(1), Max: bound(bufferSize), Description: "Most messages to return, the newest (default 100)"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			since, _ := a.integer("since")
			limit, _ := a.integer("limit")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_ConsoleMessages{ConsoleMessages: &browserv1.ConsoleMessages{
				Level: a.str("level"), Since: since, Limit: int32(limit)}}}, nil
		},
	},
	{
		Name: "network_requests", Title: "Network requests", ReadOnly: true,
		MaxChars: TextChars,
		Description: "List the requests of the active tab's page, oldest first: id, method, URL, resource type, " +
			"status, MIME type, size and duration; a request the URL policy refused names the rule. The tab keeps " +
			"its last 500 requests. Pass an id to network_request to read a body.",
		params: []Param{
			{Name: "filter", Type: String, Description: "Only URLs containing this text, or matching /a regular expression/"},
			{Name: "resource_type", Type: String, Description: "Only this type: Document, Stylesheet, Image, Media, Font, Script, XHR, Fetch, …"},
			{Name: "status", Type: String, Description: "Only this HTTP status (404), class (4xx) or failed (no response, blocked included)"},
			{Name: "limit", Type: Integer, Min: bound(1), Max: bound(bufferSize), Description: "Most requests to return, the newest (default 100)"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			limit, _ := a.integer("limit")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequests{NetworkRequests: &browserv1.NetworkRequests{
				Filter: a.str("filter"), ResourceType: a.str("resource_type"), Status: a.str("status"), Limit: int32(limit)}}}, nil
		},
	},
	{
		Name: "network_request", Title: "Request body", ReadOnly: true,
		Description: "Get the response body (or the body the page sent) of one request listed by network_requests: " +
			"text as it is, anything else in base64, cut at max_bytes. The browser keeps bodies only for a while " +
			"(a navigation may drop them).",
		params: []Param{
			{Name: "id", Type: String, Required: true, Description: "The request's id from network_requests, e.g. r12"},
			{Name: "part", Type: String, Enum: []string{"response", "request"}, Default: "response", Description: "Which body"},
			{Name: "max_bytes", Type: Integer, Min: bound(1), Max: bound(1 << 20), Description: "Most bytes of the body to return (default 20000)"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			id, err := nonEmpty(a, "id")
			if err != nil {
				return nil, err
			}
			n, _ := a.integer("max_bytes")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequest{NetworkRequest: &browserv1.NetworkRequestBody{
				Id: strings.TrimSpace(id), Part: a.str("part"), MaxBytes: int32(n)}}}, nil
		},
	},
	{
		Name: "resize", Title: "Resize viewport",
		Acts: Always, Level: OnSession,
		Description: "Set the viewport of every tab of the browser session (and of tabs opened later) to a size in CSS pixels.",
		params: []Param{
			{Name: "width", Type: Integer, Required: true, Min: bound(100), Max: bound(8192), Description: "Width in CSS pixels"},
			{Name: "height", Type: Integer, Required: true, Min: bound(100), Max: bound(8192), Description: "Height in CSS pixels"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			w, _ := a.integer("width")
			h, _ := a.integer("height")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Resize{Resize: &browserv1.Resize{Width: int32(w), Height: int32(h)}}}, nil
		},
	},
	{
		Name: "emulate", Title: "Emulate device and environment",
		Acts: Always, Level: OnSession,
		Description: "Make every tab of the browser session (and tabs opened later) present itself as a device or " +
			"environment: a phone or tablet (viewport, pixel ratio, mobile, touch, user agent), a user agent, locale, " +
			"time zone, position, color scheme, reduced motion, print media, forced colors, contrast, offline, a slow network " +
			"or a slow CPU. What a call leaves out stays as an earlier " +
			"call set it; reset returns to the browser's own first. Some pages read these only when they load: reload " +
			"after emulating. tab_list shows what is emulated.",
		params: []Param{
			{Name: "device", Type: String, Description: "One of: " + strings.Join(deviceNames, ", ")},
			{Name: "user_agent", Type: String, Description: "User agent string (replaces the device's)"},
			{Name: "locale", Type: String, Description: "BCP 47 language tag, e.g. de-DE (navigator.language, Accept-Language, Intl)"},
			{Name: "timezone", Type: String, Description: "IANA time zone, e.g. Europe/Berlin"},
			{Name: "geolocation", Type: String, Description: "Position as latitude,longitude or latitude,longitude,accuracy in metres, e.g. 52.52,13.40"},
			{Name: "color_scheme", Type: String, Enum: []string{"light", "dark", "no-preference"}, Description: "prefers-color-scheme"},
			{Name: "reduced_motion", Type: String, Enum: []string{"reduce", "no-preference"}, Description: "prefers-reduced-motion"},
			{Name: "media", Type: String, Enum: []string{"screen", "print"}, Description: "CSS media type: print shows the page's print styles"},
			{Name: "forced_colors", Type: String, Enum: []string{"active", "none"}, Description: "forced-colors (Windows high contrast mode)"},
			{Name: "contrast", Type: String, Enum: []string{"more", "less", "no-preference"}, Description: "prefers-contrast"},
			{Name: "offline", Type: Boolean, Description: "Cut the pages off the network (true) or reconnect them (false)"},
			{Name: "network", Type: String, Enum: []string{"slow-3g", "fast-3g", "slow-4g", "fast-4g", "none"},
				Description: "Throttle the network like Chrome DevTools' presets (added latency, lower throughput); none stops throttling"},
			{Name: "cpu_throttling", Type: Number, Description: "Slow the pages' CPU down by this factor, 1 (none) to 20"},
			{Name: "headers", Type: Array, MaxItems: 20, Items: &Param{Type: Object, Fields: []Param{
				{Name: "name", Type: String, Required: true, Description: "Header name, e.g. X-Test-Run"},
				{Name: "value", Type: String, Required: true, Description: "Header value (one line)"},
			}}, Description: "Extra HTTP headers for every request of the session's pages, replacing earlier ones ([] clears them); " +
				"results and tab_list name them but never show their values"},
			{Name: "reset", Type: Boolean, Default: false, Description: "Clear all emulation before applying the rest of this call"},
		},
		build: buildEmulate,
	},
	{
		Name: "pdf", Title: "Save as PDF", ReadOnly: true,
		Description: "Print the active tab's page to PDF; returned as an embedded resource (application/pdf).",
		params: []Param{
			{Name: "format", Type: String, Enum: []string{"Letter", "Legal", "Tabloid", "A3", "A4", "A5"}, Default: "Letter", Description: "Paper size"},
			{Name: "landscape", Type: Boolean, Default: false, Description: "Landscape orientation"},
			{Name: "print_background", Type: Boolean, Default: false, Description: "Print background colors and images"},
			{Name: "page_ranges", Type: String, Description: "Pages to print, e.g. 1-3, 5 (default: all)"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Pdf{Pdf: &browserv1.Pdf{Format: a.str("format"),
				Landscape: a.boolean("landscape"), PrintBackground: a.boolean("print_background"), PageRanges: a.str("page_ranges")}}}, nil
		},
	},
}

// Saved storage (the worker's storage.go): a login kept without showing
// it to the model.
var storageTools = []Tool{
	{
		Name: "storage_save", Title: "Save storage",
		Storage: Always, Level: OnWorker,
		Description: "Save the browser session's cookies and the local storage of its open tabs' sites under a name, " +
			"sealed in the fleet, to start a later session from it (open with storage): a login kept without showing it. " +
			"The result names the cookie domains, sites and counts, never a value. Saving under an existing name replaces it.",
		params: []Param{storageNameParam("Name to save under")},
		build: storageNameTool(func(r *browserv1.ToolRequest, n *browserv1.StorageName) {
			r.Tool = &browserv1.ToolRequest_StorageSave{StorageSave: n}
		}),
	},
	{
		Name: "storage_list", Title: "List saved storage", ReadOnly: true,
		Storage: Always, Level: OnWorker,
		Description: "List the saved storages of this caller: name, when saved, cookie domains, sites and counts (never values).",
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_StorageList{StorageList: n}
		}),
	},
	{
		Name: "storage_delete", Title: "Delete saved storage", Description: "Delete a saved storage.",
		Storage: Always, Level: OnWorker,
		params: []Param{storageNameParam("Name of the saved storage")},
		build: storageNameTool(func(r *browserv1.ToolRequest, n *browserv1.StorageName) {
			r.Tool = &browserv1.ToolRequest_StorageDelete{StorageDelete: n}
		}),
	},
}

// storageParam is open's argument naming a saved storage to start from.
var storageParam = Param{Name: "storage", Type: String, Description: "Start from this saved storage (storage_save): its " +
	"cookies are set in the browser session and its local storage is back before the page's scripts run"}

// storageNameTool builds the request of a tool that takes a storage name.
func storageNameTool(set func(*browserv1.ToolRequest, *browserv1.StorageName)) func(Args) (*browserv1.ToolRequest, error) {
	return func(a Args) (*browserv1.ToolRequest, error) {
		n, err := nonEmpty(a, "name")
		if err != nil {
			return nil, err
		}
		r := &browserv1.ToolRequest{}
		set(r, &browserv1.StorageName{Name: strings.TrimSpace(n)})
		return r, nil
	}
}

func storageNameParam(what string) Param {
	return Param{Name: "name", Type: String, Required: true,
		Description: what + ": a lowercase letter, then up to 63 lowercase letters, digits, - or _ (e.g. github-login)"}
}

// HeadersParam is emulate's extra HTTP headers: their values are kept out
// of every record (HideSecrets).
const HeadersParam = "headers"

// hideHeaderValues returns emulate's headers with every value hidden,
// their names kept.
func hideHeaderValues(v any, hidden string) any {
	list, ok := v.([]any)
	if !ok {
		return hidden
	}
	out := make([]any, len(list))
	for i, raw := range list {
		var name any
		switch h := raw.(type) {
		case map[string]any:
			name = h["name"]
		case Args:
			name = h["name"]
		}
		out[i] = map[string]any{"name": name, "value": hidden}
	}
	return out
}

// buildEmulate builds an emulate request; at least one change is needed.
func buildEmulate(a Args) (*browserv1.ToolRequest, error) {
	e := &browserv1.Emulate{Device: strings.TrimSpace(a.str("device")), UserAgent: a.str("user_agent"), Locale: a.str("locale"),
		Timezone: a.str("timezone"), ColorScheme: a.str("color_scheme"), ReducedMotion: a.str("reduced_motion"), ResetAll: a.boolean("reset"),
		Media: a.str("media"), ForcedColors: a.str("forced_colors"), Contrast: a.str("contrast"), Network: a.str("network")}
	if list, ok := a["headers"].([]any); ok {
		e.SetHeaders = true
		for _, raw := range list {
			h, _ := raw.(Args)
			e.Headers = append(e.Headers, &browserv1.Header{Name: h.str("name"), Value: h.str("value")})
		}
	}
	if c, ok := a["cpu_throttling"].(float64); ok {
		if c < 1 || c > 20 {
			return nil, argErr("cpu_throttling", "must be 1 (none) to 20, got %g", c)
		}
		e.CpuThrottling = c
	}
	if off, ok := a["offline"].(bool); ok {
		e.Offline = &off
	}
	if g := strings.TrimSpace(a.str("geolocation")); g != "" {
		geo, err := parseGeolocation(g)
		if err != nil {
			return nil, err
		}
		e.Geolocation = geo
	}
	if e.Device == "" && e.UserAgent == "" && e.Locale == "" && e.Timezone == "" && e.ColorScheme == "" && e.ReducedMotion == "" &&
		e.Media == "" && e.ForcedColors == "" && e.Contrast == "" && e.Offline == nil && e.Geolocation == nil && !e.ResetAll &&
		e.Network == "" && e.CpuThrottling == 0 && !e.SetHeaders {
		return nil, &ArgError{Msg: "say what to emulate: device, user_agent, locale, timezone, geolocation, color_scheme, " +
			"reduced_motion, media, forced_colors, contrast, offline, network, cpu_throttling, headers or reset"}
	}
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: e}}, nil
}

// parseGeolocation reads "latitude,longitude[,accuracy]".
func parseGeolocation(s string) (*browserv1.Geolocation, error) {
	parts := strings.Split(s, ",")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, argErr("geolocation", "must be latitude,longitude or latitude,longitude,accuracy (e.g. 52.52,13.40), not %q", s)
	}
	var v [3]float64
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, argErr("geolocation", "must be numbers: latitude,longitude[,accuracy] (e.g. 52.52,13.40), not %q", s)
		}
		v[i] = f
	}
	switch {
	case v[0] < -90 || v[0] > 90:
		return nil, argErr("geolocation", "latitude must be -90 to 90, not %g", v[0])
	case v[1] < -180 || v[1] > 180:
		return nil, argErr("geolocation", "longitude must be -180 to 180, not %g", v[1])
	case v[2] < 0:
		return nil, argErr("geolocation", "accuracy must be 0 or more metres, not %g", v[2])
	}
	return &browserv1.Geolocation{Latitude: v[0], Longitude: v[1], Accuracy: v[2]}, nil
}
