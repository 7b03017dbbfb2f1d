package convert_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/internal/filltest"
	"github.com/moltproject/molt/maintenance"
)

// TestMaintenancePolicyIsThePolicyEndpoints: the policy a registration
// carries is the one PUT and GET .../maintenance-policy carry
// (api.MaintenancePolicy); it converts to the engine's maintenance.Policy
// and back losslessly, and the engine's JSON (what the endpoints wrote
// before they had a wire type) is the wire's, field for field.
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

	// What GET answers (the stored policy, written for the wire) is the
	// engine's JSON byte for byte, and converts back to what PUT took.
	toWire, err := json.Marshal(convert.MaintenancePolicyToAPI(*out))
	require.NoError(t, err)
	require.Equal(t, string(engine), string(toWire))
	require.Equal(t, in, convert.MaintenancePolicyToAPI(*out))
	require.Equal(t, api.MaintenancePolicy{}, convert.MaintenancePolicyToAPI(maintenance.Policy{}))

	zero, err := json.Marshal(convert.MaintenancePolicyFromAPI(&api.MaintenancePolicy{}))
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(zero))
	require.Nil(t, convert.MaintenancePolicyFromAPI(nil))
}
