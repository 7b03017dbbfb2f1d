package lab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/nspawn"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/stretchr/testify/require"
)

// kube-proxy's image holds nft from the hosts' rootfs with the libraries
// it loads and /etc/protocols, and nothing else of Debian: laid out as the
// image lays it out, that nft runs (chrooted, in a network namespace of
// its own), loads a table of the kind kube-proxy writes and lists it back
// as kube-proxy reads it.
func TestKubeProxyImageRunsItsNft(t *testing.T) {
	testenv.RequireRoot(t)
	for _, b := range []string{"debootstrap", "chroot", "unshare"} {
		testenv.RequireBinary(t, b)
	}
	rootfs, err := nspawn.EnsureRootfs(context.Background(), cachedir.Lab())
	require.NoError(t, err)
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "kube-proxy"), []byte("stand-in"), 0o755))

	spec, err := kubeProxyImageSpec("1.34.4", bin, rootfs)
	require.NoError(t, err)
	require.Equal(t, "registry.k8s.io/kube-proxy:v1.34.4", spec.Ref)
	require.Contains(t, spec.Env[0], "/usr/sbin", "knftables finds nft on PATH")
	var paths []string
	for _, f := range spec.Files {
		paths = append(paths, f.Path)
	}
	require.Equal(t, []string{kubeProxyBinary, nftBinary}, paths[:2])
	require.Contains(t, strings.Join(paths, " "), "/libnftables.so.1")
	require.Contains(t, strings.Join(paths, " "), "/lib64/ld-linux-x86-64.so.2")
	require.Contains(t, paths, "/etc/protocols")

	tree := t.TempDir()
	for _, f := range spec.Files {
		b, err := os.ReadFile(f.Src)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(tree, filepath.Dir(f.Path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(tree, f.Path), b, 0o755))
	}
	out, err := exec.Command("chroot", tree, nftBinary, "--version").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "nftables v1.")

	// kube-proxy's table in miniature: loaded, then read back as kube-proxy
	// reads it at start (knftables: nft --json list map), in a network
	// namespace of its own. The key must come back as kube-proxy writes it,
	// protocol by name, or a restarted kube-proxy deletes every Service's
	// element (kubeProxyImageSpec).
	rules := "table ip kube-proxy {\n  chain svc {\n  }\n" +
		"  map service-ips {\n    type ipv4_addr . inet_proto . inet_service : verdict\n    elements = { 10.96.0.1 . tcp . 443 : goto svc }\n  }\n" +
		"  chain services {\n    ip daddr . meta l4proto . th dport vmap @service-ips\n  }\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(tree, "rules.nft"), []byte(rules), 0o644))
	script := `chroot "$1" ` + nftBinary + ` -f /rules.nft && chroot "$1" ` + nftBinary + ` --json list map ip kube-proxy service-ips`
	out, err = exec.Command("unshare", "--net", "sh", "-c", script, "sh", tree).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), `{"concat": ["10.96.0.1", "tcp", 443]}`)
}
