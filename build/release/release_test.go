package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// repo is the repository root, two levels above this package.
const repo = "../.."

var mtime = time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)

// standIns writes stand-in binaries (the packing does not look inside them).
func standIns(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for _, b := range []string{"molt-agent", "molt-coordinator", "moltctl"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\necho "+b+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

func build(t *testing.T, bin string) (string, []string) {
	t.Helper()
	out := t.TempDir()
	names, err := Build(Config{Version: "0.2.0", Repo: repo, Bin: bin, Out: out, MTime: mtime, Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	return out, names
}

// TestReleaseArtifacts packs a release from stand-in binaries and checks
// what `make release` promises: the versioned tarballs and packages,
// SHA256SUMS verifying every one of them, each tarball's files and modes,
// each package's metadata, files, conffile and maintainer scripts, and the
// same bytes when packed again from the same inputs.
func TestReleaseArtifacts(t *testing.T) {
	bin := standIns(t)
	out, names := build(t, bin)

	want := []string{
		"molt-agent-0.2.0-linux-amd64.tar.gz",
		"molt-agent_0.2.0_amd64.deb",
		"molt-coordinator-0.2.0-linux-amd64.tar.gz",
		"molt-coordinator_0.2.0_amd64.deb",
		"moltctl-0.2.0-linux-amd64.tar.gz",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("artifacts %v, want %v", names, want)
	}
	sums := readSums(t, out)
	if len(sums) != len(want) {
		t.Fatalf("SHA256SUMS has %d lines, want %d", len(sums), len(want))
	}
	for _, n := range want {
		if got := fileSum(t, filepath.Join(out, n)); sums[n] != got {
			t.Errorf("SHA256SUMS: %s is %q, the file's sum is %s", n, sums[n], got)
		}
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
		cmd.Dir = out
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum --check: %v\n%s", err, b)
		}
	}

	// Tarballs: one top directory named after the artifact, root-owned,
	// the daemons' with what install.sh needs beside the binary.
	agentTar := readTarGz(t, filepath.Join(out, want[0]))
	wantAgent := map[string]int64{
		"molt-agent-0.2.0-linux-amd64/":                   0o755,
		"molt-agent-0.2.0-linux-amd64/molt-agent":         0o755,
		"molt-agent-0.2.0-linux-amd64/molt-agent.service": 0o644,
		"molt-agent-0.2.0-linux-amd64/agent.env":          0o600,
		"molt-agent-0.2.0-linux-amd64/install.sh":         0o755,
		"molt-agent-0.2.0-linux-amd64/LICENSE":            0o644,
	}
	checkEntries(t, want[0], agentTar, wantAgent)
	if got, src := agentTar["molt-agent-0.2.0-linux-amd64/molt-agent"].data, readFile(t, filepath.Join(bin, "molt-agent")); got != src {
		t.Errorf("the tarball's molt-agent is not the binary given")
	}
	ctlTar := readTarGz(t, filepath.Join(out, want[4]))
	checkEntries(t, want[4], ctlTar, map[string]int64{
		"moltctl-0.2.0-linux-amd64/":        0o755,
		"moltctl-0.2.0-linux-amd64/moltctl": 0o755,
		"moltctl-0.2.0-linux-amd64/LICENSE": 0o644,
	})

	// Packages.
	for _, c := range []struct{ name, env string }{{"molt-agent", "agent.env"}, {"molt-coordinator", "coordinator.env"}} {
		members := readAr(t, filepath.Join(out, c.name+"_0.2.0_amd64.deb"))
		if members["debian-binary"] != "2.0\n" {
			t.Errorf("%s: debian-binary %q", c.name, members["debian-binary"])
		}
		control := readTarGzBytes(t, c.name+" control.tar.gz", []byte(members["control.tar.gz"]))
		fields := parseControl(control["./control"].data)
		for k, v := range map[string]string{"Package": c.name, "Version": "0.2.0", "Architecture": "amd64", "Section": "admin"} {
			if fields[k] != v {
				t.Errorf("%s: control %s = %q, want %q", c.name, k, fields[k], v)
			}
		}
		if strings.TrimSpace(control["./conffiles"].data) != "/etc/molt/"+c.env {
			t.Errorf("%s: conffiles %q, want the environment file only", c.name, control["./conffiles"].data)
		}
		for _, s := range []string{"postinst", "prerm", "postrm"} {
			if control["./"+s].data != readFile(t, filepath.Join(repo, "systemd", "deb", s)) {
				t.Errorf("%s: %s is not systemd/deb/%s", c.name, s, s)
			}
			if control["./"+s].mode != 0o755 {
				t.Errorf("%s: %s mode %o", c.name, s, control["./"+s].mode)
			}
		}
		data := readTarGzBytes(t, c.name+" data.tar.gz", []byte(members["data.tar.gz"]))
		files := map[string]int64{}
		for n, e := range data {
			if e.typ == tar.TypeReg {
				files[n] = e.mode
			}
		}
		wantFiles := map[string]int64{
			"./usr/bin/" + c.name:                         0o755,
			"./lib/systemd/system/" + c.name + ".service": 0o644,
			"./etc/molt/" + c.env:                         0o600,
			"./usr/share/doc/" + c.name + "/copyright":    0o644,
		}
		if len(files) != len(wantFiles) {
			t.Errorf("%s: files %v, want %v", c.name, files, wantFiles)
		}
		for n, m := range wantFiles {
			if got, ok := files[n]; !ok || got != m {
				t.Errorf("%s: %s mode %o (present %v), want %o", c.name, n, got, ok, m)
			}
		}
		unit := data["./lib/systemd/system/"+c.name+".service"].data
		if !strings.Contains(unit, "\nExecStart=/usr/bin/"+c.name+"\n") || strings.Contains(unit, "/usr/local/bin/") {
			t.Errorf("%s: the packaged unit does not run /usr/bin/%s:\n%s", c.name, c.name, unit)
		}
		for n, e := range data {
			if !e.mtime.Equal(mtime) || e.uname != "root" {
				t.Errorf("%s: %s: time %v owner %q, want %v root", c.name, n, e.mtime, e.uname, mtime)
			}
		}
		if _, err := exec.LookPath("dpkg-deb"); err == nil {
			// Debian's own reader agrees.
			b, err := exec.Command("dpkg-deb", "--field", filepath.Join(out, c.name+"_0.2.0_amd64.deb"), "Package", "Version").CombinedOutput()
			if err != nil || string(b) != "Package: "+c.name+"\nVersion: 0.2.0\n" {
				t.Errorf("dpkg-deb --field: %v: %q", err, b)
			}
		}
	}

	// Reproducible: packed again (elsewhere, later), the same bytes.
	out2, _ := build(t, bin)
	if a, b := readFile(t, filepath.Join(out, "SHA256SUMS")), readFile(t, filepath.Join(out2, "SHA256SUMS")); a != b {
		t.Errorf("packed twice from the same inputs, the sums differ:\n%s\n%s", a, b)
	}
}

// TestReleaseRefusesBadInput: no artifact from a "v"-prefixed version, no
// time, or a missing binary.
func TestReleaseRefusesBadInput(t *testing.T) {
	bin := standIns(t)
	for name, cfg := range map[string]Config{
		"v prefix":       {Version: "v0.2.0", MTime: mtime},
		"no mtime":       {Version: "0.2.0"},
		"missing binary": {Version: "0.2.0", MTime: mtime, Bin: t.TempDir()},
	} {
		if cfg.Bin == "" {
			cfg.Bin = bin
		}
		cfg.Repo, cfg.Out, cfg.Arch = repo, t.TempDir(), "amd64"
		if _, err := Build(cfg); !errors.Is(err, errInput) {
			t.Errorf("%s: error %v, want errInput", name, err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fileSum(t *testing.T, path string) string {
	s := sha256.Sum256([]byte(readFile(t, path)))
	return hex.EncodeToString(s[:])
}

// readSums parses SHA256SUMS: "<hex>  <name>" lines.
func readSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, filepath.Join(dir, "SHA256SUMS"))))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

type entry struct {
	typ   byte
	mode  int64
	data  string
	mtime time.Time
	uname string
}

func readTarGz(t *testing.T, path string) map[string]entry {
	t.Helper()
	return readTarGzBytes(t, path, []byte(readFile(t, path)))
}

func readTarGzBytes(t *testing.T, what string, b []byte) map[string]entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	tr := tar.NewReader(zr)
	m := map[string]entry{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return m
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		m[h.Name] = entry{typ: h.Typeflag, mode: h.Mode & 0o7777, data: string(data), mtime: h.ModTime.UTC(), uname: h.Uname}
	}
}

func checkEntries(t *testing.T, what string, got map[string]entry, want map[string]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for n, m := range want {
		e, ok := got[n]
		if !ok {
			t.Errorf("%s: no %s", what, n)
			continue
		}
		if e.mode != m || e.uname != "root" || !e.mtime.Equal(mtime) {
			t.Errorf("%s: %s mode %o owner %q time %v, want %o root %v", what, n, e.mode, e.uname, e.mtime, m, mtime)
		}
	}
}

// readAr reads an ar archive (a .deb's outer layer): "!<arch>\n", then
// per member a 60-byte header (name 16, size at 48..58) and the data,
// padded to an even length.
func readAr(t *testing.T, path string) map[string]string {
	t.Helper()
	b := []byte(readFile(t, path))
	if !bytes.HasPrefix(b, []byte("!<arch>\n")) {
		t.Fatalf("%s: not an ar archive", path)
	}
	b = b[8:]
	m := map[string]string{}
	for len(b) >= 60 {
		name := strings.TrimSuffix(strings.TrimSpace(string(b[:16])), "/")
		size, err := strconv.Atoi(strings.TrimSpace(string(b[48:58])))
		if err != nil || 60+size > len(b) {
			t.Fatalf("%s: member %q: bad size", path, name)
		}
		m[name] = string(b[60 : 60+size])
		b = b[60+size+size%2:]
	}
	return m
}

// parseControl reads a control file's "Field: value" lines (continuation
// lines, which start with a space, are skipped).
func parseControl(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok && !strings.HasPrefix(l, " ") {
			m[k] = v
		}
	}
	return m
}
