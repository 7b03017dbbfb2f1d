package maintenance

import "time"

// checkWindowShape refuses what Compile cannot compute with: instants out
// of range and a window that does not end after it starts.
func checkWindowShape(w *Window) error {
	if w == nil {
		return nil
	}
	if !inRange(w.Start) || !inRange(w.End) {
		return ruleErr(RuleTimeOutOfRange, "window start and end must lie in [%s, %s)",
			minTime.Format(time.RFC3339), maxTime.Format(time.RFC3339))
	}
	if !w.End.After(w.Start) {
		return ruleErr(RuleWindowEndBeforeStart, "window end %s is not after its start %s",
			w.End.Format(time.RFC3339), w.Start.Format(time.RFC3339))
	}
	return nil
}

// checkExclusionShapes is checkWindowShape for exclusions.
func checkExclusionShapes(exs []Exclusion) error {
	for _, e := range exs {
		if !inRange(e.Start) || !inRange(e.End) {
			return ruleErr(RuleTimeOutOfRange, "exclusion %q: start and end must lie in [%s, %s)",
				e.Name, minTime.Format(time.RFC3339), maxTime.Format(time.RFC3339))
		}
		if !e.End.After(e.Start) {
			return ruleErr(RuleExclusionEndBeforeStart, "exclusion %q ends at %s, not after its start %s",
				e.Name, e.End.Format(time.RFC3339), e.Start.Format(time.RFC3339))
		}
	}
	return nil
}

func inRange(t time.Time) bool { return !t.Before(minTime) && t.Before(maxTime) }
