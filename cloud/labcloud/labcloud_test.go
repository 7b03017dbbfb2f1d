package labcloud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/cloudtest"
	"github.com/moltproject/molt/cloud/labcloud"
	"github.com/moltproject/molt/cloud/memory"
)

var ctx = context.Background()

// harness runs the contract through Client and Handler against the
// in-memory provider: what the transport must keep — request IDs, names,
// sentinels, LastError — the suite checks. The lab's own provider runs
// the same suite over this transport in package lab.
type harness struct{ opts memory.Options }

func (h harness) New(t *testing.T) cloudtest.Backend {
	opts := h.opts
	opts.Templates = []string{"base"}
	c := memory.New(opts)
	srv := httptest.NewServer(labcloud.Handler(c))
	t.Cleanup(srv.Close)
	return backend{c: c, url: srv.URL}
}

type backend struct {
	c   *memory.Cloud
	url string
}

// Provider is a new client each time, as a new leader builds one.
func (b backend) Provider(t *testing.T) cloud.Provider {
	p, err := labcloud.New(labcloud.Config{Endpoint: b.url})
	require.NoError(t, err)
	return p
}
func (b backend) Zone() string                                   { return "zone-a" }
func (b backend) BaseTemplate() string                           { return "base" }
func (b backend) FinishCreating(*testing.T)                      { b.c.Advance() }
func (b backend) SetQuota(_ *testing.T, zone string, limit int)  { b.c.SetQuota(zone, limit) }
func (b backend) SetStockout(_ *testing.T, zone string, on bool) { b.c.SetStockout(zone, on) }
func (b backend) TimeoutNext(*testing.T)                         { b.c.TimeoutNext() }

func TestContractOverHTTP(t *testing.T) {
	cloudtest.Run(t, harness{})
}

func TestContractOverHTTPSyncQuota(t *testing.T) {
	cloudtest.Run(t, harness{opts: memory.Options{SyncQuota: true}})
}

// The calls reach the provider as they were made: the request IDs the
// provider derives are the ones an in-process call would give, so a
// repeat over the wire is recognised as one.
func TestRequestsArriveUnchanged(t *testing.T) {
	c := memory.New(memory.Options{})
	srv := httptest.NewServer(labcloud.Handler(c))
	defer srv.Close()
	p, err := labcloud.New(labcloud.Config{Endpoint: srv.URL + "/"})
	require.NoError(t, err)
	tmpl, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "1.34.4"}, "a/template")
	require.NoError(t, err)
	g := cloud.GroupRef{Zone: "z", Name: "pool"}
	require.NoError(t, p.CreateGroup(ctx, g, tmpl, 1, "a/group"))
	require.NoError(t, p.CreateInstances(ctx, g, []string{"pool-x", "pool-y"}, "a/create"))
	require.NoError(t, p.CreateInstances(ctx, g, []string{"pool-x", "pool-y"}, "a/create"))
	require.NoError(t, p.SetAutoscaling(ctx, g, cloud.Autoscaling{Min: 3, Max: 3}, "a/pin"))
	assert.Equal(t, 1, c.Repeats("CreateInstances"))
	calls := c.Calls()
	require.Len(t, calls, 5)
	assert.Equal(t, memory.Call{Method: "CreateInstances", Group: g, Args: "names=[pool-x pool-y]", Req: "a/create"}, calls[2])
	assert.Equal(t, memory.Call{Method: "SetAutoscaling", Group: g, Args: "min=3 max=3", Req: "a/pin"}, calls[4])
	grp, err := p.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, cloud.Group{GroupRef: g, TargetSize: 3, Template: tmpl, Stable: false, Autoscaling: cloud.Autoscaling{Min: 3, Max: 3}}, grp)
}

// An instance's LastError keeps its sentinel across the wire.
func TestLastErrorKeepsItsSentinel(t *testing.T) {
	c := memory.New(memory.Options{})
	srv := httptest.NewServer(labcloud.Handler(c))
	defer srv.Close()
	p, err := labcloud.New(labcloud.Config{Endpoint: srv.URL})
	require.NoError(t, err)
	tmpl, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "1.34.4"}, "t")
	require.NoError(t, err)
	g := cloud.GroupRef{Zone: "z", Name: "pool"}
	require.NoError(t, p.CreateGroup(ctx, g, tmpl, 0, "g"))
	c.SetStockout("z", true)
	require.NoError(t, p.CreateInstances(ctx, g, []string{"pool-a"}, "c"))
	c.Advance()
	ins, err := p.ListInstances(ctx, g)
	require.NoError(t, err)
	require.Len(t, ins, 1)
	assert.Equal(t, cloud.StatusCreating, ins[0].Status)
	assert.ErrorIs(t, ins[0].LastError, cloud.ErrStockout)
	assert.NotErrorIs(t, ins[0].LastError, cloud.ErrQuota)
	assert.Contains(t, ins[0].LastError.Error(), "no capacity")
	assert.Equal(t, "memory://z/pool-a", ins[0].ProviderID)
}

// What only the transport can fail is transient; the caller's own
// cancellation is its context's error; answers that are not the service's
// say what came back.
func TestTransportErrors(t *testing.T) {
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	p, err := labcloud.New(labcloud.Config{Endpoint: "http://" + addr})
	require.NoError(t, err)
	_, err = p.GetGroup(ctx, cloud.GroupRef{Zone: "z", Name: "g"})
	assert.ErrorIs(t, err, cloud.ErrTransient, "connection refused")
	assert.True(t, cloud.Retryable(err))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = p.GetGroup(cancelled, cloud.GroupRef{Zone: "z", Name: "g"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, cloud.ErrTransient)

	for _, c := range []struct {
		status int
		body   string
		want   error
	}{
		{http.StatusBadGateway, "<html>bad gateway</html>", cloud.ErrTransient},
		{http.StatusTooManyRequests, "slow down", cloud.ErrTransient},
		{http.StatusOK, "{not json", cloud.ErrTransient},
		{http.StatusNotFound, "404 page not found", cloud.ErrInvalid},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(c.body))
		}))
		p, err := labcloud.New(labcloud.Config{Endpoint: srv.URL})
		require.NoError(t, err)
		err = p.Resize(ctx, cloud.GroupRef{Zone: "z", Name: "g"}, 1, "r")
		assert.ErrorIs(t, err, c.want, "HTTP %d %q", c.status, c.body)
		assert.Contains(t, err.Error(), fmt.Sprintf("HTTP %d", c.status), "names the status")
		srv.Close()
	}
}

// The service refuses what is not a call, naming the rule.
func TestHandlerRefusesBadCalls(t *testing.T) {
	srv := httptest.NewServer(labcloud.Handler(memory.New(memory.Options{})))
	defer srv.Close()
	for _, c := range []struct {
		method, path, body string
		status             int
		detail             string
	}{
		{http.MethodGet, "/v1/getGroup", "", http.StatusNotFound, "POST /v1/<method>"},
		{http.MethodPost, "/v2/getGroup", "{}", http.StatusNotFound, "POST /v1/<method>"},
		{http.MethodPost, "/v1/frobnicate", "{}", http.StatusBadRequest, `unknown method "frobnicate"`},
		{http.MethodPost, "/v1/getGroup", `{"zone":"z","colour":"blue"}`, http.StatusBadRequest, `unknown field "colour"`},
		{http.MethodPost, "/v1/getGroup", `[]`, http.StatusBadRequest, "call body"},
		{http.MethodPost, "/v1/getGroup", `{"zone":"z","group":"g"}`, http.StatusNotFound, "not found"},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, c.status, resp.StatusCode, "%s %s %s", c.method, c.path, c.body)
		var res struct {
			Error struct{ Kind, Message string }
		}
		require.NoError(t, json.Unmarshal(b, &res), "%s", b)
		assert.Contains(t, res.Error.Message, c.detail, "%s %s %s", c.method, c.path, c.body)
		assert.NotEmpty(t, res.Error.Kind)
	}
}

func TestNewRefusesBadEndpoints(t *testing.T) {
	for _, e := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "http://h:1/api", "://"} {
		_, err := labcloud.New(labcloud.Config{Endpoint: e})
		assert.ErrorIs(t, err, cloud.ErrInvalid, "%q", e)
	}
	p, err := labcloud.New(labcloud.Config{Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	assert.Equal(t, "lab", p.Name())
}
