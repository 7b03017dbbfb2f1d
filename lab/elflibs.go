package lab

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// libDirs are where Debian keeps shared libraries, searched in order.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

// binaryWithLibs lists the files a dynamically linked binary of the Debian
// tree rootfs needs in an otherwise empty image: itself, its ELF
// interpreter and every shared library it needs, transitively, each at the
// path the loader looks for (symlinks resolved to their targets' bytes).
// It reads ELF headers only, so nothing of rootfs runs on this machine.
func binaryWithLibs(rootfs, bin string) ([]ImageFile, error) {
	src, err := inRoot(rootfs, bin)
	if err != nil {
		return nil, err
	}
	files := []ImageFile{{Src: src, Path: bin}}
	seen := map[string]bool{bin: true}
	for i := 0; i < len(files); i++ {
		f, err := elf.Open(files[i].Src)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrImage, files[i].Path, err)
		}
		needed, err := f.ImportedLibraries()
		interp := interpreter(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrImage, files[i].Path, err)
		}
		if interp != "" && !seen[interp] {
			seen[interp] = true
			src, err := inRoot(rootfs, interp)
			if err != nil {
				return nil, err
			}
			files = append(files, ImageFile{Src: src, Path: interp})
		}
		for _, lib := range needed {
			p, src, ok := findLib(rootfs, lib)
			if !ok {
				return nil, fmt.Errorf("%w: %s needs %s, not found in %s under %v", ErrImage, files[i].Path, lib, rootfs, libDirs)
			}
			if !seen[p] {
				seen[p] = true
				files = append(files, ImageFile{Src: src, Path: p})
			}
		}
	}
	return files, nil
}

// interpreter is the PT_INTERP path of f ("" for a static binary).
func interpreter(f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return ""
		}
		for len(b) > 0 && b[len(b)-1] == 0 {
			b = b[:len(b)-1]
		}
		return string(b)
	}
	return ""
}

// findLib returns the loader's path of soname and the file on this machine
// that holds it.
func findLib(rootfs, soname string) (string, string, bool) {
	for _, d := range libDirs {
		p := path.Join(d, soname)
		if src, err := inRoot(rootfs, p); err == nil {
			return p, src, true
		}
	}
	return "", "", false
}

// inRoot resolves p inside the tree rootfs as that tree's own loader would:
// every symlink on the way (Debian's /lib → usr/lib, absolute links such as
// /lib64/ld-linux-x86-64.so.2) is followed relative to rootfs, never to
// this machine's root. It returns the regular file's path on this machine.
func inRoot(rootfs, p string) (string, error) {
	cur := "/"
	rest := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	for hops := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		next := path.Join(cur, name)
		fi, err := os.Lstat(filepath.Join(rootfs, next))
		if err != nil {
			return "", fmt.Errorf("%w: %s in %s: %v", ErrImage, p, rootfs, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%w: %s in %s: too many symlinks", ErrImage, p, rootfs)
		}
		target, err := os.Readlink(filepath.Join(rootfs, next))
		if err != nil {
			return "", fmt.Errorf("%w: %s in %s: %v", ErrImage, p, rootfs, err)
		}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		rest = append(strings.Split(strings.TrimPrefix(path.Clean(target), "/"), "/"), rest...)
		cur = "/"
	}
	full := filepath.Join(rootfs, cur)
	if fi, err := os.Stat(full); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s in %s is not a regular file", ErrImage, p, rootfs)
	}
	return full, nil
}
