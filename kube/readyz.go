package kube

import "context"

// Readyz asks the API server's /readyz?verbose, which lists every check
// (etcd among them). It returns the HTTP status and body; a non-200 status
// is an answer, not an error — only failing to get an answer is.
func (c *Client) Readyz(ctx context.Context) (int, string, error) {
	var code int
	res := c.cs.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "").Do(ctx)
	res.StatusCode(&code)
	body, err := res.Raw()
	if code != 0 {
		return code, string(body), nil
	}
	return 0, "", apiErr("readyz", err)
}
