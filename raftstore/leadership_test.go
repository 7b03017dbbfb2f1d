package raftstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLeaderFanout(t *testing.T) {
	var f leaderFanout
	a := f.subscribe()
	require.False(t, <-a, "a subscriber first gets the current state")

	f.publish(true)
	b := f.subscribe()
	require.True(t, <-a)
	require.True(t, <-b)

	// A reader that falls behind sees only the newest value.
	f.publish(false)
	f.publish(true)
	f.publish(false)
	require.False(t, <-a)
	select {
	case v := <-a:
		t.Fatalf("got extra value %v", v)
	default:
	}

	require.False(t, <-b)

	f.close()
	_, open := <-a
	require.False(t, open)
	_, open = <-b
	require.False(t, open)
	_, open = <-f.subscribe()
	require.False(t, open, "a subscriber after close gets a closed channel")
	f.publish(true) // no panic after close
}
