package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/trust"
)

// ensureCredentials makes sure the agent holds a current certificate:
// stored ones if valid, else it enrolls. It returns only when it has one or
// ctx ends.
func (a *Agent) ensureCredentials(ctx context.Context) error {
	ok, err := a.creds.load(a.identity(), a.clock.Now())
	if err != nil {
		a.log.Warn("stored credentials unusable; enrolling again", "err", err)
	}
	if ok {
		a.log.Info("using stored certificate", "not_after", a.creds.leaf.Load().NotAfter)
		return nil
	}
	return a.enroll(ctx)
}

func (a *Agent) identity() trust.Identity { return trust.AgentIdentity(a.cfg.Cluster, a.cfg.Node) }

// enroll gets a first certificate with the bootstrap token, retrying until
// the coordinator signs one or ctx ends. A refused token is retried too,
// slowly: the operator may register the node or issue a new token.
func (a *Agent) enroll(ctx context.Context) error {
	if a.cfg.BootstrapToken == "" || a.cfg.CAPin == "" {
		return fmt.Errorf("%w: no valid certificate in %s and no bootstrap token and CA pin to enroll with", ErrConfig, a.creds.dir)
	}
	retry := a.cfg.RetryMin
	for {
		a.loopTop(ctx, LoopMain)
		err := a.enrollOnce(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var p *api.Problem
		if errors.As(err, &p) && (p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden) {
			a.log.Error("enrollment refused; retrying", "rule", p.Rule, "detail", p.Detail, "in", a.cfg.RetryMax)
			a.sleep(ctx, a.cfg.RetryMax)
			continue
		}
		a.log.Warn("enrollment failed; retrying", "err", err, "in", retry)
		retry = a.sleep(ctx, retry)
	}
}

func (a *Agent) enrollOnce(ctx context.Context) error {
	var seen *x509.Certificate
	tc, err := trust.PinnedClient(a.cfg.CAPin, func(c *x509.Certificate) { seen = c })
	if err != nil {
		return err
	}
	keyPEM, csr, err := a.newCSR()
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	cl := client.NewEndpoints(a.client.Endpoints(), &http.Client{Transport: tr, Timeout: 30 * time.Second})
	cl.SetBearerToken(a.cfg.BootstrapToken)
	var resp api.EnrollResponse
	if _, err := cl.Do(ctx, http.MethodPost, "/v1/agents/enroll", api.EnrollRequest{Cluster: a.cfg.Cluster, Node: a.cfg.Node, CSR: string(csr)}, &resp); err != nil {
		return err
	}
	ca, err := trust.ParseCert([]byte(resp.CA))
	if err != nil {
		return fmt.Errorf("enrollment answer: %w", err)
	}
	if pin, _ := trust.ParsePin(a.cfg.CAPin); trust.Pin(ca) != pin || seen == nil || trust.Pin(seen) != pin {
		return fmt.Errorf("enrollment answer: the CA sent is not the pinned CA %s", a.cfg.CAPin)
	}
	if err := a.creds.store([]byte(resp.CA), []byte(resp.Certificate), keyPEM, a.identity()); err != nil {
		return fmt.Errorf("enrollment answer: %w", err)
	}
	// The registration that follows may reach a member whose replica has
	// not applied the enrollment yet: asked for its index, that member
	// catches up first instead of refusing the new certificate.
	a.client.Observe(cl.Seen())
	a.log.Info("enrolled", "not_after", resp.NotAfter)
	return nil
}

// rotate renews the certificate at two thirds of its lifetime, on the
// agent's clock, until ctx ends. A failed renewal is retried with backoff;
// once the certificate expired, the agent enrolls again if it still has a
// bootstrap token.
func (a *Agent) rotate(ctx context.Context) {
	retry := a.cfg.RetryMin
	for ctx.Err() == nil {
		leaf := a.creds.leaf.Load()
		if wait := trust.RenewAt(leaf).Sub(a.clock.Now()); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-a.clock.After(wait):
			}
		}
		err := a.renewOnce(ctx)
		if err == nil {
			retry = a.cfg.RetryMin
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if !a.clock.Now().Before(leaf.NotAfter) && a.cfg.BootstrapToken != "" {
			a.log.Warn("certificate expired before it could be renewed; enrolling again", "err", err)
			if a.enroll(ctx) == nil {
				a.apiTransport.renew()
			}
			continue
		}
		a.log.Warn("certificate renewal failed; retrying", "err", err, "in", retry, "expires", leaf.NotAfter)
		retry = a.sleep(ctx, retry)
	}
}

// renewOnce asks for a new certificate for a new key, authenticated by the
// current certificate.
func (a *Agent) renewOnce(ctx context.Context) error {
	keyPEM, csr, err := a.newCSR()
	if err != nil {
		return err
	}
	var resp api.EnrollResponse
	path := "/v1/agents/" + a.cfg.Cluster + "/" + a.cfg.Node + "/certificate"
	if _, err := a.client.Do(ctx, http.MethodPost, path, api.RenewRequest{CSR: string(csr)}, &resp); err != nil {
		return err
	}
	if ca, err := trust.ParseCert([]byte(resp.CA)); err != nil || trust.Pin(ca) != trust.Pin(a.creds.ca.Load()) {
		return errors.New("renewal answer: the CA changed")
	}
	if err := a.creds.store([]byte(resp.CA), []byte(resp.Certificate), keyPEM, a.identity()); err != nil {
		return fmt.Errorf("renewal answer: %w", err)
	}
	// New connections present the new certificate; kept ones would go on
	// with the old one until they close. The coordinator's client gets
	// new connections for every later request, even while a long poll
	// keeps its (HTTP/2) connection busy.
	a.apiTransport.renew()
	a.http.CloseIdleConnections()
	a.log.Info("certificate renewed", "not_after", resp.NotAfter)
	return nil
}

// newCSR makes a new key on the host (written 0600 before the CSR leaves)
// and a CSR naming this agent.
func (a *Agent) newCSR() (keyPEM, csr []byte, err error) {
	_, keyPEM, err = a.creds.newKey()
	if err != nil {
		return nil, nil, err
	}
	key, err := trust.ParseKey(keyPEM)
	if err != nil {
		return nil, nil, err
	}
	csr, err = trust.NewCSR(a.identity(), key)
	return keyPEM, csr, err
}
