package lab

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// writeKubeconfig writes a kubeconfig with an embedded client certificate,
// the shape kubeadm writes for admin.conf and kubelet.conf.
func writeKubeconfig(path, cluster, server string, ca *x509.Certificate, kp keyPair) error {
	b, err := renderKubeconfig(cluster, server, ca, kp)
	if err != nil {
		return fmt.Errorf("%w: kubeconfig %s: %v", ErrPKI, path, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("%w: kubeconfig %s: %v", ErrPKI, path, err)
	}
	return nil
}

// renderKubeconfig is a kubeconfig (clientcmd's v1 Config) with one
// cluster, one user named after the certificate's CN and one context,
// current. Certificate and key data are base64 PEM, as clientcmd writes.
func renderKubeconfig(cluster, server string, ca *x509.Certificate, kp keyPair) ([]byte, error) {
	keyDER, err := x509.MarshalECPrivateKey(kp.key.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, err
	}
	b64PEM := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	user := kp.cert.Subject.CommonName
	ctx := user + "@" + cluster
	return yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"clusters": []any{map[string]any{
			"name": cluster,
			"cluster": map[string]any{
				"server":                     server,
				"certificate-authority-data": b64PEM("CERTIFICATE", ca.Raw),
			},
		}},
		"users": []any{map[string]any{
			"name": user,
			"user": map[string]any{
				"client-certificate-data": b64PEM("CERTIFICATE", kp.cert.Raw),
				"client-key-data":         b64PEM("EC PRIVATE KEY", keyDER),
			},
		}},
		"contexts": []any{map[string]any{
			"name":    ctx,
			"context": map[string]any{"cluster": cluster, "user": user},
		}},
		"current-context": ctx,
	})
}
