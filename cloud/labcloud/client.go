package labcloud

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/moltproject/molt/cloud"
)

// Name is the adapter's name in a cluster's cloud spec.
const Name = "lab"

// Config says where the lab's cloud service is.
type Config struct {
	// Endpoint is the service's base URL ("http://127.0.0.1:41234"): the
	// address the lab driver printed, reachable from the lab's network
	// namespace, where the coordinator members run.
	Endpoint string
	// HTTPClient, if set, sends the calls (a test outside the namespace
	// dials into it). Its Timeout is replaced by Timeout.
	HTTPClient *http.Client
	// Timeout bounds one call (default cloud.DefaultOperationTimeout: a
	// call that deletes a group waits for its hosts to stop).
	Timeout time.Duration
}

// Client is the cloud.Provider of the lab's instance groups, over HTTP.
// Failures to reach the service or to get an answer from it (refused
// connections, 5xx without a body, deadlines) wrap cloud.ErrTransient, so
// the caller repeats the call with the same req, which the service
// recognises.
type Client struct {
	base string
	hc   *http.Client
}

var _ cloud.Provider = (*Client)(nil)

// New returns a client of the service at cfg.Endpoint. It does not dial.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("lab cloud endpoint %q: want http://HOST:PORT, the address the lab driver serves its instance groups on: %w", cfg.Endpoint, cloud.ErrInvalid)
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	hc.Timeout = cfg.Timeout
	if hc.Timeout == 0 {
		hc.Timeout = cloud.DefaultOperationTimeout
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), hc: hc}, nil
}

// Name implements cloud.Provider.
func (c *Client) Name() string { return Name }

// do sends one call and decodes its result; an error the service reported
// comes back wrapping its sentinel.
func (c *Client) do(ctx context.Context, method string, body call) (result, error) {
	var res result
	b, err := json.Marshal(body)
	if err != nil {
		return res, fmt.Errorf("lab %s: %v: %w", method, err, cloud.ErrInvalid)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/"+method, bytes.NewReader(b))
	if err != nil {
		return res, fmt.Errorf("lab %s: %v: %w", method, err, cloud.ErrInvalid)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("lab %s: %v: %w", method, err, cloud.ErrTransient)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("lab %s: reading the answer: %v: %w", method, err, cloud.ErrTransient)
	}
	if err := json.Unmarshal(raw, &res); err != nil || (resp.StatusCode != http.StatusOK && res.Error == nil) {
		// Not the service's answer (a proxy, a crash mid-answer).
		sentinel := cloud.ErrTransient
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusOK {
			sentinel = cloud.ErrInvalid
		}
		return result{}, fmt.Errorf("lab %s: HTTP %d: %q: %w", method, resp.StatusCode, truncate(raw), sentinel)
	}
	if res.Error != nil {
		return result{}, fromBody(res.Error)
	}
	return res, nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// EnsureTemplate implements cloud.Provider.
func (c *Client) EnsureTemplate(ctx context.Context, spec cloud.TemplateSpec, req string) (string, error) {
	res, err := c.do(ctx, mEnsureTemplate, call{Release: spec.Release, Base: spec.Base, Req: req})
	return res.Template, err
}

// GetGroup implements cloud.Provider.
func (c *Client) GetGroup(ctx context.Context, g cloud.GroupRef) (cloud.Group, error) {
	res, err := c.do(ctx, mGetGroup, call{Zone: g.Zone, Group: g.Name})
	if err != nil {
		return cloud.Group{}, err
	}
	if res.Group == nil {
		return cloud.Group{}, fmt.Errorf("lab getGroup %s: no group in the answer: %w", g, cloud.ErrTransient)
	}
	return fromGroup(res.Group), nil
}

// CreateGroup implements cloud.Provider.
func (c *Client) CreateGroup(ctx context.Context, g cloud.GroupRef, template string, size int, req string) error {
	_, err := c.do(ctx, mCreateGroup, call{Zone: g.Zone, Group: g.Name, Template: template, Size: size, Req: req})
	return err
}

// DeleteGroup implements cloud.Provider.
func (c *Client) DeleteGroup(ctx context.Context, g cloud.GroupRef, req string) error {
	_, err := c.do(ctx, mDeleteGroup, call{Zone: g.Zone, Group: g.Name, Req: req})
	return err
}

// SetTemplate implements cloud.Provider.
func (c *Client) SetTemplate(ctx context.Context, g cloud.GroupRef, template string, req string) error {
	_, err := c.do(ctx, mSetTemplate, call{Zone: g.Zone, Group: g.Name, Template: template, Req: req})
	return err
}

// Resize implements cloud.Provider.
func (c *Client) Resize(ctx context.Context, g cloud.GroupRef, size int, req string) error {
	_, err := c.do(ctx, mResize, call{Zone: g.Zone, Group: g.Name, Size: size, Req: req})
	return err
}

// SetAutoscaling implements cloud.Provider.
func (c *Client) SetAutoscaling(ctx context.Context, g cloud.GroupRef, a cloud.Autoscaling, req string) error {
	_, err := c.do(ctx, mSetAutoscaling, call{Zone: g.Zone, Group: g.Name, Autoscaling: &autoscaling{Min: a.Min, Max: a.Max}, Req: req})
	return err
}

// ListInstances implements cloud.Provider.
func (c *Client) ListInstances(ctx context.Context, g cloud.GroupRef) ([]cloud.Instance, error) {
	res, err := c.do(ctx, mListInstances, call{Zone: g.Zone, Group: g.Name})
	if err != nil {
		return nil, err
	}
	return fromInstances(res.Instances), nil
}

// CreateInstances implements cloud.Provider.
func (c *Client) CreateInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	_, err := c.do(ctx, mCreateInstances, call{Zone: g.Zone, Group: g.Name, Names: names, Req: req})
	return err
}

// DeleteInstances implements cloud.Provider.
func (c *Client) DeleteInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	_, err := c.do(ctx, mDeleteInstances, call{Zone: g.Zone, Group: g.Name, Names: names, Req: req})
	return err
}

// RecreateInstances implements cloud.Provider.
func (c *Client) RecreateInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	_, err := c.do(ctx, mRecreateInstances, call{Zone: g.Zone, Group: g.Name, Names: names, Req: req})
	return err
}

// Quota implements cloud.Provider.
func (c *Client) Quota(ctx context.Context, zone string) (cloud.Quota, error) {
	res, err := c.do(ctx, mQuota, call{Zone: zone})
	if err != nil {
		return cloud.Quota{}, err
	}
	if res.Quota == nil {
		return cloud.Quota{}, fmt.Errorf("lab quota %s: no quota in the answer: %w", zone, cloud.ErrTransient)
	}
	return cloud.Quota{Limit: res.Quota.Limit, Usage: res.Quota.Usage}, nil
}
