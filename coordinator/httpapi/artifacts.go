package httpapi

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/moltproject/molt/coordinator"
)

// Artifacts serves the regular files under dir read-only at
// /artifacts/<name>: kubelet and containerd binaries and image archives a
// release catalog points at, for sites whose hosts cannot reach the
// internet. No directory is listed and nothing outside dir is reachable.
func Artifacts(dir string) http.Handler {
	root, err := os.OpenRoot(dir)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/artifacts/")
		if err != nil || name == "" || strings.HasSuffix(name, "/") {
			writeProblem(w, r, fmt.Errorf("artifact %q: %w", name, coordinator.ErrNotFound))
			return
		}
		f, ferr := root.Open(name)
		if ferr != nil {
			writeProblem(w, r, fmt.Errorf("artifact %q: %w", name, coordinator.ErrNotFound))
			return
		}
		defer f.Close()
		st, serr := f.Stat()
		if serr != nil || !st.Mode().IsRegular() {
			writeProblem(w, r, fmt.Errorf("artifact %q: %w", name, coordinator.ErrNotFound))
			return
		}
		http.ServeContent(w, r, name, st.ModTime(), f)
	})
}
