package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCatchUp(t *testing.T) {
	last := at(0)
	tests := []struct {
		name         string
		current, def int
		last, now    time.Time
		next         int
		due          bool
		dueAt        time.Time
	}{
		{"at default", 30, 30, last, at(40 * day), 30, false, time.Time{}},
		{"one behind: ordinary path", 29, 30, last, at(40 * day), 29, false, time.Time{}},
		{"ahead of default", 31, 30, last, at(40 * day), 31, false, time.Time{}},
		{"two behind, never auto-upgraded", 28, 30, time.Time{}, at(day), 29, true, at(day)},
		{"two behind, last upgrade 29 days ago", 28, 30, last, at(29 * day), 29, false, at(30 * day)},
		{"two behind, exactly a month", 28, 30, last, at(30 * day), 29, true, at(30 * day)},
		{"four behind, long ago", 26, 30, last, at(400 * day), 27, true, at(30 * day)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, due, dueAt := CatchUp(tc.current, tc.def, tc.last, tc.now)
			require.Equal(t, tc.next, next)
			require.Equal(t, tc.due, due)
			require.Equal(t, tc.dueAt, dueAt)
		})
	}
}

func TestCheckOverrideReason(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		ok     bool
	}{
		{"with reason", "CVE-2026-1234 in kube-apiserver", true},
		{"empty reason", "", false},
		{"blank reason", " \t", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOverrideReason(tc.reason)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			var re *RuleError
			require.ErrorAs(t, err, &re)
			require.Equal(t, RuleOverrideReasonRequired, re.Rule)
			require.ErrorIs(t, err, ErrInvalidPolicy)
		})
	}
}
