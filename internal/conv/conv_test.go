package conv_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/conv"
)

func TestSliceKeepsNilAndEmptyApart(t *testing.T) {
	require.Nil(t, conv.Slice([]int(nil), strconv.Itoa))
	empty := conv.Slice([]int{}, strconv.Itoa)
	require.NotNil(t, empty)
	require.Empty(t, empty)
	require.Equal(t, []string{"1", "2"}, conv.Slice([]int{1, 2}, strconv.Itoa))
}

func TestMapKeepsNilAndEmptyApart(t *testing.T) {
	require.Nil(t, conv.Map(map[string]int(nil), strconv.Itoa))
	empty := conv.Map(map[string]int{}, strconv.Itoa)
	require.NotNil(t, empty)
	require.Empty(t, empty)
	require.Equal(t, map[string]string{"a": "1"}, conv.Map(map[string]int{"a": 1}, strconv.Itoa))
}

func TestPtrCopies(t *testing.T) {
	require.Nil(t, conv.Ptr((*int)(nil), conv.Same[int]))
	n := 3
	p := conv.Ptr(&n, conv.Same[int])
	require.Equal(t, 3, *p)
	*p = 4
	require.Equal(t, 3, n, "the result does not share memory with its argument")
}
