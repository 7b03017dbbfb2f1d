// Package nspawn boots throw-away Debian hosts with a real systemd under
// systemd-nspawn, for tests and the local lab that need real systemd, D-Bus
// and containerd without virtual machines.
//
// A host is a booted container on a shared, cached bookworm rootfs. Each
// host runs with --volatile=overlay, so its writes land in a tmpfs and vanish
// when it stops; one rootfs serves any number of hosts at once.
//
// Commands run inside a host through nsenter into its PID 1's namespaces.
// Files go in through /proc/PID/root, which is the host's own (overlay) view.
package nspawn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/moltproject/molt/internal/cachedir"
)

// Mirror is the Debian mirror debootstrap downloads from.
const Mirror = "http://deb.debian.org/debian"

// BasePackages are installed into every rootfs: enough for systemd to boot
// as PID 1, D-Bus for unit control, and what a Kubernetes node runs on —
// containerd/runc for the container runtime and the CNI plugins the lab's
// pod network uses — so a host is the Debian machine vagrant/provision.sh
// turns into a node, with nothing left for it to download; HAProxy, whose
// binary the lab's data-plane load balancer image is made of (hosts do not
// run the package's service); nftables: the lab's kube-proxy image carries
// its nft with the libraries nft loads (kube-proxy's nftables mode runs
// nft), and a host's rules can be listed from inside it; and netbase, whose
// /etc/protocols that image carries too (nft names protocols with it).
var BasePackages = []string{
	"systemd", "systemd-sysv", "dbus", "containerd", "runc", "containernetworking-plugins", "ca-certificates", "iproute2", "haproxy", "nftables", "netbase",
}

// ErrRootfs is wrapped by EnsureRootfs's errors.
var ErrRootfs = errors.New("nspawn: build rootfs")

// DefaultCacheDir is ${MOLT_CACHE:-/var/cache/molt}, the lab's own cache
// (see package cachedir), where rootfs trees are kept.
func DefaultCacheDir() string { return cachedir.Lab() }

// EnsureRootfs returns the path of a Debian bookworm minbase rootfs with
// BasePackages plus extraPackages, building it under cacheDir/rootfs/ when
// it does not exist yet. It is idempotent and safe to call from concurrent
// test processes: builders serialise on a lock file, and a rootfs becomes
// visible only by a final rename, so a half-built tree is never used.
//
// The rootfs is built in two debootstrap stages so that
// /usr/sbin/policy-rc.d (exit 101) is in place before any package's
// postinst runs: nothing starts services in the build chroot.
func EnsureRootfs(ctx context.Context, cacheDir string, extraPackages ...string) (string, error) {
	pkgs := append(slices.Clone(BasePackages), extraPackages...)
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	sum := sha256.Sum256([]byte(strings.Join(pkgs, ",")))
	base := filepath.Join(cacheDir, "rootfs")
	dir := filepath.Join(base, "bookworm-"+hex.EncodeToString(sum[:6]))
	if ok(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("%w: lock: %w", ErrRootfs, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // released on close anyway
	if ok(dir) {                                         // another process built it while we waited
		return dir, nil
	}
	tmp := dir + ".building"
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	if err := build(ctx, tmp, pkgs); err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	return dir, nil
}

// ok reports whether dir is a finished rootfs.
func ok(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "sbin", "init"))
	return err == nil
}

func build(ctx context.Context, dir string, pkgs []string) error {
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			tail := string(out)
			if len(tail) > 4000 {
				tail = tail[len(tail)-4000:]
			}
			return fmt.Errorf("%w: %s %s: %w\n%s", ErrRootfs, name, strings.Join(args, " "), err, tail)
		}
		return nil
	}
	if err := run("debootstrap", "--foreign", "--variant=minbase", "--include="+strings.Join(pkgs, ","),
		"bookworm", dir, Mirror); err != nil {
		return err
	}
	policy := filepath.Join(dir, "usr", "sbin", "policy-rc.d")
	if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	if err := run("chroot", dir, "/debootstrap/debootstrap", "--second-stage"); err != nil {
		return err
	}
	// The second stage removes the policy file again; keep it so that a
	// later apt-get in the rootfs or a host does not start services either.
	if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	// Every host sets its own name (-M); a shared /etc/hostname would
	// override it. minbase has no /etc/hosts, which resolvers expect.
	_ = os.Remove(filepath.Join(dir, "etc", "hostname"))
	if err := os.WriteFile(filepath.Join(dir, "etc", "hosts"),
		[]byte("127.0.0.1 localhost\n::1 localhost\n"), 0o644); err != nil {
		return fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	// containerd needs cgroup and snapshotter preparation that only some
	// hosts do (see MACHINE-NOTES); a host that wants it starts it itself.
	_ = os.Remove(filepath.Join(dir, "etc", "systemd", "system", "multi-user.target.wants", "containerd.service"))
	// HAProxy is there for its binary (the lab's LB image); its own
	// service would bind ports on every host.
	_ = os.Remove(filepath.Join(dir, "etc", "systemd", "system", "multi-user.target.wants", "haproxy.service"))
	_ = os.RemoveAll(filepath.Join(dir, "var", "cache", "apt", "archives"))
	return nil
}
