package schedule

import (
	"testing"
	"time"
)

// TestSequenceProgressOncePerPass: a pass computes a version's progress
// through a sequence once, however many of its clusters ask (the memo
// was never filled, so every cluster of a sequence recomputed its whole
// sequence), and finds each cluster's place as Places lists it first.
func TestSequenceProgressOncePerPass(t *testing.T) {
	now := time.Date(2027, 3, 3, 10, 0, 0, 0, time.UTC)
	f := &Fleet{
		Clusters: []Cluster{
			{Name: "a", Current: v("1.33.1"), Labels: map[string]string{"tier": "dev"}},
			{Name: "b", Current: v("1.33.1"), Labels: map[string]string{"tier": "prod"}},
			{Name: "c", Current: v("1.33.1"), Labels: map[string]string{"tier": "prod"}},
			{Name: "d", Current: v("1.33.1")},
		},
		Sequences: []Sequence{
			{Name: "one", Stages: []Stage{{Name: "dev", Selector: map[string]string{"tier": "dev"}}, {Name: "prod", Clusters: []string{"c"}, Selector: map[string]string{"tier": "prod"}}}},
			{Name: "two", Stages: []Stage{{Name: "all", Clusters: []string{"a", "d"}}}},
		},
	}
	s := newSequences(f, now)
	if p, q := s.of(0, v("1.33.2")), s.of(0, v("1.33.2")); p != q {
		t.Fatal("the progress of 1.33.2 through sequence one was computed twice in one pass")
	}
	for i := range f.Clusters {
		c := &f.Clusters[i]
		want := Places(f.Sequences, c.Name, c.Labels)
		got, ok := s.place[c.Name]
		if ok != (len(want) > 0) || ok && got != want[0] {
			t.Errorf("cluster %s: place %v (%v), Places lists %v", c.Name, got, ok, want)
		}
	}
}
