package chrome

import (
	"context"
	"github.com/chromedp/chromedp"
	"testing"
)

func TestStart(t *testing.T) {
	p, err := Find("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel, err := Start(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	sctx, c2 := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	defer c2()
	if err := chromedp.Do(sctx, chromedp.Navigate("data:text/html,<title>hi</title>")); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(sctx, chromedp.Title())
	if err != nil || title != "hi" {
		t.Fatalf("title %q %v", title, err)
	}
}
