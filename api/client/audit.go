package client

import (
	"context"
	"net/http"

	"github.com/moltproject/molt/api"
)

// Audit reads one page of the audit log (admin).
func (c *Client) Audit(ctx context.Context, q api.AuditQuery) (api.AuditPage, error) {
	path := "/v1/audit"
	if v := q.Values(); len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out api.AuditPage
	_, err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}
