package convert_test

import (
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
// and back losslessly. The engine's type is never encoded (it carries no
// JSON tags): the wire's golden file pins what the endpoints carry.
func TestMaintenancePolicyIsThePolicyEndpoints(t *testing.T) {
	in := filltest.New[api.MaintenancePolicy](filler())
	out := convert.MaintenancePolicyFromAPI(&in)
	require.NotNil(t, out)
	require.Equal(t, in, convert.MaintenancePolicyToAPI(*out))
	require.Equal(t, api.MaintenancePolicy{}, convert.MaintenancePolicyToAPI(maintenance.Policy{}))
	require.Equal(t, &maintenance.Policy{}, convert.MaintenancePolicyFromAPI(&api.MaintenancePolicy{}))
	require.Nil(t, convert.MaintenancePolicyFromAPI(nil))
}
