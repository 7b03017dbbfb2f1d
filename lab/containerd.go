package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// BuiltContainerdVersion is the containerd daemon build/containerd builds
// from containerd's Go module. The lab's hosts boot Debian's 1.6 (the
// rootfs's /usr/bin/containerd); releases from BuiltContainerdFromMinor on
// ship this one, so the lab's minor upgrade really replaces containerd on
// every host (its runc shim and runc stay Debian's).
const BuiltContainerdVersion = "1.7.35"

// BuiltContainerdFromMinor is the first Kubernetes minor whose lab release
// ships BuiltContainerdVersion.
const BuiltContainerdFromMinor = 34

// containerdFor names the containerd binary the lab release version ships
// and whether it is the built one (false: Debian's, in the rootfs).
func containerdFor(buildCache, rootfs, version string) (path string, built bool, err error) {
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if len(parts) != 3 {
		return "", false, fmt.Errorf("%w: version %q is not X.Y.Z", ErrMissing, version)
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil {
		return "", false, fmt.Errorf("%w: version %q is not X.Y.Z", ErrMissing, version)
	}
	if minor < BuiltContainerdFromMinor {
		return filepath.Join(rootfs, "usr", "bin", "containerd"), false, nil
	}
	p := filepath.Join(buildCache, "containerd", "v"+BuiltContainerdVersion, "bin", "containerd")
	if !exists(p) {
		return "", false, fmt.Errorf("%w: %s (build it: build/containerd/build.sh %s, or make deps)", ErrMissing, p, BuiltContainerdVersion)
	}
	return p, true, nil
}

// ContainerdVersions asks every host's containerd for its version through
// its API (`ctr version`'s Server section), by host name.
func (l *Lab) ContainerdVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, h := range l.cfg.Topology.Hosts {
		v, err := l.ContainerdVersion(ctx, h.Name)
		if err != nil {
			return nil, err
		}
		out[h.Name] = v
	}
	return out, nil
}

// ContainerdVersion asks one host's containerd (a host of the topology or
// an instance of the lab's groups) for its version through its API.
func (l *Lab) ContainerdVersion(ctx context.Context, host string) (string, error) {
	b, err := l.Exec(ctx, host, "ctr", "version")
	if err != nil {
		return "", fmt.Errorf("%w: %s: ctr version: %v", ErrNotReady, host, err)
	}
	v, ok := serverVersion(string(b))
	if !ok {
		return "", fmt.Errorf("%w: %s: no server version in %q", ErrNotReady, host, b)
	}
	return v, nil
}

// serverVersion reads the Version line of the Server section of
// `ctr version` output.
func serverVersion(out string) (string, bool) {
	server := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == "Server:":
			server = true
		case server && len(f) == 2 && f[0] == "Version:":
			return f[1], true
		}
	}
	return "", false
}
