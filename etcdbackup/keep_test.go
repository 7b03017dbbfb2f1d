package etcdbackup

import (
	"testing"
	"time"
)

func TestPruneKeepsNewest(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	var all []Meta
	for i := range 7 {
		all = append(all, Meta{Revision: int64(i), TakenAt: t0.Add(time.Duration(i) * time.Hour)})
	}
	del := Prune(all, 5)
	if len(del) != 2 || del[0].Revision != 1 || del[1].Revision != 0 {
		t.Fatalf("Prune(7, keep 5) deletes %+v, want revisions 1 and 0", del)
	}
	if del := Prune(all, 0); len(del) != 2 {
		t.Fatalf("Prune(keep 0) deletes %d, want 2 (DefaultKeep 5)", len(del))
	}
	if del := Prune(all[:3], 5); del != nil {
		t.Fatalf("Prune(3, keep 5) = %+v, want nil", del)
	}
}
