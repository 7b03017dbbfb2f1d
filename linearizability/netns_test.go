//go:build linearizability

package linearizability

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moltproject/molt/lab"
)

// The test's network, apart from the lab's (10.77.0.0/24, lab.lock): a
// namespace holding a bridge, and one namespace per member joined to it by
// a veth pair. Nothing is added to the machine's own namespace; the test
// dials into the bridge's namespace (dialInNamespace).
const (
	nsPrefix  = "moltp-"
	netNS     = nsPrefix + "net"
	bridge    = "br0"
	subnet    = "10.78.0"
	gatewayIP = subnet + ".1"
	// lockFile serialises runs of this test on one machine: the names
	// and addresses above are fixed.
	lockFile = "/run/moltp-linearizability.lock"
)

// memberIP is the address of member i (1-based).
func memberIP(i int) string { return fmt.Sprintf("%s.%d", subnet, 10+i) }

func memberNS(i int) string { return fmt.Sprintf("%sm%d", nsPrefix, i) }

// network creates the namespaces for n members and removes them when the
// test ends (and any left by a run that was killed, first).
func network(t *testing.T, n int) {
	t.Helper()
	lock, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); lock.Close() })
	remove := func() {
		for i := 1; i <= n; i++ {
			_ = exec.Command("ip", "netns", "del", memberNS(i)).Run()
		}
		_ = exec.Command("ip", "netns", "del", netNS).Run()
	}
	remove()
	t.Cleanup(remove)
	steps := [][]string{
		{"netns", "add", netNS},
		{"-n", netNS, "link", "set", "lo", "up"},
		{"-n", netNS, "link", "add", bridge, "type", "bridge"},
		{"-n", netNS, "addr", "add", gatewayIP + "/24", "dev", bridge},
		{"-n", netNS, "link", "set", bridge, "up"},
	}
	for i := 1; i <= n; i++ {
		ns, veth := memberNS(i), fmt.Sprintf("vm%d", i)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", netNS, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", netNS, "link", "set", veth, "master", bridge},
			[]string{"-n", netNS, "link", "set", veth, "up"},
			[]string{"-n", ns, "addr", "add", memberIP(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
}

// partition drops, inside member i's namespace, every packet to or from
// the other members; its clients (the bridge's address) still reach it.
func partition(i, n int) error {
	var peers []string
	for j := 1; j <= n; j++ {
		if j != i {
			peers = append(peers, memberIP(j))
		}
	}
	set := strings.Join(peers, ", ")
	rules := fmt.Sprintf(`table inet moltp {
	chain in { type filter hook input priority 0; policy accept; ip saddr { %s } drop; }
	chain out { type filter hook output priority 0; policy accept; ip daddr { %s } drop; }
}
`, set, set)
	cmd := exec.Command("ip", "netns", "exec", memberNS(i), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", memberNS(i), err, out)
	}
	return nil
}

// heal removes member i's partition.
func heal(i int) error {
	if out, err := exec.Command("ip", "netns", "exec", memberNS(i), "nft", "delete", "table", "inet", "moltp").CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", memberNS(i), err, out)
	}
	return nil
}

// dialInNamespace dials from the bridge's namespace (lab.DialInNamespace).
func dialInNamespace(ctx context.Context, network, addr string) (net.Conn, error) {
	return lab.DialInNamespace(ctx, filepath.Join("/run/netns", netNS), network, addr)
}
