package convert_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/internal/filltest"
)

// TestMaintenancePolicyIsThePolicyEndpoints: the policy a registration
// carries has the JSON of the one PUT .../maintenance-policy takes
// (maintenance.Policy), field for field, and converts to it losslessly.
func TestMaintenancePolicyIsThePolicyEndpoints(t *testing.T) {
	in := filltest.New[api.MaintenancePolicy](filler())
	out := convert.MaintenancePolicyFromAPI(&in)
	wire, err := json.Marshal(in)
	require.NoError(t, err)
	engine, err := json.Marshal(out)
	require.NoError(t, err)
	require.JSONEq(t, string(wire), string(engine))
	var back api.MaintenancePolicy
	require.NoError(t, json.Unmarshal(engine, &back))
	require.Equal(t, in, back)

	zero, err := json.Marshal(convert.MaintenancePolicyFromAPI(&api.MaintenancePolicy{}))
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(zero))
	require.Nil(t, convert.MaintenancePolicyFromAPI(nil))
}
