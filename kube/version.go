package kube

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/version"
)

// ServerVersion is the API server's git version, e.g. "v1.34.4".
func (c *Client) ServerVersion(ctx context.Context) (string, error) {
	b, err := c.cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return "", apiErr("version", err)
	}
	var v version.Info
	if err := json.Unmarshal(b, &v); err != nil {
		return "", apiErr("version", fmt.Errorf("decode %q: %w", b, err))
	}
	return v.GitVersion, nil
}
