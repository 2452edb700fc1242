package static

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

func TestNamesListsEmbeddedFiles(t *testing.T) {
	want := []string{"app.js", "challenge-worker.js", "index.html", "style.css"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, n := range want {
		b, err := fs.ReadFile(Files, n)
		if err != nil || len(b) == 0 {
			t.Errorf("%s: empty or unreadable (%v)", n, err)
		}
	}
}

// The page must reference its assets by the paths the edge serves, load nothing from elsewhere, and keep
// the element ids that browser tests look for.
func TestIndexHTML(t *testing.T) {
	b, _ := fs.ReadFile(Files, "index.html")
	page := string(b)
	for _, s := range []string{`src="/static/app.js"`, `href="/static/style.css"`,
		`id="signin-user"`, `id="signin-button"`, `id="join-button"`, `id="queue-state"`, `id="position"`,
		`id="now-serving"`, `id="eta"`, `id="reservation"`, `id="notice"`} {
		if !strings.Contains(page, s) {
			t.Errorf("index.html lacks %s", s)
		}
	}
	for _, n := range Names() {
		b, _ := fs.ReadFile(Files, n)
		if strings.Contains(string(b), "http://") || strings.Contains(string(b), "https://") {
			t.Errorf("%s references an external resource", n)
		}
	}
	js, _ := fs.ReadFile(Files, "app.js")
	if !strings.Contains(string(js), "'buy-' + s.sku") {
		t.Error("app.js no longer creates #buy-<sku> buttons")
	}
}
