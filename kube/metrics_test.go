package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

func TestParseDeprecatedAPIs(t *testing.T) {
	body := []byte(`# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="networking.k8s.io",removed_release="1.37",resource="servicecidrs",subresource="",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="",removed_release="",resource="componentstatuses",subresource="",version="v1"} 1
# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET"} 42
`)
	got, err := kube.ParseDeprecatedAPIs(body)
	require.NoError(t, err)
	require.Equal(t, []preflight.DeprecatedAPI{
		{Group: "networking.k8s.io", Version: "v1beta1", Resource: "servicecidrs", RemovedRelease: "1.37"},
		{Version: "v1", Resource: "componentstatuses"},
	}, got)
	got, err = kube.ParseDeprecatedAPIs([]byte("apiserver_request_total 1\n"))
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = kube.ParseDeprecatedAPIs([]byte("not { the text format\n"))
	require.Error(t, err)
}

// TestDeprecatedAPIsFromTheAPIServer requests an API the real API server
// serves as deprecated (networking.k8s.io/v1beta1, removed in 1.37, which
// kubetest enables) and reads it back from the server's own metric; then
// runs preflight's deprecated-apis check on what it read.
func TestDeprecatedAPIsFromTheAPIServer(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	_, err := cp.Clientset.Discovery().RESTClient().Get().AbsPath("/apis/networking.k8s.io/v1beta1/servicecidrs").DoRaw(ctx)
	require.NoError(t, err)

	c := kube.New(kube.DefaultConfig(), cp.Clientset)
	want := preflight.DeprecatedAPI{Group: "networking.k8s.io", Version: "v1beta1", Resource: "servicecidrs", RemovedRelease: "1.37"}
	var apis []preflight.DeprecatedAPI
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		apis, err = c.DeprecatedAPIs(ctx)
		require.NoError(t, err)
		if containsAPI(apis, want) {
			break
		}
		require.False(t, time.Now().After(deadline), "the metric never showed %v: %v", want, apis)
		<-tick.C
	}

	in := preflight.Input{Current: phases.MustParseVersion("1.36.2"), Target: phases.MustParseVersion("1.37.0")}
	preflight.GatherCluster(ctx, kube.NewPreflightReader(c), &in)
	require.Empty(t, in.Gathered[preflight.SourceDeprecatedAPIs])

	check := func(in preflight.Input) preflight.Result {
		rep, err := preflight.RunOnly(in, preflight.IDDeprecatedAPIs)
		require.NoError(t, err)
		return rep.Results[0]
	}
	manual := check(in)
	require.Equal(t, preflight.Fail, manual.Status)
	require.Contains(t, manual.Message, "networking.k8s.io/v1beta1/servicecidrs")
	require.False(t, manual.Blocks, "a manual minor upgrade is warned")
	in.Automatic = true
	automatic := check(in)
	require.True(t, automatic.Blocks, "an automatic minor upgrade is blocked")
	in.Current, in.Target = phases.MustParseVersion("1.34.4"), phases.MustParseVersion("1.35.0")
	require.Equal(t, preflight.Pass, check(in).Status, "1.35 still serves it")
}

func containsAPI(apis []preflight.DeprecatedAPI, want preflight.DeprecatedAPI) bool {
	for _, a := range apis {
		if a == want {
			return true
		}
	}
	return false
}
