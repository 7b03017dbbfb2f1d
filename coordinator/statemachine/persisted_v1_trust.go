package statemachine

import (
	"encoding/json"
	"time"
)

// Persisted form of the credential commands and records (trust.go; see
// persisted.go: append-only).

type tokenRecordV1 struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	SecretHash  string    `json:"secretHash"`
	Cluster     string    `json:"cluster,omitempty"`
	Role        string    `json:"role,omitempty"`
	Description string    `json:"description,omitempty"`
	Expires     time.Time `json:"expires,omitzero"`
	Uses        int       `json:"uses,omitempty"`
	Used        int       `json:"used,omitempty"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	Created     time.Time `json:"created"`
}

func tokenRecordToV1(t TokenRecord) tokenRecordV1   { return tokenRecordV1(t) }
func tokenRecordFromV1(t tokenRecordV1) TokenRecord { return TokenRecord(t) }

type putTokenCmdV1 struct {
	Token tokenRecordV1 `json:"token"`
	Now   time.Time     `json:"now"`
}

func (c PutTokenCmd) persistedV1() any {
	return putTokenCmdV1{Token: tokenRecordToV1(c.Token), Now: c.Now}
}

func (c PutTokenCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PutTokenCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p putTokenCmdV1) PutTokenCmd {
		return PutTokenCmd{Token: tokenRecordFromV1(p.Token), Now: p.Now}
	})
}

type deleteTokenCmdV1 struct {
	ID  string    `json:"id"`
	Now time.Time `json:"now"`
}

func (c DeleteTokenCmd) persistedV1() any { return deleteTokenCmdV1(c) }

func (c DeleteTokenCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *DeleteTokenCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p deleteTokenCmdV1) DeleteTokenCmd { return DeleteTokenCmd(p) })
}

type enrollAgentCmdV1 struct {
	TokenID string    `json:"tokenId"`
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	Serial  string    `json:"serial"`
	Now     time.Time `json:"now"`
}

func (c EnrollAgentCmd) persistedV1() any { return enrollAgentCmdV1(c) }

func (c EnrollAgentCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *EnrollAgentCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p enrollAgentCmdV1) EnrollAgentCmd { return EnrollAgentCmd(p) })
}

type renewAgentCertCmdV1 struct {
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	Old     string    `json:"old"`
	Serial  string    `json:"serial"`
	Now     time.Time `json:"now"`
}

func (c RenewAgentCertCmd) persistedV1() any { return renewAgentCertCmdV1(c) }

func (c RenewAgentCertCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *RenewAgentCertCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p renewAgentCertCmdV1) RenewAgentCertCmd { return RenewAgentCertCmd(p) })
}
