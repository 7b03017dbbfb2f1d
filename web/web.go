// Package web is the coordinator's web view: a read-mostly page of the
// fleet, each cluster's upgrade, maintenance policy, preflight runs and
// audit log, with the operator actions the API allows. It is plain HTML,
// CSS and JavaScript embedded in the binary (static/), served by every
// member under /ui/ (coordinator/httpapi mounts Handler), and reads only
// what the REST API serves, as the signed-in caller (docs/web.md).
//
// The files are public; the data is not: the page calls /v1 with the
// session cookie that POST /v1/session sets (docs/security.md, "The web
// view").
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where Handler serves the view.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every file: scripts, styles, images
// and requests only from the member itself, no inline script or style, no
// framing, no form posts.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, with its gzip form when that is smaller.
type asset struct {
	name  string
	body  []byte
	gz    []byte
	ctype string
	etag  string
}

// Asset describes an embedded file for size reports.
type Asset struct {
	Name       string
	Bytes      int
	GzipBytes  int // 0: served uncompressed
	ContentTyp string
}

var assets = load()

func load() map[string]*asset {
	out := map[string]*asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		sum := sha256.Sum256(b)
		a := &asset{name: name, body: b, ctype: mime.TypeByExtension(path.Ext(name)), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		if a.ctype == "" {
			a.ctype = "application/octet-stream"
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		if buf.Len() < len(b) {
			a.gz = buf.Bytes()
		}
		out[name] = a
		return nil
	})
	if err != nil {
		panic("web: reading the embedded files: " + err.Error())
	}
	return out
}

// Assets lists the embedded files, by name.
func Assets() []Asset {
	var out []Asset
	for _, a := range assets {
		out = append(out, Asset{Name: a.name, Bytes: len(a.body), GzipBytes: len(a.gz), ContentTyp: a.ctype})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Handler serves the embedded files under Prefix; Prefix itself, "/ui"
// and "/" are index.html. Every answer carries ContentSecurityPolicy and headers that
// forbid sniffing, framing and referrers; files are revalidated on each
// load (ETag) and sent gzip-compressed to clients that accept it. A name
// that is not a file goes to notFound (the API's problem answer).
func Handler(notFound http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if r.URL.Path == "/" || r.URL.Path == "/ui" || name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("Vary", "Accept-Encoding")
		if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		body := a.body
		if a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			body = a.gz
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

func acceptsGzip(v string) bool {
	for _, part := range strings.Split(v, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
