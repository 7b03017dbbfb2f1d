package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

// Config is one release: what it is called and where its inputs are.
type Config struct {
	Version string    // semver without "v", e.g. 0.2.0
	Repo    string    // the repository root: systemd/ and LICENSE are read from it
	Bin     string    // the release's binaries: molt-agent, molt-coordinator, moltctl
	Out     string    // where the artifacts and SHA256SUMS are written
	MTime   time.Time // every file's time inside the artifacts (SOURCE_DATE_EPOCH)
	Arch    string    // GOARCH of the binaries, which is also Debian's name for amd64 and arm64
}

// component is one daemon as a tarball and a package ship it.
type component struct {
	name        string // molt-agent: binary, unit, package
	env         string // agent.env, in systemd/ and in /etc/molt/
	description string
}

var components = []component{
	{"molt-agent", "agent.env", "molt host agent\n" +
		"Upgrades kubelet, containerd and static pods on its host as the molt\n" +
		"coordinator asks, one journaled operation at a time."},
	{"molt-coordinator", "coordinator.env", "molt coordinator member\n" +
		"One member of molt's Raft-replicated upgrade controller, with its REST\n" +
		"API and web view."},
}

// Paths inside the packages. The unit in systemd/ runs /usr/local/bin/NAME,
// where install.sh --binary puts it; a package installs into /usr/bin, as
// Debian policy wants, and its copy of the unit says so.
const (
	pkgBinDir  = "/usr/bin/"
	pkgUnitDir = "/lib/systemd/system/"
	scriptBin  = "/usr/local/bin/"
)

// errInput is an input the release cannot be made from.
var errInput = errors.New("release input")

// Build writes every artifact of cfg into cfg.Out, then SHA256SUMS over
// them, and returns the artifacts' names in SHA256SUMS order. The same
// inputs give the same bytes: every time inside is cfg.MTime, every owner
// root, and the order fixed.
func Build(cfg Config) ([]string, error) {
	if cfg.Version == "" || strings.HasPrefix(cfg.Version, "v") {
		return nil, fmt.Errorf("%w: version %q: semver without a leading v", errInput, cfg.Version)
	}
	if cfg.MTime.IsZero() {
		return nil, fmt.Errorf("%w: no mtime (SOURCE_DATE_EPOCH)", errInput)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "molt-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	var names []string
	for _, c := range components {
		n, err := tarball(cfg, c.name, []tarFile{
			{c.name, filepath.Join(cfg.Bin, c.name), 0o755},
			{c.name + ".service", filepath.Join(cfg.Repo, "systemd", c.name+".service"), 0o644},
			{c.env, filepath.Join(cfg.Repo, "systemd", c.env), 0o600},
			{"install.sh", filepath.Join(cfg.Repo, "systemd", "install.sh"), 0o755},
			{"LICENSE", filepath.Join(cfg.Repo, "LICENSE"), 0o644},
		})
		if err != nil {
			return nil, err
		}
		names = append(names, n)
		n, err = debPackage(cfg, c, tmp)
		if err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	n, err := tarball(cfg, "moltctl", []tarFile{
		{"moltctl", filepath.Join(cfg.Bin, "moltctl"), 0o755},
		{"LICENSE", filepath.Join(cfg.Repo, "LICENSE"), 0o644},
	})
	if err != nil {
		return nil, err
	}
	names = append(names, n)
	sort.Strings(names)
	return names, writeSums(cfg.Out, names)
}

// tarFile is one file of a tarball: its name under the top directory,
// where it is read from, its mode.
type tarFile struct {
	name, src string
	mode      int64
}

// tarball writes NAME-VERSION-linux-ARCH.tar.gz, whose files sit in a
// directory of that name.
func tarball(cfg Config, name string, fs []tarFile) (string, error) {
	base := fmt.Sprintf("%s-%s-linux-%s", name, cfg.Version, cfg.Arch)
	var buf bytes.Buffer
	// A zero gzip header: no time, no name, so the bytes depend on the content only.
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	hdr := func(name string, typ byte, mode, size int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, ModTime: cfg.MTime,
			Uname: "root", Gname: "root", Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr(base+"/", tar.TypeDir, 0o755, 0)); err != nil {
		return "", err
	}
	for _, f := range fs {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return "", fmt.Errorf("%w: %v", errInput, err)
		}
		if err := tw.WriteHeader(hdr(base+"/"+f.name, tar.TypeReg, f.mode, int64(len(b)))); err != nil {
			return "", err
		}
		if _, err := tw.Write(b); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	out := base + ".tar.gz"
	return out, writeFile(filepath.Join(cfg.Out, out), buf.Bytes())
}

// debPackage writes c's .deb: the binary, the unit, the environment file
// (a conffile, root's alone: it holds tokens), the license, and the
// maintainer scripts of systemd/deb/, which both packages share.
func debPackage(cfg Config, c component, tmp string) (string, error) {
	unit, err := os.ReadFile(filepath.Join(cfg.Repo, "systemd", c.name+".service"))
	if err != nil {
		return "", fmt.Errorf("%w: %v", errInput, err)
	}
	from, to := "ExecStart="+scriptBin+c.name, "ExecStart="+pkgBinDir+c.name
	if !bytes.Contains(unit, []byte(from+"\n")) {
		return "", fmt.Errorf("%w: %s.service: no %q line to point at the packaged binary", errInput, c.name, from)
	}
	unit = bytes.Replace(unit, []byte(from+"\n"), []byte(to+"\n"), 1)
	unitSrc := filepath.Join(tmp, c.name+".service")
	if err := os.WriteFile(unitSrc, unit, 0o644); err != nil {
		return "", err
	}
	for _, s := range []string{filepath.Join(cfg.Bin, c.name), filepath.Join(cfg.Repo, "systemd", c.env)} {
		if _, err := os.Stat(s); err != nil {
			return "", fmt.Errorf("%w: %v", errInput, err)
		}
	}
	fi := func(mode fs.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: cfg.MTime}
	}
	scripts := filepath.Join(cfg.Repo, "systemd", "deb")
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:        c.name,
		Arch:        cfg.Arch,
		Platform:    "linux",
		Version:     cfg.Version,
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "molt project <https://github.com/moltproject/molt>",
		Description: c.description,
		Homepage:    "https://github.com/moltproject/molt",
		License:     "Apache-2.0",
		MTime:       cfg.MTime,
		Overridables: nfpm.Overridables{
			Contents: files.Contents{
				{Source: filepath.Join(cfg.Bin, c.name), Destination: pkgBinDir + c.name, FileInfo: fi(0o755)},
				{Source: unitSrc, Destination: pkgUnitDir + c.name + ".service", FileInfo: fi(0o644)},
				{Source: filepath.Join(cfg.Repo, "systemd", c.env), Destination: "/etc/molt/" + c.env, Type: files.TypeConfig, FileInfo: fi(0o600)},
				{Source: filepath.Join(cfg.Repo, "LICENSE"), Destination: "/usr/share/doc/" + c.name + "/copyright", FileInfo: fi(0o644)},
			},
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(scripts, "postinst"),
				PreRemove:   filepath.Join(scripts, "prerm"),
				PostRemove:  filepath.Join(scripts, "postrm"),
			},
		},
	})
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("%s package: %w", c.name, err)
	}
	var buf bytes.Buffer
	if err := deb.Default.Package(info, &buf); err != nil {
		return "", fmt.Errorf("%s package: %w", c.name, err)
	}
	out := deb.Default.ConventionalFileName(info)
	return out, writeFile(filepath.Join(cfg.Out, out), buf.Bytes())
}

// writeSums writes SHA256SUMS in sha256sum's format, which
// `sha256sum -c SHA256SUMS` checks.
func writeSums(dir string, names []string) error {
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		s := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(s[:]), n)
	}
	return writeFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()))
}

// writeFile writes whole or not at all: a reader of Out never sees half an artifact.
func writeFile(path string, data []byte) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
