package lab

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ErrPKI reports a certificate or key that could not be created or loaded.
var ErrPKI = errors.New("lab pki")

// PKISpec says which certificates a cluster needs. It mirrors what kubeadm
// generates under /etc/kubernetes/pki so that the static pods, the kubelets
// and molt's own code see the file layout they would on a real cluster.
type PKISpec struct {
	// ClusterName names the cluster in kubeconfigs.
	ClusterName string
	// APIEndpoint is the host:port every kubeconfig points at (the control
	// plane load balancer).
	APIEndpoint string
	// APIServerSANs are extra names and IPs for the apiserver serving cert:
	// the LB address and every control-plane address. 10.96.0.1, localhost,
	// 127.0.0.1 and the kubernetes.default names are always added.
	APIServerSANs []string
	// EtcdSANs are the names and IPs etcd serves and peers on.
	EtcdSANs []string
	// Nodes get a kubelet kubeconfig each (system:node:<name>).
	Nodes []string
	// Validity of every certificate; a lab lives for hours, not years.
	Validity time.Duration
}

// PKI is a generated set of certificates on disk.
type PKI struct {
	// Dir is the kubeadm-style pki directory (ca.crt, apiserver.crt, etcd/...).
	Dir string
	// KubeconfigDir holds admin.conf, controller-manager.conf, scheduler.conf
	// and kubelet-<node>.conf.
	KubeconfigDir string
}

// AdminKubeconfig is the path of the cluster-admin kubeconfig.
func (p *PKI) AdminKubeconfig() string { return filepath.Join(p.KubeconfigDir, "admin.conf") }

// KubeletKubeconfig is the path of a node's kubelet kubeconfig.
func (p *PKI) KubeletKubeconfig(node string) string {
	return filepath.Join(p.KubeconfigDir, "kubelet-"+node+".conf")
}

// keyPair is a certificate with its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// certRequest describes one leaf certificate.
type certRequest struct {
	name   string // file base name under the pki dir, e.g. "etcd/server"
	cn     string
	orgs   []string
	sans   []string
	usages []x509.ExtKeyUsage
}

// EnsurePKI creates every certificate and kubeconfig the lab needs under
// dir/pki and dir/kubeconfig. Files that already exist are kept, so a second
// `lab up` reuses the cluster's identity instead of invalidating it.
func EnsurePKI(dir string, spec PKISpec) (*PKI, error) {
	if spec.Validity == 0 {
		spec.Validity = 365 * 24 * time.Hour
	}
	p := &PKI{Dir: filepath.Join(dir, "pki"), KubeconfigDir: filepath.Join(dir, "kubeconfig")}
	for _, d := range []string{p.Dir, filepath.Join(p.Dir, "etcd"), p.KubeconfigDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPKI, err)
		}
	}
	ca, err := p.ensureCA("ca", "kubernetes", spec.Validity)
	if err != nil {
		return nil, err
	}
	fpCA, err := p.ensureCA("front-proxy-ca", "front-proxy-ca", spec.Validity)
	if err != nil {
		return nil, err
	}
	etcdCA, err := p.ensureCA("etcd/ca", "etcd-ca", spec.Validity)
	if err != nil {
		return nil, err
	}
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	apiSANs := append([]string{
		"kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "localhost", "127.0.0.1", ServiceClusterIP,
	}, spec.APIServerSANs...)
	etcdSANs := append([]string{"localhost", "127.0.0.1"}, spec.EtcdSANs...)
	leaves := []struct {
		ca  keyPair
		req certRequest
	}{
		{ca, certRequest{name: "apiserver", cn: "kube-apiserver", sans: apiSANs, usages: server}},
		{ca, certRequest{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"kubeadm:cluster-admins"}, usages: client}},
		{fpCA, certRequest{name: "front-proxy-client", cn: "front-proxy-client", usages: client}},
		{etcdCA, certRequest{name: "etcd/server", cn: "etcd-server", sans: etcdSANs, usages: both}},
		{etcdCA, certRequest{name: "etcd/peer", cn: "etcd-peer", sans: etcdSANs, usages: both}},
		{etcdCA, certRequest{name: "etcd/healthcheck-client", cn: "kube-etcd-healthcheck-client", usages: client}},
		{etcdCA, certRequest{name: "apiserver-etcd-client", cn: "kube-apiserver-etcd-client", usages: client}},
	}
	for _, l := range leaves {
		if _, err := p.ensureLeaf(l.ca, l.req, spec.Validity); err != nil {
			return nil, err
		}
	}
	if err := p.ensureServiceAccountKey(); err != nil {
		return nil, err
	}
	confs := []struct {
		file string
		cn   string
		orgs []string
	}{
		{"admin.conf", "kubernetes-admin", []string{"kubeadm:cluster-admins", "system:masters"}},
		{"controller-manager.conf", "system:kube-controller-manager", nil},
		{"scheduler.conf", "system:kube-scheduler", nil},
	}
	for _, n := range spec.Nodes {
		confs = append(confs, struct {
			file string
			cn   string
			orgs []string
		}{"kubelet-" + n + ".conf", "system:node:" + n, []string{"system:nodes"}})
	}
	for _, c := range confs {
		path := filepath.Join(p.KubeconfigDir, c.file)
		if exists(path) {
			continue
		}
		kp, err := p.ensureLeaf(ca, certRequest{name: "", cn: c.cn, orgs: c.orgs, usages: client}, spec.Validity)
		if err != nil {
			return nil, err
		}
		if err := writeKubeconfig(path, spec.ClusterName, "https://"+spec.APIEndpoint, ca.cert, kp); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ensureCA loads name.crt/name.key or creates a self-signed CA.
func (p *PKI) ensureCA(name, cn string, validity time.Duration) (keyPair, error) {
	if kp, err := p.load(name); err == nil {
		return kp, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("%w: key for %s: %v", ErrPKI, name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return keyPair{}, fmt.Errorf("%w: sign %s: %v", ErrPKI, name, err)
	}
	cert, _ := x509.ParseCertificate(der)
	kp := keyPair{cert: cert, key: key}
	return kp, p.save(name, kp)
}

// ensureLeaf loads or creates a certificate signed by ca. An empty req.name
// means "do not store it" (kubeconfig client certs live in the kubeconfig).
func (p *PKI) ensureLeaf(ca keyPair, req certRequest, validity time.Duration) (keyPair, error) {
	if req.name != "" {
		if kp, err := p.load(req.name); err == nil {
			return kp, nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("%w: key for %s: %v", ErrPKI, req.cn, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: req.cn, Organization: req.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  req.usages,
	}
	for _, s := range req.sans {
		if ip := net.ParseIP(s); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("%w: sign %s: %v", ErrPKI, req.cn, err)
	}
	cert, _ := x509.ParseCertificate(der)
	kp := keyPair{cert: cert, key: key}
	if req.name == "" {
		return kp, nil
	}
	return kp, p.save(req.name, kp)
}

// ensureServiceAccountKey writes sa.key/sa.pub. RSA because every token
// consumer accepts RS256, the kubeadm default.
func (p *PKI) ensureServiceAccountKey() error {
	keyPath, pubPath := filepath.Join(p.Dir, "sa.key"), filepath.Join(p.Dir, "sa.pub")
	if exists(keyPath) && exists(pubPath) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("%w: service-account key: %v", ErrPKI, err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("%w: service-account key: %v", ErrPKI, err)
	}
	if err := writePEM(keyPath, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), 0o600); err != nil {
		return err
	}
	return writePEM(pubPath, "PUBLIC KEY", pub, 0o644)
}

func (p *PKI) load(name string) (keyPair, error) {
	certPEM, err := os.ReadFile(filepath.Join(p.Dir, name+".crt"))
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(p.Dir, name+".key"))
	if err != nil {
		return keyPair{}, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return keyPair{}, fmt.Errorf("%w: %s: bad PEM", ErrPKI, name)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("%w: %s: %v", ErrPKI, name, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("%w: %s: %v", ErrPKI, name, err)
	}
	return keyPair{cert: cert, key: key}, nil
}

func (p *PKI) save(name string, kp keyPair) error {
	keyDER, err := x509.MarshalECPrivateKey(kp.key.(*ecdsa.PrivateKey))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrPKI, name, err)
	}
	if err := writePEM(filepath.Join(p.Dir, name+".key"), "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(filepath.Join(p.Dir, name+".crt"), "CERTIFICATE", kp.cert.Raw, 0o644)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("%w: %v", ErrPKI, err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
