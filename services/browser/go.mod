module github.com/sovereign-fleet/sovereign/services/browser

go 1.26.8

require github.com/chromedp/chromedp v0.23.1

require (
	github.com/chromedp/cdproto v0.160.1 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
)

replace (
	github.com/sovereign-fleet/sovereign/proto => ../../proto
	github.com/sovereign-fleet/sovereign/services/kit => ../kit
)
