package phases

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckKubeletSkew(t *testing.T) {
	api := MustParseVersion("1.34.4")
	for _, tc := range []struct {
		kubelet string
		ok      bool
	}{
		{"1.34.4", true},
		{"1.34.9", true}, // the policy is by minor
		{"1.33.13", true},
		{"1.31.0", true}, // three minors older: the oldest allowed
		{"1.30.14", false},
		{"1.35.0", false},
	} {
		err := CheckKubeletSkew(api, "n1", MustParseVersion(tc.kubelet))
		if (err == nil) != tc.ok {
			t.Errorf("kubelet %s against %s: err %v, want ok=%v", tc.kubelet, api, err, tc.ok)
		}
		if err != nil && (RuleOf(err) != RuleKubeletSkew || !errors.Is(err, ErrKubeletSkew) || !strings.Contains(err.Error(), "n1")) {
			t.Errorf("kubelet %s: %v names neither the rule nor the node", tc.kubelet, err)
		}
	}
	err := CheckKubeletsSkew(api, map[string]Version{"b": MustParseVersion("1.35.1"), "a": MustParseVersion("1.29.0"), "c": api})
	if err == nil || !strings.Contains(err.Error(), "node a") || !strings.Contains(err.Error(), "node b") || strings.Contains(err.Error(), "node c") {
		t.Fatalf("CheckKubeletsSkew = %v, want nodes a and b", err)
	}
}

func TestLowestAndParseKubelet(t *testing.T) {
	if got := Lowest([]Version{{}, MustParseVersion("1.34.4"), MustParseVersion("1.33.13"), MustParseVersion("1.34.0")}); got != MustParseVersion("1.33.13") {
		t.Fatalf("Lowest = %s", got)
	}
	if got := Lowest(nil); !got.IsZero() {
		t.Fatalf("Lowest(nil) = %s", got)
	}
	for s, want := range map[string]string{"v1.34.4": "1.34.4", "v1.33.13+k3s1": "1.33.13", "1.32.2-gke.100": "1.32.2", "": "", "banana": ""} {
		v, ok := ParseKubelet(s)
		if ok != (want != "") || v.String() != want {
			t.Errorf("ParseKubelet(%q) = %s, %v; want %q", s, v, ok, want)
		}
	}
}

func TestDrift(t *testing.T) {
	at := func(s ...string) Expected {
		var e Expected
		for _, v := range s {
			e.Kubelet = append(e.Kubelet, MustParseVersion(v))
		}
		return e
	}
	for _, tc := range []struct {
		name string
		want Expected
		got  Observed
		says string // "" for no drift
	}{
		{"agrees", at("1.34.4"), Observed{Kubelet: "v1.34.4"}, ""},
		{"not reported", at("1.34.4"), Observed{}, ""},
		{"upgraded by hand", at("1.33.13"), Observed{Kubelet: "v1.34.4"}, "kubelet 1.34.4, recorded 1.33.13"},
		{"rolled back", at("1.34.4"), Observed{Kubelet: "v1.33.13"}, "kubelet 1.33.13, recorded 1.34.4"},
		{"mid-upgrade either", at("1.33.13", "1.34.4"), Observed{Kubelet: "v1.33.13"}, ""},
		{"no record", Expected{}, Observed{Kubelet: "v1.30.0"}, ""},
		{"containerd agrees", Expected{Containerd: []string{"2.1.4"}}, Observed{Containerd: "v2.1.4"}, ""},
		{"containerd distro build", Expected{Containerd: []string{"1.7.27"}}, Observed{Containerd: "1.7.27~ds1"}, ""},
		{"containerd differs", Expected{Containerd: []string{"2.1.4"}}, Observed{Containerd: "1.7.27"}, "containerd 1.7.27, recorded 2.1.4"},
	} {
		if got := Drift(tc.want, tc.got); got != tc.says {
			t.Errorf("%s: Drift = %q, want %q", tc.name, got, tc.says)
		}
	}
}

func TestCheckStatedVersion(t *testing.T) {
	stated := MustParseVersion("1.34.4")
	if err := CheckStatedVersion(stated, nil); err != nil {
		t.Fatalf("no observation: %v", err)
	}
	if err := CheckStatedVersion(stated, map[string]Version{"a": stated, "b": MustParseVersion("1.34.5")}); err != nil {
		t.Fatalf("lowest agrees: %v", err)
	}
	err := CheckStatedVersion(stated, map[string]Version{"cp-1": MustParseVersion("1.33.13"), "w-1": MustParseVersion("1.33.13")})
	if RuleOf(err) != RuleObservedVersion || !strings.Contains(err.Error(), "cp-1: 1.33.13") || !strings.Contains(err.Error(), "run 1.33.13") {
		t.Fatalf("CheckStatedVersion = %v", err)
	}
}

// TestDriftStaticPodImages: a static pod whose image is not one the
// recorded releases name for its component is drift; a pod no release
// names, or a component not observed, is not; references are compared as
// containerd names images (Docker Hub's implicit prefix spelled out).
func TestDriftStaticPodImages(t *testing.T) {
	want := Expected{StaticPods: map[string][]string{
		"etcd":           {"registry.k8s.io/etcd:3.5.21-0", "registry.k8s.io/etcd:3.6.4-0"},
		"kube-apiserver": {"registry.k8s.io/kube-apiserver:v1.34.4"},
		"haproxy":        {"haproxy:2.8"},
	}}
	require.Empty(t, Drift(want, Observed{StaticPods: map[string]string{
		"etcd":           "registry.k8s.io/etcd:3.6.4-0",
		"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.34.4",
		"haproxy":        "docker.io/library/haproxy:2.8",
		"kube-proxy":     "registry.k8s.io/kube-proxy:v1.20.0", // named by no release
	}}))
	require.Equal(t, "static pod etcd runs registry.k8s.io/etcd:3.4.0-0, recorded registry.k8s.io/etcd:3.5.21-0 or registry.k8s.io/etcd:3.6.4-0; "+
		"static pod kube-apiserver-extra runs registry.k8s.io/kube-apiserver:v1.33.13, recorded registry.k8s.io/kube-apiserver:v1.34.4",
		Drift(want, Observed{StaticPods: map[string]string{
			"etcd":                 "registry.k8s.io/etcd:3.4.0-0",
			"kube-apiserver-extra": "registry.k8s.io/kube-apiserver:v1.33.13",
		}}))
	require.Empty(t, Drift(Expected{}, Observed{StaticPods: map[string]string{"etcd": "x"}}), "no release names static pods")
	require.Equal(t, "haproxy", StaticPodComponent("haproxy", want.StaticPods))
	require.Equal(t, "", StaticPodComponent("haproxyx", want.StaticPods))
	require.True(t, SameImage("pause:3.10", "docker.io/library/pause:3.10"))
	require.True(t, SameImage("org/app:1", "docker.io/org/app:1"))
	require.False(t, SameImage("localhost/app:1", "docker.io/localhost/app:1"))
	require.True(t, SameImage("registry.lab:5000/etcd:3.6.4-0", "registry.lab:5000/etcd:3.6.4-0"))
}
