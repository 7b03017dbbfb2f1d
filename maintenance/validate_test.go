package maintenance

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidateRules(t *testing.T) {
	weekend := &Window{Start: at(5 * day), End: at(7 * day), Recurrence: "FREQ=WEEKLY;BYDAY=SA"}
	ex := func(name string, from, to time.Duration, s Scope) Exclusion {
		return Exclusion{Name: name, Start: at(from), End: at(to), Scope: s}
	}
	many := func(n int, s Scope) []Exclusion {
		var out []Exclusion
		for i := range n {
			out = append(out, ex(fmt.Sprintf("e%d", i), time.Duration(i)*2*day, time.Duration(i)*2*day+time.Hour, s))
		}
		return out
	}
	channel := ValidationContext{Now: at(0), OnReleaseChannel: true}
	tests := []struct {
		name string
		p    Policy
		ctx  ValidationContext
		rule string // "" = valid
	}{
		{"empty policy", Policy{}, channel, ""},
		{"weekend window", Policy{Window: weekend}, channel, ""},
		{"window start out of range", Policy{Window: &Window{End: at(day)}}, channel, RuleTimeOutOfRange},
		{"window end before start", Policy{Window: &Window{Start: at(day), End: at(0), Recurrence: "FREQ=DAILY"}}, channel, RuleWindowEndBeforeStart},
		{"window end equals start", Policy{Window: &Window{Start: at(day), End: at(day), Recurrence: "FREQ=DAILY"}}, channel, RuleWindowEndBeforeStart},
		{"recurrence garbage", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "EVERY SUNDAY"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence unknown key", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=DAILY;FOO=1"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence with DTSTART", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=DAILY;DTSTART=20260101T000000Z"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence never matches", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence monthly 6th Saturday", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=MONTHLY;BYDAY=6SA"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence BYEASTER", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=YEARLY;BYEASTER=0"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence UNTIL before start", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=DAILY;UNTIL=20250101T000000Z"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence interval 366", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=MONTHLY;INTERVAL=366"}}, channel, RuleMaintenanceAvailability},
		{"recurrence interval too big", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=MONTHLY;INTERVAL=9223372036854775807"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence count too big", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=DAILY;COUNT=10001"}}, channel, RuleWindowRecurrenceInvalid},
		{"recurrence with prefix", Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "RRULE:FREQ=DAILY"}}, channel, ""},
		{"hourly", Policy{Window: &Window{Start: at(0), End: at(time.Hour), Recurrence: "FREQ=HOURLY"}}, channel, RuleWindowFrequencyTooHigh},
		{"minutely", Policy{Window: &Window{Start: at(0), End: at(time.Hour), Recurrence: "FREQ=MINUTELY"}}, channel, RuleWindowFrequencyTooHigh},
		{"secondly", Policy{Window: &Window{Start: at(0), End: at(time.Hour), Recurrence: "FREQ=SECONDLY"}}, channel, RuleWindowFrequencyTooHigh},
		{"24 starts a day", Policy{Window: &Window{Start: at(0), End: at(time.Hour), Recurrence: "FREQ=DAILY;BYHOUR=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23"}}, channel, ""},
		{"25 starts a day", Policy{Window: &Window{Start: at(0), End: at(time.Hour), Recurrence: "FREQ=DAILY;BYHOUR=0,12;BYMINUTE=0,5,10,15,20,25,30,35,40,45,50,55,59"}}, channel, RuleWindowFrequencyTooHigh},
		{"20 exclusions", Policy{Exclusions: many(20, ScopeNoMinorUpgrades)}, channel, ""},
		{"21 exclusions", Policy{Exclusions: many(21, ScopeNoMinorUpgrades)}, channel, RuleTooManyExclusions},
		{"exclusion out of range", Policy{Exclusions: []Exclusion{{Name: "x", End: at(day)}}}, channel, RuleTimeOutOfRange},
		{"exclusion end before start", Policy{Exclusions: []Exclusion{ex("x", day, 0, "")}}, channel, RuleExclusionEndBeforeStart},
		{"exclusion name missing", Policy{Exclusions: []Exclusion{ex(" ", 0, day, "")}}, channel, RuleExclusionNameMissing},
		{"exclusion name reserved", Policy{Exclusions: []Exclusion{ex("window", 0, day, "")}}, channel, RuleExclusionNameReserved},
		{"exclusion name duplicate", Policy{Exclusions: []Exclusion{ex("x", 0, day, ""), ex("x", 2*day, 3*day, "")}}, channel, RuleExclusionNameDuplicate},
		{"unknown scope", Policy{Exclusions: []Exclusion{ex("x", 0, day, "no_patches")}}, channel, RuleUnknownScope},
		{"no_upgrades without channel", Policy{Exclusions: []Exclusion{ex("x", 0, day, ScopeNoUpgrades)}}, ValidationContext{Now: at(0)}, ""},
		{"no_minor without channel", Policy{Exclusions: []Exclusion{ex("x", 0, day, ScopeNoMinorUpgrades)}}, ValidationContext{Now: at(0)}, RuleScopeRequiresChannel},
		{"no_minor_or_node without channel", Policy{Exclusions: []Exclusion{ex("x", 0, day, ScopeNoMinorOrNodeUpgrades)}}, ValidationContext{Now: at(0)}, RuleScopeRequiresChannel},
		{"ends at end of support", Policy{Exclusions: []Exclusion{ex("x", 0, day, ScopeNoMinorUpgrades)}}, ValidationContext{Now: at(0), OnReleaseChannel: true, EndOfSupport: at(day)}, ""},
		{"ends after end of support", Policy{Exclusions: []Exclusion{ex("x", 0, day+time.Second, ScopeNoMinorUpgrades)}}, ValidationContext{Now: at(0), OnReleaseChannel: true, EndOfSupport: at(day)}, RuleExclusionAfterEndOfSupport},
		{"3 no_upgrades", Policy{Exclusions: many(3, ScopeNoUpgrades)}, channel, ""},
		{"4 no_upgrades", Policy{Exclusions: many(4, ScopeNoUpgrades)}, channel, RuleTooManyNoUpgrades},
		{"4 no_upgrades, one expired", Policy{Exclusions: append(many(3, ScopeNoUpgrades), ex("old", -3*day, -day, ""))}, channel, ""},
		{"weekly 4h window is too little", Policy{Window: &Window{Start: at(0), End: at(4 * time.Hour), Recurrence: "FREQ=WEEKLY"}}, channel, RuleMaintenanceAvailability},
		{"daily 3h59m window never counts", Policy{Window: &Window{Start: at(0), End: at(4*time.Hour - time.Minute), Recurrence: "FREQ=DAILY"}}, channel, RuleMaintenanceAvailability},
		{"daily 4h window", Policy{Window: &Window{Start: at(0), End: at(4 * time.Hour), Recurrence: "FREQ=DAILY"}}, channel, ""},
		{"year-long one-off window still closes for good", Policy{Window: &Window{Start: at(0), End: at(400 * day)}}, channel, RuleMaintenanceAvailability},
		{"daily window with UNTIL closes for good", Policy{Window: &Window{Start: at(0), End: at(6 * time.Hour), Recurrence: "FREQ=DAILY;UNTIL=20300101T000000Z"}}, channel, RuleMaintenanceAvailability},
		{"exclusion ten years ahead is checked", Policy{Exclusions: []Exclusion{ex("x", 3650*day, 3681*day, "")}}, channel, RuleMaintenanceAvailability},
		{"one-off window closes for good", Policy{Window: &Window{Start: at(0), End: at(30 * day)}}, channel, RuleMaintenanceAvailability},
		{"31-day exclusion", Policy{Exclusions: []Exclusion{ex("x", 0, 31*day, "")}}, channel, RuleMaintenanceAvailability},
		{"31-day no_minor exclusion does not count", Policy{Exclusions: []Exclusion{ex("x", 0, 31*day, ScopeNoMinorUpgrades)}}, channel, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate(tc.ctx)
			if tc.rule == "" {
				require.NoError(t, err)
				return
			}
			var re *RuleError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.rule, re.Rule, "detail: %s", re.Detail)
			require.ErrorIs(t, err, ErrInvalidPolicy)
			require.NotEmpty(t, re.Detail)
		})
	}
}

// Three no_upgrades exclusions on an always-open policy, leaving one gap.
func TestAvailabilityBoundaries(t *testing.T) {
	ctx := ValidationContext{Now: at(0)}
	tests := []struct {
		name string
		ex   []Exclusion
		ok   bool
	}{
		{"gap of exactly 48h", []Exclusion{
			{Name: "a", Start: at(0), End: at(30 * day)},
			{Name: "b", Start: at(32 * day), End: at(62 * day)},
		}, true},
		{"gap of 47h", []Exclusion{
			{Name: "a", Start: at(0), End: at(30 * day)},
			{Name: "b", Start: at(30*day + 47*time.Hour), End: at(62 * day)},
		}, false},
		// The gap region starts 1h before day 30 so that the first period,
		// [0, 32d), holds all of it.
		{"48h split in 44h + 4h counts", []Exclusion{
			{Name: "a", Start: at(0), End: at(30*day - time.Hour)},
			{Name: "c", Start: at(30*day + 43*time.Hour), End: at(30*day + 44*time.Hour)},
			{Name: "b", Start: at(30*day + 48*time.Hour), End: at(62*day - time.Hour)},
		}, true},
		{"49h split in 46h + 3h: the 3h do not count", []Exclusion{
			{Name: "a", Start: at(0), End: at(30*day - time.Hour)},
			{Name: "c", Start: at(30*day + 45*time.Hour), End: at(30*day + 46*time.Hour)},
			{Name: "b", Start: at(30*day + 49*time.Hour), End: at(62*day - time.Hour)},
		}, false},
		{"two periods of 24h each side of a 31-day gap", []Exclusion{
			{Name: "a", Start: at(0), End: at(31 * day)},
		}, false},
		{"exclusion starting in a year still checked", []Exclusion{
			{Name: "a", Start: at(365 * day), End: at(396 * day)},
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Policy{Exclusions: tc.ex}.Validate(ctx)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			var re *RuleError
			require.ErrorAs(t, err, &re)
			require.Equal(t, RuleMaintenanceAvailability, re.Rule)
		})
	}
}

// A weekend window of 2×24h minus a one-day exclusion still leaves enough
// in every 32 days; excluding four weekends does not.
func TestAvailabilityWithWindow(t *testing.T) {
	w := &Window{Start: at(5 * day), End: at(6 * day), Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU"}
	ctx := ValidationContext{Now: at(0)}
	require.NoError(t, Policy{Window: w, Exclusions: []Exclusion{{Name: "x", Start: at(5 * day), End: at(6 * day)}}}.Validate(ctx))
	err := Policy{Window: w, Exclusions: []Exclusion{{Name: "x", Start: at(5 * day), End: at(34 * day)}}}.Validate(ctx)
	var re *RuleError
	require.ErrorAs(t, err, &re)
	require.Equal(t, RuleMaintenanceAvailability, re.Rule)
}

func TestRuleErrorWraps(t *testing.T) {
	err := error(ruleErr("r", "d %d", 1))
	require.True(t, errors.Is(err, ErrInvalidPolicy))
	require.Equal(t, "invalid maintenance policy: r: d 1", err.Error())
	wrapped := fmt.Errorf("put policy: %w", err)
	var re *RuleError
	require.ErrorAs(t, wrapped, &re)
}

// TestAdmitRefusesRecurrenceNumbersValidateKeeps: a request's RRULE with
// a COUNT or INTERVAL that is not a whole number ≥ 1 is refused (the RRULE
// library would read COUNT=0 or -5 as no COUNT, INTERVAL=0 as 1), while
// Validate, which the state machine applies to stored policies and old
// log entries, keeps compiling them as before.
func TestAdmitRefusesRecurrenceNumbersValidateKeeps(t *testing.T) {
	ctx := ValidationContext{Now: at(0), OnReleaseChannel: true}
	for _, tc := range []struct {
		rule  string
		admit string // rule Admit refuses with; "" = accepted
	}{
		{"FREQ=DAILY;COUNT=-1", RuleWindowRecurrenceInvalid},
		{"FREQ=DAILY;COUNT=0", RuleWindowRecurrenceInvalid},
		{"FREQ=DAILY;COUNT=-5", RuleWindowRecurrenceInvalid},
		{"FREQ=DAILY;COUNT=+5", RuleWindowRecurrenceInvalid},
		{"RRULE:FREQ=DAILY;COUNT=00", RuleWindowRecurrenceInvalid},
		{"FREQ=DAILY;INTERVAL=0", RuleWindowRecurrenceInvalid},
		{"FREQ=DAILY", ""},
		{"FREQ=DAILY;INTERVAL=1", ""},
		{"FREQ=DAILY;INTERVAL=01", ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			p := Policy{Window: &Window{Start: at(0), End: at(8 * time.Hour), Recurrence: tc.rule}}
			err := p.Admit(ctx)
			if tc.admit == "" {
				require.NoError(t, err)
				return
			}
			var re *RuleError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.admit, re.Rule)
			_, err = p.Compile()
			require.NoError(t, err, "a stored policy with it still compiles")
		})
	}
}
