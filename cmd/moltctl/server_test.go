package main

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServerTakesEveryMemberAndFailsOver(t *testing.T) {
	f := &fakeCoordinator{done: passedRun}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	gone := httptest.NewServer(nil)
	gone.Close()

	var out bytes.Buffer
	c := &cli{out: &out}
	root := c.root()
	root.SetArgs([]string{"--server", gone.URL + "," + srv.URL, "preflight", "get", "c1", "c1-1", "-o", "json"})
	require.NoError(t, root.Execute(), "the first member is down; the second answers")
	require.Contains(t, out.String(), `"id": "c1-1"`)
}

func TestServerRefusesABadURL(t *testing.T) {
	c := &cli{out: &bytes.Buffer{}}
	root := c.root()
	root.SetArgs([]string{"--server", "http://ok:7080,ftp://m2", "cluster", "list"})
	require.ErrorContains(t, root.Execute(), `--server: coordinator endpoint "ftp://m2": want http(s)://host[:port]`)
}
