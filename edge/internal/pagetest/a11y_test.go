package pagetest

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/chromedp"
)

// namedRoles are the roles whose elements need an accessible name (WAI-ARIA
// "name required"): what a screen reader announces for the control.
var namedRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "checkbox": true, "radio": true,
	"combobox": true, "listbox": true, "slider": true, "spinbutton": true, "switch": true, "tab": true,
	"menuitem": true, "progressbar": true, "dialog": true, "meter": true,
}

// checkNamed fails t for every control the browser's accessibility tree
// exposes on p (hidden ones are not) without an accessible name.
func checkNamed(t *testing.T, p *page, when string) {
	t.Helper()
	tree, err := chromedp.Call(p.ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		t.Fatalf("%s: read the accessibility tree: %v", when, err)
	}
	controls := 0
	for _, n := range tree.Nodes {
		role := axString(n.Role)
		if n.Ignored || !namedRoles[role] {
			continue
		}
		controls++
		if strings.TrimSpace(axString(n.Name)) != "" {
			continue
		}
		what := role
		if n.BackendDOMNodeID != 0 {
			if d, err := chromedp.Call(p.ctx, dom.DescribeNode, dom.DescribeNodeParams{BackendNodeID: n.BackendDOMNodeID}); err == nil {
				what += " <" + strings.ToLower(d.Node.NodeName) + attrs(d.Node.Attributes) + ">"
			}
		}
		t.Errorf("%s: %s has no accessible name (a label, aria-label or text)", when, what)
	}
	if controls == 0 {
		t.Errorf("%s: no controls in the accessibility tree; want the page's buttons and fields", when)
	}
}

// axString is the string value of an accessibility value ("" if none).
func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(v.Value), &s); err != nil {
		return string(v.Value)
	}
	return s
}

// attrs formats DOM.describeNode's flat name, value list.
func attrs(kv []string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %s=%q", kv[i], kv[i+1])
	}
	return b.String()
}

// contrastJS lists the page's rendered text elements that matter to the
// shopper, with their computed text colour and the background colours from
// the element up to <html>; disabled controls (exempt in WCAG) and elements
// under partial opacity are left out.
const contrastJS = `(() => {
  const sel = ['#sale-name', '#sale-status', '#countdown', 'h2', '.skus .name', '.skus .price', '.skus .hint', 'label',
    'input', 'button', '#signed-in', '#signout', '#queue-state', '.stats dt', '.stats dd', '#notice', '#check-hint',
    '#res-countdown', '#reservation p', '#order p', '#order-note'];
  const out = [];
  for (const s of sel) for (const e of document.querySelectorAll(s)) {
    if (!e.getClientRects().length || e.disabled || !(e.value || e.textContent).trim()) continue;
    const bgs = [];
    let faded = false;
    for (let n = e; n; n = n.parentElement) {
      const cs = getComputedStyle(n);
      bgs.push(cs.backgroundColor);
      if (parseFloat(cs.opacity) < 1) faded = true;
    }
    if (faded) continue;
    out.push({what: s + (e.id ? ' #' + e.id : ''), color: getComputedStyle(e).color, backgrounds: bgs});
  }
  return out;
})()`

// textColours is one element of contrastJS's list.
type textColours struct {
	What        string   `json:"what"`
	Color       string   `json:"color"`
	Backgrounds []string `json:"backgrounds"`
}

// minContrast is WCAG 2 AA's contrast for body text.
const minContrast = 4.5

// checkContrast fails t for every text element of contrastJS whose colour
// against its background is below minContrast.
func checkContrast(t *testing.T, p *page, when string) {
	t.Helper()
	els, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]textColours](contrastJS))
	if err != nil {
		t.Fatalf("%s: read the page's colours: %v", when, err)
	}
	if len(els) < 5 {
		t.Fatalf("%s: %d text elements to check, want the page's (%+v)", when, len(els), els)
	}
	lowest, at := math.Inf(1), ""
	for _, e := range els {
		fg, bg, err := e.resolve()
		if err != nil {
			t.Errorf("%s: %s: %v", when, e.What, err)
			continue
		}
		r := contrastRatio(fg, bg)
		if r < lowest {
			lowest, at = r, e.What
		}
		if r < minContrast {
			t.Errorf("%s: %s: text %s on %s has contrast %.2f:1, want at least %.1f:1 (WCAG AA)", when, e.What, e.Color, bg, r, minContrast)
		}
	}
	t.Logf("%s: %d text elements, lowest contrast %.2f:1 (%s)", when, len(els), lowest, at)
}

// resolve composites the element's backgrounds over a white canvas, from
// <html> down, and its text colour over that.
func (e textColours) resolve() (fg, bg rgba, err error) {
	bg = rgba{255, 255, 255, 1}
	for i := len(e.Backgrounds) - 1; i >= 0; i-- {
		c, err := parseColour(e.Backgrounds[i])
		if err != nil {
			return fg, bg, err
		}
		bg = c.over(bg)
	}
	c, err := parseColour(e.Color)
	if err != nil {
		return fg, bg, err
	}
	return c.over(bg), bg, nil
}

// rgba is an sRGB colour with channels 0–255 and alpha 0–1.
type rgba struct{ R, G, B, A float64 }

func (c rgba) String() string { return fmt.Sprintf("rgb(%.0f, %.0f, %.0f)", c.R, c.G, c.B) }

// colourRE matches the colours getComputedStyle gives: rgb(r, g, b) and
// rgba(r, g, b, a).
var colourRE = regexp.MustCompile(`^rgba?\(\s*([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\s*\)$`)

// parseColour reads a computed CSS colour.
func parseColour(s string) (rgba, error) {
	m := colourRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return rgba{}, fmt.Errorf("colour %q is not rgb() or rgba()", s)
	}
	var v [4]float64
	v[3] = 1
	for i, part := range m[1:] {
		if part == "" {
			continue
		}
		f, err := strconv.ParseFloat(part, 64)
		if err != nil {
			return rgba{}, fmt.Errorf("colour %q: %w", s, err)
		}
		v[i] = f
	}
	return rgba{v[0], v[1], v[2], v[3]}, nil
}

// over is c painted over the opaque colour under.
func (c rgba) over(under rgba) rgba {
	mix := func(a, b float64) float64 { return a*c.A + b*(1-c.A) }
	return rgba{mix(c.R, under.R), mix(c.G, under.G), mix(c.B, under.B), 1}
}

// luminance is the relative luminance of an opaque colour (WCAG 2).
func (c rgba) luminance() float64 {
	lin := func(v float64) float64 {
		v /= 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(c.R) + 0.7152*lin(c.G) + 0.0722*lin(c.B)
}

// contrastRatio is WCAG 2's contrast ratio of two opaque colours, 1 to 21.
func contrastRatio(a, b rgba) float64 {
	la, lb := a.luminance(), b.luminance()
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

func TestContrastRatio(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fg, bg string
		want   float64
	}{
		{"rgb(0, 0, 0)", "rgb(255, 255, 255)", 21},
		{"rgb(255, 255, 255)", "rgb(255, 255, 255)", 1},
		{"rgb(119, 119, 119)", "rgb(255, 255, 255)", 4.48}, // #777 on white: just short of AA
		{"rgba(0, 0, 0, 0.5)", "rgb(255, 255, 255)", 3.98}, // half-transparent black is #808080 on white
		{"rgb(255, 255, 255)", "rgb(11, 87, 208)", 6.38},   // the page's button
	} {
		t.Run(tc.fg+" on "+tc.bg, func(t *testing.T) {
			e := textColours{Color: tc.fg, Backgrounds: []string{"rgba(0, 0, 0, 0)", tc.bg}}
			fg, bg, err := e.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if got := contrastRatio(fg, bg); math.Abs(got-tc.want) > 0.01 {
				t.Errorf("contrastRatio(%s, %s) = %.3f, want %.2f", tc.fg, tc.bg, got, tc.want)
			}
		})
	}
}
