package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/moltproject/molt/api"
)

// Backups lists a cluster's recorded etcd backups, newest first.
func (c *Client) Backups(ctx context.Context, cluster string) (api.BackupList, error) {
	var out api.BackupList
	_, err := c.Do(ctx, http.MethodGet, "/v1/clusters/"+url.PathEscape(cluster)+"/backups", nil, &out)
	return out, err
}

// UploadBackup streams the etcd snapshot of backup operation op, desc
// describing it (its size and sha256 are checked by the coordinator as it
// writes), and returns the coordinator's record. open gives the bytes from
// their start; it is called again for each endpoint tried. The upload is
// repeatable: the coordinator records one backup per operation.
func (c *Client) UploadBackup(ctx context.Context, cluster, node, op string, desc api.Backup, open func() (io.ReadCloser, error)) (api.Backup, error) {
	head, err := json.Marshal(desc)
	if err != nil {
		return api.Backup{}, err
	}
	path := agentPath(cluster, node, "/backups") + "?operation=" + url.QueryEscape(op)
	var errs []string
	for i := range c.endpoints {
		base := c.endpoints[(int(c.current.Load())+i)%len(c.endpoints)]
		out, next, err := c.uploadOnce(ctx, base+path, string(head), desc.Size, open)
		if err == nil || !next || ctx.Err() != nil {
			return out, err
		}
		errs = append(errs, base+": "+err.Error())
	}
	return api.Backup{}, fmt.Errorf("upload backup %s: no coordinator endpoint took it: %s", op, strings.Join(errs, "; "))
}

// uploadOnce sends the snapshot to one endpoint; next reports a failure
// another member may not have (unreachable, unavailable).
func (c *Client) uploadOnce(ctx context.Context, u, head string, size int64, open func() (io.ReadCloser, error)) (api.Backup, bool, error) {
	body, err := open()
	if err != nil {
		return api.Backup{}, false, err
	}
	defer body.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return api.Backup{}, false, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set(api.BackupHeader, head)
	if tok := c.bearer.Load(); tok != nil && *tok != "" {
		req.Header.Set("Authorization", "Bearer "+*tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return api.Backup{}, true, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return api.Backup{}, true, err
	}
	if resp.StatusCode >= 300 {
		p := &api.Problem{Status: resp.StatusCode}
		if json.Unmarshal(data, p) != nil || p.Type == "" {
			p.Type = api.ProblemTypeBase + api.ProblemInternal
			p.Detail = strings.TrimSpace(string(data))
		}
		unavailable := resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable
		return api.Backup{}, unavailable, p
	}
	c.observe(resp.Header)
	var out api.Backup
	if err := json.Unmarshal(data, &out); err != nil {
		return api.Backup{}, false, fmt.Errorf("decode backup record: %w", err)
	}
	return out, false, nil
}
