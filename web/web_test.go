package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// budget is what the view may weigh, compressed, all files together.
const budget = 25 << 10

// TestAssetBudget keeps the view small and prints each file's size.
func TestAssetBudget(t *testing.T) {
	total := 0
	for _, a := range Assets() {
		sent := a.GzipBytes
		if sent == 0 {
			sent = a.Bytes
		}
		total += sent
		t.Logf("%-10s %6d bytes, %6d gzip", a.Name, a.Bytes, a.GzipBytes)
	}
	t.Logf("total sent: %d bytes", total)
	require.LessOrEqual(t, total, budget, "the web view grew past its budget")
	names := []string{}
	for _, a := range Assets() {
		names = append(names, a.Name)
	}
	require.Equal(t, []string{"app.css", "app.js", "icon.svg", "index.html"}, names)
}

// TestNoThirdPartyOrInlineCode: the page loads only its own files and has
// no inline script or style, which the Content-Security-Policy would
// block anyway.
func TestNoThirdPartyOrInlineCode(t *testing.T) {
	for _, a := range assets {
		body := strings.ReplaceAll(string(a.body), `xmlns="http://www.w3.org/2000/svg"`, "") // a name, not a load
		require.NotContains(t, body, "http://", a.name)
		require.NotRegexp(t, `https://[^m"'\s]`, body, "%s names another origin", a.name) // molt.dev problem types only
		if a.name == "index.html" {
			require.NotContains(t, body, "<style")
			require.NotContains(t, body, " style=")
			require.NotRegexp(t, `<script(?:[^>]*)>[^<]`, body, "inline script")
			require.NotRegexp(t, ` on[a-z]+=`, body, "inline handler")
		}
		if a.name == "app.js" {
			require.NotContains(t, body, "innerHTML")
			require.NotContains(t, body, "localStorage.setItem")
			require.NotContains(t, body, "sessionStorage.setItem")
			require.NotContains(t, body, "eval(")
		}
	}
}

func TestHandlerHeaders(t *testing.T) {
	h := Handler(http.NotFoundHandler())
	for _, p := range []string{"/", "/ui", "/ui/", "/ui/app.js", "/ui/app.css", "/ui/icon.svg"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		require.Equal(t, http.StatusOK, rec.Code, p)
		require.Equal(t, ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"), p)
		require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"), p)
		require.Empty(t, rec.Header().Get("Content-Encoding"), "%s: not compressed for a client that did not ask", p)
		ct := rec.Header().Get("Content-Type")
		switch {
		case strings.HasSuffix(p, ".js"):
			require.Contains(t, ct, "javascript", p)
		case strings.HasSuffix(p, ".css"):
			require.Contains(t, ct, "text/css", p)
		case strings.HasSuffix(p, ".svg"):
			require.Contains(t, ct, "image/svg+xml", p)
		default:
			require.Contains(t, ct, "text/html", p)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/missing", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.False(t, acceptsGzip("gzip;q=0"))
	require.True(t, acceptsGzip("deflate, gzip;q=0.5"))
}
