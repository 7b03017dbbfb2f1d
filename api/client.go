package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client is a typed client of the coordinator's /v1 API.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client for the coordinator at base (e.g.
// "http://127.0.0.1:7080"). A nil httpClient means a default with no global
// timeout; long polls pass their own deadlines through the context.
func NewClient(base string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	return &Client{base: strings.TrimRight(base, "/"), http: httpClient}
}

// Base returns the coordinator address the client talks to.
func (c *Client) Base() string { return c.base }

// Do sends a JSON request and decodes a JSON answer into out (when non-nil).
// A non-2xx answer comes back as a *Problem error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		p := &Problem{Status: resp.StatusCode}
		if json.Unmarshal(data, p) != nil || p.Type == "" {
			p.Type = ProblemTypeBase + ProblemInternal
			p.Detail = strings.TrimSpace(string(data))
		}
		return resp.StatusCode, p
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// IsProblem reports whether err is a Problem with the given type suffix.
func IsProblem(err error, suffix string) bool {
	var p *Problem
	return errors.As(err, &p) && p.Suffix() == suffix
}

func agentPath(cluster, node string, rest string) string {
	return "/v1/agents/" + url.PathEscape(cluster) + "/" + url.PathEscape(node) + rest
}

// Register announces an agent to the coordinator.
func (c *Client) Register(ctx context.Context, r RegisterRequest) (RegisterResponse, error) {
	var out RegisterResponse
	_, err := c.Do(ctx, http.MethodPost, "/v1/agents/register", r, &out)
	return out, err
}

// Heartbeat sends the agent's health.
func (c *Client) Heartbeat(ctx context.Context, h AgentHealth) error {
	_, err := c.Do(ctx, http.MethodPost, agentPath(h.Cluster, h.Node, "/heartbeat"), h, nil)
	return err
}

// PollOperations long-polls for the node's pending operations; the
// coordinator answers at once when some are pending, otherwise after up to
// wait with an empty list.
func (c *Client) PollOperations(ctx context.Context, cluster, node string, wait time.Duration) ([]Operation, error) {
	var out OperationsResponse
	p := agentPath(cluster, node, "/operations") + "?wait=" + url.QueryEscape(wait.String())
	_, err := c.Do(ctx, http.MethodGet, p, nil, &out)
	return out.Operations, err
}

// ReportResult reports an operation's progress or outcome.
func (c *Client) ReportResult(ctx context.Context, cluster, node string, r OperationResult) error {
	_, err := c.Do(ctx, http.MethodPost, agentPath(cluster, node, "/results"), r, nil)
	return err
}
