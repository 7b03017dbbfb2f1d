package cloud

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxName is the longest name a group, instance or template may have (a
// DNS label, as GCE resource names and hostnames are).
const maxName = 63

// TemplateName is the name of the instance template for spec, derived from
// its content: "molt-", the release with every character other than a
// lower-case letter or digit made a '-', and eight hex digits of a hash of
// the release and the base template's name ("molt-1-34-4-3f2a9c01"). A base
// template never changes under its name (providers keep templates
// immutable), so equal names mean equal templates.
func TemplateName(spec TemplateSpec) string {
	sum := sha256.Sum256([]byte("molt-template\x00" + spec.Release + "\x00" + spec.Base))
	suffix := "-" + hex.EncodeToString(sum[:4])
	release := label(strings.ToLower(spec.Release))
	if n := maxName - len("molt-") - len(suffix); len(release) > n {
		release = strings.TrimRight(release[:n], "-")
	}
	if release == "" {
		return "molt" + suffix
	}
	return "molt-" + release + suffix
}

// label turns s into lower-case letters, digits and single '-', without a
// leading or trailing '-'.
func label(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}
