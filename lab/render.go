package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Render writes, for every host of the topology, the files `up` would put
// into it, as a tree under dir/<host>/root/, plus dir/<host>/images (one
// image tarball name per line) and dir/<host>/role. vagrant/provision.sh
// copies that tree into a VM, so the VM lab and the nspawn lab share one
// definition of a host. The PKI is created in the state dir if missing.
func (l *Lab) Render(dir string) error {
	c := l.cfg
	pki, err := EnsurePKI(c.StateDir, l.pkiSpec())
	if err != nil {
		return err
	}
	for _, spec := range c.Topology.Hosts {
		files, err := hostFiles(hostInputs{spec: spec, topo: c.Topology, version: c.Version, pki: pki})
		if err != nil {
			return err
		}
		base := filepath.Join(dir, spec.Name)
		if err := os.RemoveAll(base); err != nil {
			return fmt.Errorf("%w: %v", ErrHost, err)
		}
		for path, f := range files {
			full := filepath.Join(base, "root", path)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return fmt.Errorf("%w: %v", ErrHost, err)
			}
			if err := os.WriteFile(full, f.data, f.mode); err != nil {
				return fmt.Errorf("%w: %v", ErrHost, err)
			}
		}
		var names []string
		for _, ref := range imagesFor(spec.Role, c.Version) {
			names = append(names, imageFileName(ref))
		}
		if err := os.WriteFile(filepath.Join(base, "images"), []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("%w: %v", ErrHost, err)
		}
		if err := os.WriteFile(filepath.Join(base, "role"), []byte(string(spec.Role)+"\n"), 0o644); err != nil {
			return fmt.Errorf("%w: %v", ErrHost, err)
		}
	}
	return nil
}
