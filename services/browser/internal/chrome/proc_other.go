//go:build !linux

package chrome

import "github.com/chromedp/chromedp"

// processOptions: chromedp's defaults.
func processOptions() []chromedp.ExecAllocatorOption { return nil }

// stopGroup: Chromium's child processes end on their own.
func stopGroup(int) {}
