package lab

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The apiserver's kubelet-client certificate must be in the group the
// binding names, or kubelets refuse `kubectl logs` and `exec`. (That a
// second Up does not fail on the existing binding is kube.CreateObjects'
// contract, tested in kube.)
func TestClusterAdminsBindingCoversKubeletClient(t *testing.T) {
	b, err := clusterAdminsBinding()
	require.NoError(t, err)
	require.NoError(t, kube.CheckManifests(b))
	var crb struct {
		Kind     string
		Metadata struct{ Name string }
		RoleRef  struct{ APIGroup, Kind, Name string } `json:"roleRef"`
		Subjects []struct{ APIGroup, Kind, Name string }
	}
	require.NoError(t, yaml.Unmarshal(b, &crb))
	require.Equal(t, "ClusterRoleBinding", crb.Kind)
	require.Equal(t, "rbac.authorization.k8s.io", crb.RoleRef.APIGroup)
	require.Equal(t, "ClusterRole", crb.RoleRef.Kind)
	require.Equal(t, "cluster-admin", crb.RoleRef.Name)
	require.Len(t, crb.Subjects, 1)
	require.Equal(t, "Group", crb.Subjects[0].Kind)
	require.Equal(t, "rbac.authorization.k8s.io", crb.Subjects[0].APIGroup)

	p, err := EnsurePKI(t.TempDir(), testPKISpec())
	require.NoError(t, err)
	cert := readCert(t, filepath.Join(p.Dir, "apiserver-kubelet-client.crt"))
	require.Contains(t, cert.Subject.Organization, crb.Subjects[0].Name)
}

// The sample workloads are valid objects of their kinds, in the order they
// must be created, and every pod template is the echo server on a worker.
func TestDemoManifests(t *testing.T) {
	ns, err := demoNamespace()
	require.NoError(t, err)
	require.NoError(t, kube.CheckManifests(ns))
	w, err := demoWorkloads()
	require.NoError(t, err)
	require.NoError(t, kube.CheckManifests(w))

	type podSpec struct {
		NodeSelector map[string]string `json:"nodeSelector"`
		Containers   []struct {
			Image string
			Ports []struct {
				ContainerPort int `json:"containerPort"`
			}
		}
	}
	type object struct {
		Kind     string
		Metadata struct {
			Name, Namespace string
			Annotations     map[string]string
		}
		Spec struct {
			Replicas     int
			MinAvailable int `json:"minAvailable"`
			Template     struct{ Spec podSpec }
			Type         string
			Ports        []servicePort
			Selector     map[string]any
			podSpec
		}
	}
	var got []string
	for _, doc := range splitYAML(t, w) {
		var o object
		require.NoError(t, yaml.Unmarshal(doc, &o))
		require.Equal(t, DemoNamespace, o.Metadata.Namespace)
		got = append(got, o.Kind+"/"+o.Metadata.Name)
		spec := o.Spec.Template.Spec
		switch o.Kind {
		case "Deployment":
			require.Equal(t, 2, o.Spec.Replicas)
		case "PodDisruptionBudget":
			require.Equal(t, 1, o.Spec.MinAvailable)
			continue
		case "Service":
			require.Equal(t, "LoadBalancer", o.Spec.Type)
			require.Equal(t, []servicePort{{LBPort, EchoPort, EchoNodePort}}, o.Spec.Ports)
			require.Equal(t, map[string]any{"app": DemoDeploy}, o.Spec.Selector, "the Service selects the Deployment's pods")
			continue
		case "Pod":
			spec = o.Spec.podSpec
			require.Equal(t, "false", o.Metadata.Annotations[SafeToEvict])
		}
		require.Equal(t, map[string]string{roleLabel: string(RoleWorker)}, spec.NodeSelector, o.Kind)
		require.Equal(t, EchoImage, spec.Containers[0].Image, o.Kind)
		require.Equal(t, EchoPort, spec.Containers[0].Ports[0].ContainerPort, o.Kind)
	}
	require.Equal(t, []string{"Deployment/" + DemoDeploy, "PodDisruptionBudget/" + DemoDeploy,
		"DaemonSet/" + DemoDaemonSet, "Pod/" + DemoPrecious, "Service/" + DemoDeploy}, got)
}

type servicePort struct {
	Port       int `json:"port"`
	TargetPort int `json:"targetPort"`
	NodePort   int `json:"nodePort"`
}

// splitYAML splits a stream rendered by manifests into its documents.
func splitYAML(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, d := range strings.Split(string(b), "---\n") {
		if d != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}
