package page

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/chromedp/cdproto/css"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// get_styles: why an element looks the way it does. Its computed values
// (the properties asked for, or defaultStyleProps: how it is laid out and
// painted) come from getComputedStyle in Sovereign's world; the author CSS
// rules that match it, in cascade order (a later rule wins over an earlier
// one of equal importance), and its inline style come from
// CSS.getMatchedStylesForNode (chromedp enables the DOM and CSS domains on
// every tab). User-agent rules are left out: they are the browser's
// defaults, and the computed values already show their effect.

// defaultStyleProps are the computed properties get_styles shows when the
// call names none.
var defaultStyleProps = []string{
	"display", "visibility", "opacity", "position", "top", "left", "z-index",
	"width", "height", "margin", "padding", "box-sizing", "overflow",
	"color", "background-color", "background-image", "border", "border-radius",
	"font-family", "font-size", "font-weight", "line-height", "text-align",
	"flex-direction", "justify-content", "align-items", "gap", "grid-template-columns",
	"cursor", "pointer-events", "transform", "transition",
}

const (
	// maxStyleProps bounds the properties a call may name.
	maxStyleProps = 100
	// maxStyleRules bounds the rules shown; the rest are counted.
	maxStyleRules = 60
)

// styleProp matches a CSS property name (custom properties too).
var styleProp = regexp.MustCompile(`^(--[\w-]+|-?[a-z][a-z-]*)$`)

// getStyles returns an element's computed style and the author rules that
// match it, cut at the call's character cap.
func (t *Tab) getStyles(ctx context.Context, req *browserv1.GetStyles) (*browserv1.ToolResult, error) {
	props := req.GetProperties()
	if len(props) > maxStyleProps {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "properties names %d properties; at most %d", len(props), maxStyleProps)
	}
	for _, p := range props {
		if !styleProp.MatchString(p) {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%q is not a CSS property name (like color, margin-top or --brand)", clipTo(p, 100))
		}
	}
	if len(props) == 0 {
		props = defaultStyleProps
	}
	e, err := t.resolve(ctx, req.GetElement(), "get_styles")
	if err != nil {
		return nil, err
	}
	computed, err := jsStyles(ctx, e, props)
	if err != nil {
		return nil, err
	}
	if computed.Gone {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s is no longer in the page; take a new snapshot", e.what)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Computed style of %s:\n", t.frames.noteDesc(computed.Desc))
	for _, p := range props {
		v := computed.Values[p]
		if v == "" {
			v = "(not set)"
		}
		fmt.Fprintf(&b, "  %s: %s\n", p, clipTo(v, 300))
	}
	if req.GetRules() {
		if err := matchedRules(ctx, e, &b); err != nil {
			return nil, err
		}
	}
	limit := t.capChars(DefaultTextChars)
	text := strings.TrimRight(b.String(), "\n")
	if len(text) > limit {
		text = clipRunes(text, limit) + cutMarker(limit, len(text), "name fewer properties, or pass a larger max_chars")
	}
	return textResult("%s", text), nil
}

// matchedRules writes the author rules that match e and its inline style,
// in cascade order.
func matchedRules(ctx context.Context, e *elem, b *strings.Builder) error {
	node, err := chromedp.Call(ctx, dom.RequestNode, dom.RequestNodeParams{ObjectID: e.obj})
	if err != nil {
		return fmt.Errorf("find the element's node: %w", err)
	}
	m, err := chromedp.Call(ctx, css.GetMatchedStylesForNode, css.GetMatchedStylesForNodeParams{NodeID: node.NodeID})
	if err != nil {
		return fmt.Errorf("read the rules that match %s: %w", e.what, err)
	}
	var rules []string
	for _, rm := range m.MatchedCSSRules {
		r := rm.Rule
		if r == nil || r.Origin == css.StyleSheetOriginUserAgent || r.Style == nil {
			continue
		}
		sel := ""
		if r.SelectorList != nil {
			sel = r.SelectorList.Text
		}
		if len(r.Media) > 0 && r.Media[0] != nil {
			sel = "@media " + r.Media[0].Text + " { " + sel + " }"
		}
		rules = append(rules, fmt.Sprintf("  %s { %s }", clipTo(sel, 300), declarations(r.Style)))
	}
	if m.InlineStyle != nil && len(declared(m.InlineStyle)) > 0 {
		rules = append(rules, fmt.Sprintf("  style attribute { %s }", declarations(m.InlineStyle)))
	}
	inherited := inheritedRules(m.Inherited)
	if len(rules) == 0 && len(inherited) == 0 {
		b.WriteString("No author CSS rule matches it or passes it an inherited property (only the browser's defaults).\n")
		return nil
	}
	if len(rules) == 0 {
		b.WriteString("No author CSS rule matches it.\n")
	} else {
		b.WriteString("Rules that match it, in cascade order (a later one wins over an earlier one of equal importance; user-agent rules left out):\n")
	}
	for i, r := range rules {
		if i == maxStyleRules {
			fmt.Fprintf(b, "  … and %d more rules\n", len(rules)-i)
			break
		}
		b.WriteString(r)
		b.WriteByte('\n')
	}
	if len(inherited) > 0 {
		b.WriteString("Inherited from its ancestors (only properties that inherit; nearest ancestor first, and a nearer one wins):\n")
		for i, r := range inherited {
			if i == maxStyleRules {
				fmt.Fprintf(b, "  … and %d more rules\n", len(inherited)-i)
				break
			}
			b.WriteString(r)
			b.WriteByte('\n')
		}
	}
	return nil
}

// maxInheritDepth is how many ancestors get_styles looks at for inherited
// properties.
const maxInheritDepth = 8

// inheritedRules lists the author rules (and inline styles) of the
// element's ancestors that set properties which inherit, with only those
// properties.
func inheritedRules(entries []*css.InheritedStyleEntry) []string {
	var out []string
	for depth, e := range entries {
		if depth == maxInheritDepth {
			break
		}
		from := "parent"
		if depth > 0 {
			from = fmt.Sprintf("%d levels up", depth+1)
		}
		add := func(what string, s *css.Style) {
			if d := inheritedDeclarations(s); d != "" {
				out = append(out, fmt.Sprintf("  (%s) %s { %s }", from, what, d))
			}
		}
		for _, rm := range e.MatchedCSSRules {
			if r := rm.Rule; r != nil && r.Origin != css.StyleSheetOriginUserAgent && r.Style != nil && r.SelectorList != nil {
				add(clipTo(r.SelectorList.Text, 300), r.Style)
			}
		}
		if e.InlineStyle != nil {
			add("style attribute", e.InlineStyle)
		}
	}
	return out
}

// inheritedDeclarations writes the declarations of s whose properties
// inherit.
func inheritedDeclarations(s *css.Style) string {
	var keep []*css.Property
	for _, p := range declared(s) {
		if inherits(p.Name) {
			keep = append(keep, p)
		}
	}
	return declarationsOf(keep)
}

// inherits reports whether a CSS property inherits by default (the common
// ones, and custom properties).
func inherits(name string) bool {
	if strings.HasPrefix(name, "--") || strings.HasPrefix(name, "font") || strings.HasPrefix(name, "text-") ||
		strings.HasPrefix(name, "list-style") || strings.HasPrefix(name, "word-") {
		return true
	}
	switch name {
	case "color", "line-height", "letter-spacing", "white-space", "visibility", "cursor", "direction",
		"quotes", "tab-size", "hyphens", "caret-color", "accent-color", "color-scheme", "writing-mode", "overflow-wrap":
		return true
	}
	return false
}

// declared returns the properties a style declares (not those the browser
// implies, nor the longhands it expands a shorthand into).
func declared(s *css.Style) []*css.Property {
	var out []*css.Property
	for _, p := range s.CSSProperties {
		if p != nil && !p.Implicit && !p.Disabled && (p.Text != "" || p.Range != nil) {
			out = append(out, p)
		}
	}
	return out
}

// declarations writes a style's declarations as CSS.
func declarations(s *css.Style) string { return declarationsOf(declared(s)) }

// declarationsOf writes properties as CSS declarations.
func declarationsOf(props []*css.Property) string {
	var parts []string
	for _, p := range props {
		d := p.Name + ": " + clipTo(p.Value, 200)
		if p.Important && !strings.Contains(p.Value, "!important") {
			d += " !important"
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, "; ")
}
