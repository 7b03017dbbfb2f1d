// Package promgate evaluates health gates (SPEC §16): PromQL expressions
// asked of a Prometheus server through its HTTP API (`/api/v1/query`,
// with the official client, github.com/prometheus/client_golang/api).
//
// A gate holds while its expression has a result: an instant vector with
// at least one series (`sum(rate(probe_failures_total[1m])) == 0` holds
// while nothing fails), or a scalar other than 0. The value a gate
// reports is the first series' sample (with its labels when there are
// several), or why it does not hold.
package promgate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// ErrQuery wraps every failure to evaluate a gate: the server could not be
// reached, refused the expression, or answered with a range or a string.
var ErrQuery = errors.New("promgate: query failed")

// Result is one evaluation of a gate.
type Result struct {
	// Holds reports whether the expression had a result.
	Holds bool
	// Value is the first sample's value, with its labels when the result
	// has several series ("0.25 {probe=\"service\"} (+1 more)"), or "no
	// result" when the expression does not hold.
	Value string
}

// Client asks Prometheus servers, one API client per base URL.
type Client struct {
	rt      http.RoundTripper
	timeout time.Duration
	mu      sync.Mutex
	apis    map[string]v1.API
}

// DefaultTimeout bounds one query.
const DefaultTimeout = 10 * time.Second

// New returns a client that sends its queries through rt (nil:
// http.DefaultTransport), each bounded by timeout (0: DefaultTimeout).
func New(rt http.RoundTripper, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{rt: rt, timeout: timeout, apis: map[string]v1.API{}}
}

func (c *Client) api(base string) (v1.API, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.apis[base]; ok {
		return a, nil
	}
	cl, err := api.NewClient(api.Config{Address: base, RoundTripper: c.rt})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrQuery, base, err)
	}
	a := v1.NewAPI(cl)
	c.apis[base] = a
	return a, nil
}

// Query evaluates expr now (the server's time) on the Prometheus at base.
func (c *Client) Query(ctx context.Context, base, expr string) (Result, error) {
	a, err := c.api(base)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, _, _, err := a.Query(ctx, expr, time.Time{})
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrQuery, err)
	}
	return Judge(v)
}

// Judge says whether a query's value holds, and the value to report.
func Judge(v model.Value) (Result, error) {
	switch v := v.(type) {
	case model.Vector:
		if len(v) == 0 {
			return Result{Value: "no result"}, nil
		}
		s := v[0]
		val := formatValue(s.Value)
		if len(v) > 1 {
			val += " " + s.Metric.String() + fmt.Sprintf(" (+%d more)", len(v)-1)
		}
		return Result{Holds: true, Value: val}, nil
	case *model.Scalar:
		return Result{Holds: v.Value != 0, Value: formatValue(v.Value)}, nil
	case nil:
		return Result{}, fmt.Errorf("%w: empty answer", ErrQuery)
	}
	return Result{}, fmt.Errorf("%w: a %s result; a gate needs an instant vector or a scalar", ErrQuery, v.Type())
}

func formatValue(v model.SampleValue) string {
	return strconv.FormatFloat(float64(v), 'g', 6, 64)
}
