package convert_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/internal/filltest"
	"github.com/moltproject/molt/maintenance/schedule"
)

// TestUpgradeStatusToAPIFillsEveryField: every field of the scheduler's
// status reaches the wire (a field added to either side and not converted
// stays zero and fails here).
func TestUpgradeStatusToAPIFillsEveryField(t *testing.T) {
	in := filltest.New[schedule.Status](filler())
	out := convert.UpgradeStatusToAPI("c1", in)
	requireNoZero(t, reflect.ValueOf(out), "UpgradeStatus")
	require.Equal(t, in.Next.String(), out.Next)
	require.Equal(t, string(in.BlockedBy[0].Kind), out.BlockedBy[0].Kind)
	require.Equal(t, in.LastAttempt.Reason, out.LastAttempt.Reason)
}

func requireNoZero(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	require.False(t, v.IsZero(), "%s is zero", path)
	switch v.Kind() {
	case reflect.Pointer:
		requireNoZero(t, v.Elem(), path)
	case reflect.Struct:
		if v.Type().PkgPath() == "time" {
			return
		}
		for i := range v.NumField() {
			requireNoZero(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		for i := range v.Len() {
			requireNoZero(t, v.Index(i), path)
		}
	}
}
