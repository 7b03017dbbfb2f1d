package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/raftstore"
)

// Bounds of a join request (POST /v1/members).
const (
	// MaxMemberIDLen bounds a member's ID.
	MaxMemberIDLen = 128
	// MemberDialTimeout bounds the leader's check that a joining member's
	// Raft address answers.
	MemberDialTimeout = 2 * time.Second
)

// Join adds a member (leader only). It is idempotent: the same ID with
// the same addresses changes nothing. Refused before anything reaches the
// log:
//   - malformed IDs and addresses (422 validation, rule member);
//   - the leader's own ID, whatever the addresses (409, member-exists):
//     a join that rewrote the leader's HTTP address would send every
//     follower's forwarded write elsewhere;
//   - an ID that is a member at other addresses, or an address another
//     member has (409, member-exists): remove the old member first;
//   - a new member whose Raft address does not accept a TCP connection
//     within MemberDialTimeout (422, member-unreachable): adding a voter
//     that cannot vote raises the quorum at once, and a one-member
//     coordinator would lose its leader for good.
func (c *Coordinator) Join(ctx context.Context, r api.JoinRequest) error {
	if err := checkJoin(r); err != nil {
		return err
	}
	noteAudit(ctx, func(a *AuditRecord) {
		a.Detail = fmt.Sprintf("member %s, raft %s, http %s", r.ID, r.RaftAddr, r.HTTPAddr)
	})
	if !c.store.IsLeader() {
		return c.store.Join(ctx, r.ID, r.RaftAddr, r.HTTPAddr) // ErrNotLeader, without a round trip
	}
	ms, err := c.store.Members()
	if err != nil {
		return err
	}
	exists := func(detail string, args ...any) error {
		return &RuleError{Rule: "member-exists", Detail: fmt.Sprintf(detail, args...), Err: ErrConflict}
	}
	known := false
	for _, m := range ms {
		switch {
		case m.ID == r.ID && m.Leader:
			return exists("%s is the leader; a member cannot join under the leader's ID", r.ID)
		case m.ID == r.ID && (m.RaftAddr != r.RaftAddr || (m.HTTPAddr != "" && m.HTTPAddr != r.HTTPAddr)):
			return exists("%s is a member at raft %s, http %q; remove it before it joins at other addresses", r.ID, m.RaftAddr, m.HTTPAddr)
		case m.ID == r.ID:
			known = true
		case m.RaftAddr == r.RaftAddr:
			return exists("raft address %s belongs to member %s", r.RaftAddr, m.ID)
		case r.HTTPAddr != "" && m.HTTPAddr == r.HTTPAddr:
			return exists("http address %s belongs to member %s", r.HTTPAddr, m.ID)
		}
	}
	if !known {
		d := net.Dialer{Timeout: MemberDialTimeout}
		dctx, cancel := context.WithTimeout(ctx, MemberDialTimeout)
		conn, err := d.DialContext(dctx, "tcp", r.RaftAddr)
		cancel()
		if err != nil {
			return &RuleError{Rule: "member-unreachable", Detail: fmt.Sprintf("raft address %s of %s does not answer: %v", r.RaftAddr, r.ID, err), Err: ErrInvalid}
		}
		_ = conn.Close()
	}
	if err := c.store.Join(ctx, r.ID, r.RaftAddr, r.HTTPAddr); err != nil {
		return fmt.Errorf("join %s: %w", r.ID, err)
	}
	c.kickMembers() // ask the new member what it reads
	return nil
}

// checkJoin checks a join request's fields on their own.
func checkJoin(r api.JoinRequest) error {
	bad := func(format string, args ...any) error {
		return &RuleError{Rule: "member", Detail: fmt.Sprintf(format, args...), Err: ErrInvalid}
	}
	if r.ID == "" || r.RaftAddr == "" {
		return bad("id and raftAddr are required")
	}
	if len(r.ID) > MaxMemberIDLen {
		return bad("id is %d bytes, at most %d", len(r.ID), MaxMemberIDLen)
	}
	for _, ch := range r.ID {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.' || ch == '_') {
			return bad("id %q: want letters, digits, '-', '.' and '_'", r.ID)
		}
	}
	if err := checkHostPort(r.RaftAddr); err != nil {
		return bad("raftAddr: %v", err)
	}
	if r.HTTPAddr != "" {
		if err := checkHostPort(r.HTTPAddr); err != nil {
			return bad("httpAddr: %v", err)
		}
	}
	return nil
}

// checkHostPort accepts host:port with a port in 1..65535.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("%q: port %q is not 1..65535", addr, port)
	}
	return nil
}

// RemoveMember removes a member (leader only). An ID that is not a member
// is refused (404, rule member-unknown) and changes nothing: a typo in an
// ID must not read as a removal that happened.
//
// Removal needs a leader, and a leader needs a quorum of voters: a voter
// that never answers (Join refuses one whose Raft address does not
// answer, but a member can die after joining) costs the quorum of a
// two-member coordinator, which then cannot remove it. Online, nothing
// can; molt has no offline recovery of a coordinator's membership yet
// (docs/api.md, Members).
func (c *Coordinator) RemoveMember(ctx context.Context, id string) error {
	if err := c.store.Remove(ctx, id); err != nil {
		if errors.Is(err, raftstore.ErrUnknownMember) {
			return &RuleError{Rule: "member-unknown", Detail: fmt.Sprintf("%s is not a member (GET /v1/members lists them)", id), Err: ErrNotFound}
		}
		return fmt.Errorf("remove member %s: %w", id, err)
	}
	c.kickMembers() // the record drops the member
	return nil
}
