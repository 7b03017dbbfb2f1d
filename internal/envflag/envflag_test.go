package envflag

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFlagsWithEnvFallback(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantCoord string
		wantHB    time.Duration
		wantErr   string
	}{
		{name: "flag only", args: []string{"--coordinator", "http://a"}, wantCoord: "http://a", wantHB: 10 * time.Second},
		{name: "env fills unset flags", env: map[string]string{"MOLT_AGENT_COORDINATOR": "http://env", "MOLT_AGENT_HEARTBEAT_INTERVAL": "3s"},
			wantCoord: "http://env", wantHB: 3 * time.Second},
		{name: "flag beats env", args: []string{"--coordinator", "http://flag"}, env: map[string]string{"MOLT_AGENT_COORDINATOR": "http://env"},
			wantCoord: "http://flag", wantHB: 10 * time.Second},
		{name: "env list of members passes unchanged", env: map[string]string{"MOLT_AGENT_COORDINATOR": "http://m1:7080,http://m2:7080,http://m3:7080"},
			wantCoord: "http://m1:7080,http://m2:7080,http://m3:7080", wantHB: 10 * time.Second},
		{name: "bad env value", env: map[string]string{"MOLT_AGENT_HEARTBEAT_INTERVAL": "soon"}, wantErr: "MOLT_AGENT_HEARTBEAT_INTERVAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			coord := fs.String("coordinator", "", "")
			hb := fs.Duration("heartbeat-interval", 10*time.Second, "")
			err := Parse(fs, tt.args, "MOLT_AGENT_")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantCoord, *coord)
			require.Equal(t, tt.wantHB, *hb)
		})
	}
}
