package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// imageManifests reads the pod manifests in dir and returns, for every
// manifest that has a container named in images, its content with those
// containers' images replaced. Manifests that would not change are left
// out. Host-specific settings (addresses, certificates, flags) stay as the
// host has them: only images move to the new release.
func imageManifests(dir string, images map[string]string) (map[string]string, error) {
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !validManifestName(e.Name()) || strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		content, changed, err := setImages(b, images)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", e.Name(), err)
		}
		if changed {
			out[e.Name()] = content
		}
	}
	return out, nil
}

// setImages replaces the image of every container (and init container)
// whose name is a key of images, keeping the rest of the document.
func setImages(doc []byte, images map[string]string) (string, bool, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return "", false, err
	}
	if len(root.Content) == 0 {
		return "", false, nil
	}
	spec := child(root.Content[0], "spec")
	changed := false
	for _, list := range []string{"containers", "initContainers"} {
		seq := child(spec, list)
		if seq == nil || seq.Kind != yaml.SequenceNode {
			continue
		}
		for _, c := range seq.Content {
			name, image := child(c, "name"), child(c, "image")
			if name == nil || image == nil {
				continue
			}
			if want, ok := images[name.Value]; ok && image.Value != want {
				image.Value = want
				changed = true
			}
		}
	}
	if !changed {
		return "", false, nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return "", false, err
	}
	return buf.String(), true, enc.Close()
}

// child returns the value node of key in a mapping node, or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
