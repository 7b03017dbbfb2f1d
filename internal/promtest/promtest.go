// Package promtest runs a real Prometheus server (Debian's `prometheus`)
// for tests: on a free loopback port, with its data in a temporary
// directory, scraping the targets a test gives it.
package promtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/testenv"
)

// Server is a running Prometheus.
type Server struct {
	// URL is its base URL, "http://127.0.0.1:PORT".
	URL string
}

// Start runs Prometheus scraping targets ("127.0.0.1:PORT", path
// /metrics) every interval, and stops it when the test ends. It fails the
// test under CI=true, and skips it elsewhere, when prometheus is not
// installed.
func Start(t testing.TB, interval time.Duration, targets ...string) *Server {
	t.Helper()
	bin := testenv.RequireBinary(t, "prometheus")
	dir := t.TempDir()
	var quoted []string
	for _, tg := range targets {
		quoted = append(quoted, fmt.Sprintf("%q", tg))
	}
	conf := fmt.Sprintf("global:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n  - job_name: test\n    static_configs:\n      - targets: [%s]\n",
		interval, interval, strings.Join(quoted, ", "))
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	s := &Server{URL: "http://" + addr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("prometheus at %s not ready: %v", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
