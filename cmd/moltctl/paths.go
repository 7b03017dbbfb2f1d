package main

import (
	"net/url"
	"strings"
)

// apiPath is the request path "/v1/seg/seg/…" with every segment escaped
// (url.PathEscape): a name from the command line or a file ("a/b",
// "x?y", "50%") stays one segment of the path, and can neither reach
// another route nor start a query.
func apiPath(segs ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}
