package lab

import (
	"strings"
	"testing"
)

// TestEtcdPairedAsKubeadm: 1.33 runs etcd 3.5.21 and 1.34 etcd 3.6.4, in
// the images a host imports and in its etcd manifest, so the lab's minor
// upgrade moves etcd 3.5 → 3.6.
func TestEtcdPairedAsKubeadm(t *testing.T) {
	for v, want := range map[string]string{
		"1.33.13": "registry.k8s.io/etcd:3.5.21-0", "v1.33.6": "registry.k8s.io/etcd:3.5.21-0",
		"1.34.3": "registry.k8s.io/etcd:3.6.4-0", "1.34.4": "registry.k8s.io/etcd:3.6.4-0", "1.35.4": "registry.k8s.io/etcd:3.6.4-0",
	} {
		if got := EtcdImage(v); got != want {
			t.Errorf("EtcdImage(%s) = %s, want %s", v, got, want)
		}
		if refs := strings.Join(imagesFor(RoleControlPlane, v), " "); !strings.Contains(refs, want) {
			t.Errorf("a control-plane host at %s imports %s, not %s", v, refs, want)
		}
		cp := testControlPlane()
		cp.Version = v
		if got := EtcdPod(cp.Members[0], cp).Image; got != want {
			t.Errorf("etcd's manifest at %s runs %s, want %s", v, got, want)
		}
	}
}
