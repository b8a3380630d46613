//go:build !linux

package chrome

import "github.com/chromedp/chromedp"

// processOptions: chromedp's defaults.
func processOptions() []chromedp.ExecAllocatorOption { return nil }
