package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// These table tests cover the pure rules; drain_test.go runs them against a
// real kube-apiserver.

func TestGraceSeconds(t *testing.T) {
	c := New(DefaultConfig(), nil)
	cases := []struct {
		name  string
		grace *int64
		want  int64
	}{
		{"unset uses API default", nil, 30},
		{"zero kept", ptr.To[int64](0), 0},
		{"under cap kept", ptr.To[int64](3599), 3599},
		{"at cap kept", ptr.To[int64](3600), 3600},
		{"two hours capped to one", ptr.To[int64](7200), 3600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tc.grace}}
			require.Equal(t, tc.want, c.graceSeconds(p))
		})
	}
}

func TestProtectedUntil(t *testing.T) {
	c := New(DefaultConfig(), nil)
	created := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	started := created.Add(3 * time.Minute) // image pull etc. before start
	cases := []struct {
		name      string
		annot     string
		startTime *metav1.Time
		want      time.Time
		protected bool
	}{
		{"no annotation", "", &metav1.Time{Time: started}, time.Time{}, false},
		{"safe-to-evict true", "true", &metav1.Time{Time: started}, time.Time{}, false},
		{"false from start time", "false", &metav1.Time{Time: started}, started.Add(7 * 24 * time.Hour), true},
		{"false, not started: creation time", "false", nil, created.Add(7 * 24 * time.Hour), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				CreationTimestamp: metav1.Time{Time: created},
				Annotations:       map[string]string{},
			}}
			if tc.annot != "" {
				p.Annotations[AnnotationSafeToEvict] = tc.annot
			}
			p.Status.StartTime = tc.startTime
			got, ok := c.protectedUntil(p)
			require.Equal(t, tc.protected, ok)
			require.True(t, tc.want.Equal(got), "got %v want %v", got, tc.want)
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	d := DefaultConfig()
	require.Equal(t, 20*time.Minute, d.DrainTimeout)
	require.Equal(t, time.Hour, d.MaxGracePeriod)
	require.Equal(t, 7*24*time.Hour, d.ProtectionAge)
	// A zero Config is completed with the defaults, never left at zero.
	got := Config{}.withDefaults()
	require.Equal(t, d.DrainTimeout, got.DrainTimeout)
	require.Equal(t, d.PollInterval, got.PollInterval)
	require.NotNil(t, got.Clock)
	require.NotNil(t, got.Logger)
}

// TestEvictFakeClientset keeps kube usable with client-go's fake clientset
// (other packages' unit tests), which has no REST client.
func TestEvictFakeClientset(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	cs := fake.NewClientset(pod)
	c := New(DefaultConfig(), cs)
	require.NoError(t, c.evict(t.Context(), pod))
	var evictions int
	for _, a := range cs.Actions() {
		if a.GetSubresource() == "eviction" {
			evictions++
		}
	}
	require.Equal(t, 1, evictions)
}

// TestConfigCapsDrainTimeouts: a drain timeout is a setting that may
// shorten the wait, never lengthen it past SPEC's bound for its kind of
// node (20 minutes bare metal, an hour MIG surge); a larger one is
// refused naming its rule, and NewFromKubeconfig refuses it too.
func TestConfigCapsDrainTimeouts(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	require.NoError(t, Config{}.Validate(), "zero values stand for the defaults")
	at := DefaultConfig()
	at.DrainTimeout, at.SurgeDrainTimeout, at.MaxGracePeriod = 20*time.Minute, time.Hour, time.Hour
	require.NoError(t, at.Validate())
	require.Equal(t, 20*time.Minute, DefaultConfig().timeout(DrainOptions{}))
	require.Equal(t, time.Hour, DefaultConfig().timeout(DrainOptions{Kind: DrainSurge}))

	for _, tc := range []struct {
		rule string
		set  func(*Config)
	}{
		{"drain-timeout-max", func(c *Config) { c.DrainTimeout = 21 * time.Minute }},
		{"surge-drain-timeout-max", func(c *Config) { c.SurgeDrainTimeout = 61 * time.Minute }},
		{"max-grace-period-max", func(c *Config) { c.MaxGracePeriod = 2 * time.Hour }},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.set(&cfg)
			err := cfg.Validate()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.rule+":")
			_, err = NewFromKubeconfig(cfg, nil)
			require.ErrorContains(t, err, tc.rule+":", "checked before the kubeconfig")
		})
	}
}
