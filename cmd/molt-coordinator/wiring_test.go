package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/phases"
)

// The binary has the adapters a cluster's cloud spec may name: lab at an
// endpoint (one client per spec), gce; anything else, or a lab without
// its endpoint, is refused with the reason registration reports.
func TestCloudConnector(t *testing.T) {
	c := newCloudConnector()
	spec := phases.CloudSpec{Provider: phases.CloudLab, Endpoint: "http://127.0.0.1:41234"}
	p, err := c.Provider(spec)
	require.NoError(t, err)
	assert.Equal(t, "lab", p.Name())
	again, err := c.Provider(spec)
	require.NoError(t, err)
	assert.Same(t, p, again, "one adapter per spec")
	other, err := c.Provider(phases.CloudSpec{Provider: phases.CloudLab, Endpoint: "http://127.0.0.1:41235"})
	require.NoError(t, err)
	assert.NotSame(t, p, other)

	_, err = c.Provider(phases.CloudSpec{Provider: phases.CloudLab})
	assert.ErrorContains(t, err, "needs cloud.endpoint")
	_, err = c.Provider(phases.CloudSpec{Provider: phases.CloudLab, Endpoint: "10.77.0.1:7090"})
	assert.ErrorIs(t, err, cloud.ErrInvalid)
	_, err = c.Provider(phases.CloudSpec{Provider: "azure"})
	assert.ErrorContains(t, err, `unknown cloud adapter "azure"`)
}
