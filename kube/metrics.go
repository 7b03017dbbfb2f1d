package kube

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/moltproject/molt/preflight"
)

// deprecatedAPIsMetric is the API server's gauge of deprecated APIs that
// clients requested since it started, one series (value 1) per
// group/version/resource/subresource, with the release that removes it.
const deprecatedAPIsMetric = "apiserver_requested_deprecated_apis"

// DeprecatedAPIs reads the API server's /metrics and returns the
// deprecated APIs it has served since it started, ordered by
// group/version/resource/subresource. Reading /metrics needs the
// nonResourceURL permission (cluster-admin has it).
func (c *Client) DeprecatedAPIs(ctx context.Context) ([]preflight.DeprecatedAPI, error) {
	body, err := c.cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, apiErr("metrics", err)
	}
	return ParseDeprecatedAPIs(body)
}

// ParseDeprecatedAPIs reads apiserver_requested_deprecated_apis from the
// Prometheus text exposition of an API server's /metrics.
func ParseDeprecatedAPIs(body []byte) ([]preflight.DeprecatedAPI, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	var out []preflight.DeprecatedAPI
	fam, ok := fams[deprecatedAPIsMetric]
	if !ok {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		if m.GetGauge().GetValue() == 0 {
			continue
		}
		var a preflight.DeprecatedAPI
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "group":
				a.Group = l.GetValue()
			case "version":
				a.Version = l.GetValue()
			case "resource":
				a.Resource = l.GetValue()
			case "subresource":
				a.Subresource = l.GetValue()
			case "removed_release":
				a.RemovedRelease = l.GetValue()
			}
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
