package httpapi

import (
	"net/http"
	"time"
)

// Limits of the API's HTTP server. NewServer applies them; the member's
// binary and the tests build their servers with it, so both run with the
// same values.
const (
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request, body included: a client
	// that sends a body at one byte a second is cut off. MaxBodyBytes at
	// this rate needs about 140 KiB/s. It covers reading the request
	// only: an agent's long poll, whose answer may take up to
	// Config.MaxPoll, is unaffected (TestLongPollOutlivesTheReadTimeout).
	ReadTimeout = 60 * time.Second
	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request.
	IdleTimeout = 120 * time.Second
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
)

// NewServer returns the API's HTTP server for handler. No WriteTimeout is
// set: it would cut agents' long polls (up to Config.MaxPoll) short.
func NewServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}
