package etcdbackup

import "sort"

// DefaultKeep is how many snapshots a cluster keeps unless configured.
const DefaultKeep = 5

// Prune returns the snapshots to delete so that the newest keep remain
// (newest by TakenAt; equal times by higher revision). keep < 1 means
// DefaultKeep: a misconfigured zero must not delete every backup.
func Prune(all []Meta, keep int) []Meta {
	if keep < 1 {
		keep = DefaultKeep
	}
	if len(all) <= keep {
		return nil
	}
	s := append([]Meta(nil), all...)
	sort.SliceStable(s, func(i, j int) bool {
		if !s[i].TakenAt.Equal(s[j].TakenAt) {
			return s[i].TakenAt.After(s[j].TakenAt)
		}
		return s[i].Revision > s[j].Revision
	})
	return s[keep:]
}
