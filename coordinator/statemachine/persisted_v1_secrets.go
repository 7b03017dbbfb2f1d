package statemachine

import (
	"encoding/json"
	"time"

	"github.com/moltproject/molt/internal/conv"
)

// Persisted form of the secrets commands (secrets.go; see persisted.go:
// append-only).

type rewrapSecretsCmdV1 struct {
	Kubeconfigs []kubeconfigRewrapV1 `json:"kubeconfigs"`
	Now         time.Time            `json:"now"`
}

type kubeconfigRewrapV1 struct {
	Cluster string `json:"cluster"`
	Old     string `json:"old"`
	Sealed  string `json:"sealed"`
}

func (c RewrapSecretsCmd) persistedV1() any {
	return rewrapSecretsCmdV1{Now: c.Now,
		Kubeconfigs: conv.Slice(c.Kubeconfigs, func(k KubeconfigRewrap) kubeconfigRewrapV1 { return kubeconfigRewrapV1(k) })}
}

func (c RewrapSecretsCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *RewrapSecretsCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p rewrapSecretsCmdV1) RewrapSecretsCmd {
		return RewrapSecretsCmd{Now: p.Now,
			Kubeconfigs: conv.Slice(p.Kubeconfigs, func(k kubeconfigRewrapV1) KubeconfigRewrap { return KubeconfigRewrap(k) })}
	})
}
