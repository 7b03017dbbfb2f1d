package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrNoEtcd means this host holds no etcd client credentials: it is not a
// control-plane host of a stacked etcd, so it cannot take snapshots or
// check etcd's health.
var ErrNoEtcd = errors.New("no etcd client credentials on this host")

// etcdDialTimeout bounds one connection to one member.
const etcdDialTimeout = 5 * time.Second

// etcdTLS reads the host's etcd client credentials (kubeadm's layout by
// default, docs/backup.md): they stay where they are, the agent runs as
// root and reads them only when it needs etcd.
func (a *Agent) etcdTLS() (*tls.Config, error) {
	caFile, certFile, keyFile := a.path(a.cfg.EtcdCAFile), a.path(a.cfg.EtcdCertFile), a.path(a.cfg.EtcdKeyFile)
	if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (%s)", ErrNoEtcd, certFile)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("etcd CA %s: no certificate in it", caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// etcdConfig is the client configuration for this host's etcd cluster:
// its credentials and every member's client URL, learnt from the members
// listed in EtcdEndpoints (the local member by default), so a caller can
// reach the other members when the local one is sick. The configured
// endpoints come first, then the rest in the order etcd lists them.
func (a *Agent) etcdConfig(ctx context.Context) (clientv3.Config, error) {
	tlsCfg, err := a.etcdTLS()
	if err != nil {
		return clientv3.Config{}, err
	}
	cfg := clientv3.Config{
		Endpoints:   slices.Clone(a.cfg.EtcdEndpoints),
		TLS:         tlsCfg,
		DialTimeout: etcdDialTimeout,
		Logger:      zap.NewNop(),
	}
	if len(cfg.Endpoints) == 0 {
		return clientv3.Config{}, errors.New("no etcd endpoints configured (EtcdEndpoints)")
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return clientv3.Config{}, fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, etcdDialTimeout)
	defer cancel()
	members, err := cli.MemberList(lctx)
	if err != nil {
		// Listing needs one answering member; without it the configured
		// endpoints are all there is, and the caller's checks will say why.
		a.log.Warn("etcd members not listed; using the configured endpoints", "err", err)
		return cfg, nil
	}
	for _, m := range members.Members {
		for _, u := range m.ClientURLs {
			if !slices.Contains(cfg.Endpoints, u) {
				cfg.Endpoints = append(cfg.Endpoints, u)
			}
		}
	}
	return cfg, nil
}
