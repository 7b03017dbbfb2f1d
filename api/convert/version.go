package convert

import (
	"fmt"

	"github.com/moltproject/molt/phases"
)

// fromAPI collects the first error of a FromAPI conversion, so that the
// converters read as field lists rather than error checks.
type fromAPI struct{ err error }

// version parses a wire version; "" is the zero version. field names the
// version in the error.
func (d *fromAPI) version(field, s string) phases.Version {
	if s == "" || d.err != nil {
		return phases.Version{}
	}
	v, err := phases.ParseVersion(s)
	if err != nil {
		d.err = fmt.Errorf("%s: %w", field, err)
	}
	return v
}
