package httpapi

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitPath(t *testing.T) {
	for _, p := range []string{"", "a", "a/b", "v1/sales/s1/queue/status", "a//b", "/", "a/", "/a", strings.Repeat("x/", 20)} {
		if got, want := SplitPath(p, nil), strings.Split(p, "/"); !slices.Equal(got, want) {
			t.Errorf("SplitPath(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern []string
		path    string
		params  []string
		ok      bool
	}{
		{[]string{"v1", "sales", "*"}, "v1/sales/s1", []string{"s1"}, true},
		{[]string{"v1", "sales", "*"}, "v1/sales/s1/queue", nil, false},
		{[]string{"v1", "sales", "*"}, "v1/sales/", nil, false},
		{[]string{"v1", "sales", "*"}, "v1/sales", nil, false},
		{[]string{"v1", "sales", "*", "queue", "status"}, "v1/sales/s1/queue/status", []string{"s1"}, true},
		{[]string{"v1", "sales", "*", "queue", "status"}, "v1/sales/s1/queue/statu", nil, false},
		{[]string{"static", "**"}, "static/a/b.css", []string{"a/b.css"}, true},
		{[]string{"static", "**"}, "static", nil, false},
		{[]string{""}, "", nil, true},
		{[]string{""}, "x", nil, false},
	}
	for _, tt := range tests {
		params, ok := MatchPath(tt.pattern, strings.Split(tt.path, "/"))
		if ok != tt.ok || (ok && !slices.Equal(params, tt.params)) {
			t.Errorf("MatchPath(%q, %q) = %q, %v; want %q, %v", tt.pattern, tt.path, params, ok, tt.params, tt.ok)
		}
	}
}
