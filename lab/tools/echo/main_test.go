package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// After SIGTERM the server keeps answering for its drain delay, then exits
// cleanly: a client of a pod being evicted is not refused while the
// cluster still routes to it.
func TestKeepsServingThroughItsDrainDelay(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "echo")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	cmd := exec.Command(bin, "-listen", addr, "-drain-delay", "1s")
	cmd.Env = append(os.Environ(), "POD_NAME=echo-1", "NODE_NAME=worker-1")
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	get := func() (string, error) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	require.Eventually(t, func() bool { _, err := get(); return err == nil }, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	body, err := get()
	require.NoError(t, err, "answers right after SIGTERM")
	require.Equal(t, "pod=echo-1 node=worker-1\n", body)
	select {
	case err := <-exited:
		require.NoError(t, err, "exits cleanly after its drain delay")
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30 s after SIGTERM")
	}
	_, err = get()
	require.Error(t, err, "nothing listens once it exited")
}
