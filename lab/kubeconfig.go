package lab

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig with an embedded client certificate,
// the shape kubeadm writes for admin.conf and kubelet.conf.
func writeKubeconfig(path, cluster, server string, ca *x509.Certificate, kp keyPair) error {
	keyDER, err := x509.MarshalECPrivateKey(kp.key.(*ecdsa.PrivateKey))
	if err != nil {
		return fmt.Errorf("%w: kubeconfig %s: %v", ErrPKI, path, err)
	}
	user := kp.cert.Subject.CommonName
	ctx := user + "@" + cluster
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	cfg.Contexts[ctx] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	cfg.CurrentContext = ctx
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("%w: kubeconfig %s: %v", ErrPKI, path, err)
	}
	return nil
}
