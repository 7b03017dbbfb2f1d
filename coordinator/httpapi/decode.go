package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
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

// checkMediaType accepts a body sent as application/json, with no
// parameter or with charset=utf-8 (any case): JSON is UTF-8 (RFC 8259),
// and a body declared as anything else, or not declared at all, would be
// read as something its sender did not mean.
func checkMediaType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return fmt.Errorf("%w: no Content-Type; send the body as application/json", errMediaType)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("%w: %q, want application/json", errMediaType, ct)
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return fmt.Errorf("%w: %q, want application/json with no parameter but charset=utf-8", errMediaType, ct)
		}
	}
	return nil
}

// decode reads exactly one JSON object into v, refusing other media types
// (checkMediaType), unknown fields, a null body (it would decode as an
// empty object: a request that means nothing must not act as one that
// clears every field), trailing data and bodies over MaxBodyBytes.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if err := checkMediaType(r); err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeBytes(body, v)
}

// decodeNone serves the routes whose request has no parameters: no body
// at all, or an empty object ({}, as the web view sends) under decode's
// rules. Anything else is refused rather than ignored, so a caller who
// thinks it passed an option learns that it did not.
func decodeNone(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := checkMediaType(r); err != nil {
		return err
	}
	return decodeBytes(body, &struct{}{})
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, MaxBodyBytes)
		}
		return nil, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return body, nil
}

func decodeBytes(body []byte, v any) error {
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return fmt.Errorf("%w: the body is null; send a JSON object", errBadRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
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
