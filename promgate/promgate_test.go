package promgate_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/promtest"
	"github.com/moltproject/molt/promgate"
)

// TestQueryRealPrometheus asks a real Prometheus, which scrapes a gauge
// the test sets, whether gates hold: green, red with "no result", the
// value reported, refusals of bad expressions and unreachable servers.
func TestQueryRealPrometheus(t *testing.T) {
	reg := prometheus.NewRegistry()
	errRate := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "probe_error_ratio"}, []string{"probe"})
	reg.MustRegister(errRate)
	errRate.WithLabelValues("service").Set(0)
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer target.Close()
	srv := promtest.Start(t, 200*time.Millisecond, target.Listener.Addr().String())
	c := promgate.New(nil, 5*time.Second)
	ctx := context.Background()

	gate := `max(probe_error_ratio) == 0`
	require.Eventually(t, func() bool {
		r, err := c.Query(ctx, srv.URL, gate)
		return err == nil && r.Holds
	}, time.Minute, 100*time.Millisecond, "the gate holds once the gauge is scraped")
	r, err := c.Query(ctx, srv.URL, gate)
	require.NoError(t, err)
	require.Equal(t, promgate.Result{Holds: true, Value: "0"}, r)

	errRate.WithLabelValues("service").Set(0.25)
	require.Eventually(t, func() bool {
		r, err = c.Query(ctx, srv.URL, gate)
		return err == nil && !r.Holds
	}, time.Minute, 100*time.Millisecond, "red once the new value is scraped")
	require.Equal(t, "no result", r.Value)
	r, err = c.Query(ctx, srv.URL, `probe_error_ratio`)
	require.NoError(t, err)
	require.Equal(t, promgate.Result{Holds: true, Value: "0.25"}, r)

	_, err = c.Query(ctx, srv.URL, `sum(`)
	require.ErrorIs(t, err, promgate.ErrQuery)
	_, err = c.Query(ctx, srv.URL, `probe_error_ratio[1m]`)
	require.ErrorIs(t, err, promgate.ErrQuery)
	require.Contains(t, err.Error(), "a matrix result")
	_, err = c.Query(ctx, "http://127.0.0.1:1", gate)
	require.ErrorIs(t, err, promgate.ErrQuery)
}

func TestJudge(t *testing.T) {
	two := model.Vector{
		{Metric: model.Metric{"probe": "lb"}, Value: 0.5},
		{Metric: model.Metric{"probe": "service"}, Value: 0},
	}
	for _, tc := range []struct {
		v    model.Value
		want promgate.Result
	}{
		{model.Vector{}, promgate.Result{Value: "no result"}},
		{model.Vector{{Value: 1e-9}}, promgate.Result{Holds: true, Value: "1e-09"}},
		{two, promgate.Result{Holds: true, Value: `0.5 {probe="lb"} (+1 more)`}},
		{&model.Scalar{Value: 0}, promgate.Result{Value: "0"}},
		{&model.Scalar{Value: 3}, promgate.Result{Holds: true, Value: "3"}},
	} {
		got, err := promgate.Judge(tc.v)
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	_, err := promgate.Judge(&model.String{Value: "x"})
	require.ErrorIs(t, err, promgate.ErrQuery)
}
