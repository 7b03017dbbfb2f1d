//go:build lab

package lab

import (
	"context"
	"io"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/testenv"
)

// TestListenAndDialInNamespace: a listener made in a namespace of its own
// serves a dial made in that namespace, and is not reachable from this
// machine's namespace; the calling goroutine stays where it was.
func TestListenAndDialInNamespace(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "ip")
	const ns = "mlabt-inns"
	_ = exec.Command("ip", "netns", "delete", ns).Run()
	require.NoError(t, exec.Command("ip", "netns", "add", ns).Run())
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() })
	require.NoError(t, exec.Command("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up").Run())

	l, err := ListenInNamespace(nsPath(ns), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = c.Write([]byte("inside"))
			c.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := DialInNamespace(ctx, nsPath(ns), "tcp", l.Addr().String())
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	c.Close()
	require.NoError(t, err)
	require.Equal(t, "inside", string(got))

	// From this machine's namespace the address is another loopback's.
	if c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatalf("%s answered outside namespace %s", l.Addr(), ns)
	}
	_, err = DialInNamespace(ctx, nsPath("mlabt-missing"), "tcp", l.Addr().String())
	require.ErrorIs(t, err, ErrNetwork)
}
