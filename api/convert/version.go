package convert

import (
	"fmt"
	"strconv"
	"time"

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

// duration parses a wire duration: "3600s" as GKE writes them, or any
// Go duration ("1h"). field names it in the error.
func (d *fromAPI) duration(field, s string) time.Duration {
	if d.err != nil {
		return 0
	}
	v, err := durationFromAPI(s)
	if err != nil {
		d.err = fmt.Errorf("%s: %w", field, err)
	}
	return v
}

func durationFromAPI(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil || v%time.Second != 0 {
		return 0, fmt.Errorf("%q is not a duration of whole seconds such as \"3600s\"", s)
	}
	return v, nil
}

// DurationToAPI writes a duration as GKE does: whole seconds with an "s"
// suffix ("3600s").
func DurationToAPI(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}
