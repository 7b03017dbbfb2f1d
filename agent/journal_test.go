package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func TestJournalSurvivesTornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	now := func() time.Time { return time.Unix(1000, 0).UTC() }
	j, err := openJournal(path, now)
	require.NoError(t, err)
	op := api.Operation{ID: "a", Kind: api.OpProbePeers, ProbePeers: &api.ProbePeers{}}
	require.NoError(t, j.append(record{ID: "a", Step: StepStarted, Operation: &op}))
	require.NoError(t, j.append(record{ID: "a", Step: StepBackedUp, Data: map[string]string{"prevSHA256": "x"}}))
	require.NoError(t, j.close())
	// A crash mid-append leaves half a line.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"id":"a","step":"fini`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	j, err = openJournal(path, now)
	require.NoError(t, err)
	st, ok := j.get("a")
	require.True(t, ok)
	require.True(t, st.Steps[StepBackedUp])
	require.Equal(t, "x", st.Data["prevSHA256"])
	require.Nil(t, st.Result)
	unfinished, _ := j.pending()
	require.Equal(t, []api.Operation{op}, unfinished)
	require.NoError(t, j.close())
}

func TestJournalRefusesCorruptMiddle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("garbage\n{\"id\":\"a\",\"step\":\"started\"}\n"), 0o600))
	_, err := openJournal(path, time.Now)
	require.ErrorIs(t, err, ErrJournalCorrupt)
}

func TestJournalCompactionKeepsRecentFinished(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, err := openJournal(path, time.Now)
	require.NoError(t, err)
	for i := range maxFinished + 10 {
		id := "op-" + string(rune('a'+i%26)) + time.Duration(i).String()
		op := api.Operation{ID: id}
		require.NoError(t, j.append(record{ID: id, Step: StepStarted, Operation: &op}))
		require.NoError(t, j.append(record{ID: id, Step: StepFinished, Result: &api.OperationResult{ID: id, State: api.OpSucceeded}}))
	}
	require.NoError(t, j.close())
	j, err = openJournal(path, time.Now)
	require.NoError(t, err)
	defer j.close()
	require.Len(t, j.ops, maxFinished)
	_, ok := j.get("op-a0s")
	require.False(t, ok, "oldest forgotten")
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"no coordinator", func(c *Config) { c.Coordinator = "" }},
		{"no node", func(c *Config) { c.Node = "" }},
		{"zero heartbeat", func(c *Config) { c.HeartbeatInterval = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Coordinator, cfg.Cluster, cfg.Node, cfg.HostRoot = "http://x", "c", "n", t.TempDir()
			tt.mod(&cfg)
			_, err := New(cfg)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}
