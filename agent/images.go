package agent

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// importImages obtains (from the stage, or else downloads), verifies and
// imports each archive into containerd's k8s.io namespace. Importing an
// image twice is harmless, so a resumed run simply imports again.
func (r *run) importImages(ctx context.Context) (map[string]string, error) {
	a := r.a
	dir := a.dataPath("downloads")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	details := map[string]string{}
	var all []string
	for i, ar := range r.op.ImportImages.Archives {
		// Operation IDs contain slashes (upgrade/node/cursor/attempt).
		path := fmt.Sprintf("%s/%s-%d.tar", dir, strings.ReplaceAll(r.op.ID, "/", "_"), i)
		if err := a.obtain(ctx, ar.URL, ar.SHA256, path); err != nil {
			return details, err
		}
		names, err := a.runtime.ImportArchive(ctx, path)
		_ = os.Remove(path)
		if err != nil {
			return details, err
		}
		all = append(all, names...)
		details["archive."+strconv.Itoa(i)] = strings.Join(names, ",")
	}
	details["images"] = strings.Join(all, ",")
	return details, r.mark(ctx, StepImported, nil)
}

// pullImages pulls each reference through containerd.
func (r *run) pullImages(ctx context.Context) (map[string]string, error) {
	for _, ref := range r.op.PullImages.Refs {
		if err := r.a.runtime.Pull(ctx, ref); err != nil {
			return nil, err
		}
	}
	return map[string]string{"images": strings.Join(r.op.PullImages.Refs, ",")}, r.mark(ctx, StepImported, nil)
}
