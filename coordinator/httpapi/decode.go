package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// MaxBodyBytes bounds request bodies: a 15,000-node cluster with its
// kubeconfig fits with room to spare.
const MaxBodyBytes = 8 << 20

var (
	errBadRequest = errors.New("malformed request")
	errTooLarge   = errors.New("request body too large")
	errMediaType  = errors.New("unsupported media type")
	errNoLeader   = errors.New("no leader known")
	// errTooManyPolls refuses a long poll beyond a node's limit.
	errTooManyPolls = errors.New("too many concurrent long polls")
	// errTooManySessions refuses a web session beyond the member's limit.
	errTooManySessions = errors.New("too many web sessions")
)

// decode reads exactly one JSON value into v, refusing unknown fields,
// trailing data, other media types and bodies over MaxBodyBytes.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return fmt.Errorf("%w: %q, want application/json", errMediaType, ct)
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: over %d bytes", errTooLarge, MaxBodyBytes)
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty body", errBadRequest)
		}
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing data after the JSON body", errBadRequest)
	}
	return nil
}
