package browsertest

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/testenv"
)

// newBrowser starts headless Chromium (Debian's chromium package) that
// trusts exactly the member's certificate, and returns its context. Under
// CI=true a missing chromium fails the test.
func newBrowser(t testing.TB, m *member) context.Context {
	t.Helper()
	path := requireChromium(t)
	leaf, err := x509.ParseCertificate(m.cert.Certificate[0])
	require.NoError(t, err)
	pin := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(pin[:])),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	require.NoError(t, chromedp.Do(bctx), "start chromium")
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return bctx
}

// requireChromium returns the path of Debian's chromium: a test calls it
// first, so that a machine without it fails (CI=true) or skips at once.
func requireChromium(t testing.TB) string {
	t.Helper()
	return testenv.RequireBinary(t, "chromium")
}

// newTab opens a tab in a browser context of its own (its own cookies).
func newTab(t testing.TB, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	require.NoError(t, chromedp.Do(ctx))
	t.Cleanup(cancel)
	return ctx
}

// run runs actions with a deadline.
func run(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, chromedp.Do(tctx, actions...), what)
}

// waitJS polls a JavaScript expression in the page until it is true.
func waitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := chromedp.Run(tctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(45*time.Second)))
	if err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, text)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluate %s", expr)
	return v
}

// js quotes s as a JavaScript string.
func js(s string) string { b, _ := json.Marshal(s); return string(b) }

// screenshot saves the whole page as bin/web/<name>.png (CI keeps bin/).
func screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	require.NoError(t, err, "screenshot %s", name)
	dir, err := filepath.Abs(filepath.Join("..", "..", "bin", "web"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(p, png, 0o644))
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}
