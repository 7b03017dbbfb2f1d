package lab

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	blk, _ := pem.Decode(b)
	require.NotNil(t, blk, path)
	c, err := x509.ParseCertificate(blk.Bytes)
	require.NoError(t, err)
	return c
}

func testPKISpec() PKISpec {
	topo := FullTopology()
	return PKISpec{
		ClusterName:   "molt-lab",
		APIEndpoint:   topo.APIEndpoint(),
		APIServerSANs: []string{"10.77.0.10", "10.77.0.11", "10.77.0.12", "10.77.0.13"},
		EtcdSANs:      []string{"10.77.0.11", "10.77.0.12", "10.77.0.13"},
		Nodes:         []string{"cp-1", "worker-1"},
	}
}

func TestEnsurePKICertsVerifyAgainstTheirCA(t *testing.T) {
	dir := t.TempDir()
	p, err := EnsurePKI(dir, testPKISpec())
	require.NoError(t, err)

	pool := func(name string) *x509.CertPool {
		cp := x509.NewCertPool()
		cp.AddCert(readCert(t, filepath.Join(p.Dir, name+".crt")))
		return cp
	}
	cases := []struct {
		cert, ca string
		usage    x509.ExtKeyUsage
	}{
		{"apiserver", "ca", x509.ExtKeyUsageServerAuth},
		{"apiserver-kubelet-client", "ca", x509.ExtKeyUsageClientAuth},
		{"front-proxy-client", "front-proxy-ca", x509.ExtKeyUsageClientAuth},
		{"etcd/server", "etcd/ca", x509.ExtKeyUsageServerAuth},
		{"etcd/peer", "etcd/ca", x509.ExtKeyUsageClientAuth},
		{"apiserver-etcd-client", "etcd/ca", x509.ExtKeyUsageClientAuth},
	}
	for _, c := range cases {
		t.Run(c.cert, func(t *testing.T) {
			cert := readCert(t, filepath.Join(p.Dir, c.cert+".crt"))
			_, err := cert.Verify(x509.VerifyOptions{Roots: pool(c.ca), KeyUsages: []x509.ExtKeyUsage{c.usage}})
			require.NoError(t, err)
		})
	}

	api := readCert(t, filepath.Join(p.Dir, "apiserver.crt"))
	for _, host := range []string{"10.77.0.10", "10.77.0.13", ServiceClusterIP, "127.0.0.1", "localhost", "kubernetes.default.svc"} {
		require.NoError(t, api.VerifyHostname(host), host)
	}
	etcd := readCert(t, filepath.Join(p.Dir, "etcd/server.crt"))
	require.NoError(t, etcd.VerifyHostname("10.77.0.12"))
	require.FileExists(t, filepath.Join(p.Dir, "sa.key"))
	require.FileExists(t, filepath.Join(p.Dir, "sa.pub"))
}

func TestEnsurePKIKubeconfigs(t *testing.T) {
	p, err := EnsurePKI(t.TempDir(), testPKISpec())
	require.NoError(t, err)
	ca := x509.NewCertPool()
	ca.AddCert(readCert(t, filepath.Join(p.Dir, "ca.crt")))

	for file, want := range map[string][2]string{
		"admin.conf":              {"kubernetes-admin", "system:masters"},
		"controller-manager.conf": {"system:kube-controller-manager", ""},
		"scheduler.conf":          {"system:kube-scheduler", ""},
		"kubelet-worker-1.conf":   {"system:node:worker-1", "system:nodes"},
	} {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(p.KubeconfigDir, file))
			require.NoError(t, err)
			_, err = kube.NewFromKubeconfig(kube.DefaultConfig(), b)
			require.NoError(t, err, "client-go accepts it")
			cfg := parseKubeconfig(t, b)
			require.Equal(t, "https://10.77.0.10:6443", cfg.server)
			blk, _ := pem.Decode(cfg.clientCert)
			require.NotNil(t, blk)
			cert, err := x509.ParseCertificate(blk.Bytes)
			require.NoError(t, err)
			require.Equal(t, want[0], cert.Subject.CommonName)
			if want[1] != "" {
				require.Contains(t, cert.Subject.Organization, want[1])
			}
			_, err = cert.Verify(x509.VerifyOptions{Roots: ca, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			require.NoError(t, err)
		})
	}
}

func TestEnsurePKIIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	p, err := EnsurePKI(dir, testPKISpec())
	require.NoError(t, err)
	before := readCert(t, filepath.Join(p.Dir, "ca.crt"))
	admin, err := os.ReadFile(p.AdminKubeconfig())
	require.NoError(t, err)

	spec := testPKISpec()
	spec.Nodes = append(spec.Nodes, "worker-2")
	p, err = EnsurePKI(dir, spec)
	require.NoError(t, err)
	require.Equal(t, before.Raw, readCert(t, filepath.Join(p.Dir, "ca.crt")).Raw)
	again, err := os.ReadFile(p.AdminKubeconfig())
	require.NoError(t, err)
	require.Equal(t, admin, again)
	require.FileExists(t, p.KubeletKubeconfig("worker-2"))
}

// kubeconfig is what a test needs of a kubeconfig: its current context's
// server and client certificate.
type kubeconfig struct {
	server     string
	clientCert []byte
}

// parseKubeconfig resolves the current context of a clientcmd v1 Config.
func parseKubeconfig(t *testing.T, b []byte) kubeconfig {
	t.Helper()
	var cfg struct {
		Kind           string
		CurrentContext string `json:"current-context"`
		Clusters       []struct {
			Name    string
			Cluster struct{ Server string }
		}
		Users []struct {
			Name string
			User struct {
				ClientCertificateData []byte `json:"client-certificate-data"`
			}
		}
		Contexts []struct {
			Name    string
			Context struct{ Cluster, User string }
		}
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	require.Equal(t, "Config", cfg.Kind)
	var out kubeconfig
	found := 0
	for _, c := range cfg.Contexts {
		if c.Name != cfg.CurrentContext {
			continue
		}
		for _, cl := range cfg.Clusters {
			if cl.Name == c.Context.Cluster {
				out.server = cl.Cluster.Server
				found++
			}
		}
		for _, u := range cfg.Users {
			if u.Name == c.Context.User {
				out.clientCert = u.User.ClientCertificateData
				found++
			}
		}
	}
	require.Equal(t, 2, found, "current context %q resolves to one cluster and one user", cfg.CurrentContext)
	return out
}
