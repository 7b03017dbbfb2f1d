package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/moltproject/molt/lab"
)

// How the chaos runs act on the lab. Everything stays inside the lab's
// network namespaces and its hosts: nftables tables of their own
// (molt_chaos_*) in the lab's and the hosts' namespaces, signals to the
// members (children of this process) and to processes of the lab's hosts,
// files of the environment's artifact directory.

// pid returns the member's process ID, 0 when it does not run.
func (m *Member) pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	select {
	case <-m.done:
		return 0
	default:
	}
	return m.cmd.Process.Pid
}

// signal sends sig to the member's process.
func (m *Member) signal(sig syscall.Signal) error {
	pid := m.pid()
	if pid == 0 {
		return fmt.Errorf("member %s is not running", m.ID)
	}
	return syscall.Kill(pid, sig)
}

// memberPorts are a member's HTTP and Raft ports.
func memberPorts(m *Member) []string {
	var out []string
	for _, a := range []string{m.HTTPAddr, m.RaftAddr} {
		if i := strings.LastIndex(a, ":"); i >= 0 {
			out = append(out, a[i+1:])
		}
	}
	return out
}

// Partitions are drawn with nftables in the lab's namespace, where the
// members share an address (10.77.0.1, Raft on 127.0.0.1): packets are
// told apart by the member that sends them. Each member is moved into a
// cgroup v2 of its own (partitions match `socket cgroupv2`), and its
// connections to the other members made before the move are reset so
// they are made again from the cgroup. The cgroup holds nothing else and
// is removed when its member is gone.
type memberCgroups struct {
	root   string // the cgroup v2 hierarchy: /sys/fs/cgroup or /sys/fs/cgroup/unified
	prefix string
	ns     string // the members' network namespace
}

func newMemberCgroups(prefix, ns string) (*memberCgroups, error) {
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(root, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return &memberCgroups{root: root, prefix: prefix, ns: ns}, nil
		}
	}
	return nil, errors.New("chaos: no cgroup v2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified (member partitions match it)")
}

// name is member m's cgroup, relative to the root (one level deep).
func (g *memberCgroups) name(m *Member) string { return g.prefix + "chaos-" + m.ID }

// tag moves every running member not yet in its cgroup there and resets
// its connections to the other members.
func (g *memberCgroups) tag(ctx context.Context, members []*Member) error {
	moved := map[int]bool{}
	for _, m := range members {
		pid := m.pid()
		if pid == 0 {
			continue
		}
		dir := filepath.Join(g.root, g.name(m))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("chaos: cgroup for %s: %w", m.ID, err)
		}
		cur, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if strings.Contains(string(cur), "0::/"+g.name(m)+"\n") {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("chaos: move member %s into its cgroup: %w", m.ID, err)
		}
		moved[pid] = true
	}
	if len(moved) == 0 {
		return nil
	}
	var ports []string
	for _, m := range members {
		ports = append(ports, memberPorts(m)...)
	}
	return resetConnections(ctx, g.ns, moved, ports)
}

// remove moves any process left in the members' cgroups back to the root
// one and deletes them.
func (g *memberCgroups) remove(members []*Member) {
	for _, m := range members {
		dir := filepath.Join(g.root, g.name(m))
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, pid := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(g.root, "cgroup.procs"), []byte(pid), 0o644)
			}
		}
		_ = os.Remove(dir)
	}
}

// resetConnections kills (ss -K) the established TCP connections in
// namespace ns that a process of pids opened to one of ports on this
// namespace's own addresses.
func resetConnections(ctx context.Context, ns string, pids map[int]bool, ports []string) error {
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "ss", "-tnpH", "state", "established").CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: ss in %s: %v: %s", ns, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		local, peer, users := f[2], f[3], strings.Join(f[4:], " ")
		owned := false
		for pid := range pids {
			if strings.Contains(users, "pid="+strconv.Itoa(pid)+",") {
				owned = true
			}
		}
		pi := strings.LastIndex(peer, ":")
		li := strings.LastIndex(local, ":")
		if !owned || pi < 0 || li < 0 || !slices.Contains(ports, peer[pi+1:]) {
			continue
		}
		if host := peer[:pi]; host != "127.0.0.1" && host != lab.GatewayIP {
			continue
		}
		kill := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "ss", "-K", "-tn",
			"src", local, "dst", peer)
		if out, err := kill.CombinedOutput(); err != nil {
			return fmt.Errorf("chaos: ss -K %s → %s: %v: %s", local, peer, err, out)
		}
	}
	return nil
}

const partitionTable = "molt_chaos_partition"

// partition cuts member m off from the others: packets its processes send
// to their ports, and theirs to its ports, are dropped. Agents (on the
// bridge) still reach every member.
func (g *memberCgroups) partition(ctx context.Context, m *Member, members []*Member) error {
	if err := g.tag(ctx, members); err != nil {
		return err
	}
	var others []string
	var rules strings.Builder
	for _, o := range members {
		if o != m {
			others = append(others, memberPorts(o)...)
			fmt.Fprintf(&rules, "    socket cgroupv2 level 1 %q tcp dport { %s } drop\n", g.name(o), strings.Join(memberPorts(m), ", "))
		}
	}
	fmt.Fprintf(&rules, "    socket cgroupv2 level 1 %q tcp dport { %s } drop\n", g.name(m), strings.Join(others, ", "))
	script := fmt.Sprintf("table inet %s {\n  chain out {\n    type filter hook output priority 0; policy accept;\n%s  }\n}\n", partitionTable, rules.String())
	// nft resolves a cgroupv2 path under /sys/fs/cgroup; on a hybrid
	// hierarchy the v2 tree is bind-mounted there in a mount namespace of
	// the nft process's own.
	sh := "exec nft -f -"
	if g.root != "/sys/fs/cgroup" {
		sh = "mount --bind " + g.root + " /sys/fs/cgroup && exec nft -f -"
	}
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+g.ns, "unshare", "-m", "sh", "-c", sh)
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: nft in %s: %v: %s", g.ns, err, out)
	}
	return nil
}

// heal removes the partition.
func (g *memberCgroups) heal(ctx context.Context) error {
	return nftDelete(ctx, g.ns, partitionTable)
}

// nftLoad loads an nftables script into namespace ns.
func nftLoad(ctx context.Context, ns, script string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: nft in %s: %v: %s", ns, err, out)
	}
	return nil
}

// nftDelete removes a table of ours from namespace ns (gone already is fine).
func nftDelete(ctx context.Context, ns, table string) error {
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "nft", "delete", "table", "inet", table).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such file or directory") {
		return fmt.Errorf("chaos: nft delete %s in %s: %v: %s", table, ns, err, out)
	}
	return nil
}

const linkTable = "molt_chaos_link"

// cutLink drops, in a host's namespace, every packet between it and the
// members' HTTP ports (agent ↔ coordinator; artifacts too, which the
// members serve). The host still reaches the API server and the other
// hosts.
func cutLink(ctx context.Context, hostNS string, members []*Member) error {
	var ports []string
	for _, m := range members {
		ports = append(ports, memberPorts(m)[0])
	}
	set := strings.Join(ports, ", ")
	return nftLoad(ctx, hostNS, fmt.Sprintf(`table inet %s {
  chain out { type filter hook output priority 0; policy accept; ip daddr %s tcp dport { %s } drop; }
  chain in { type filter hook input priority 0; policy accept; ip saddr %s tcp sport { %s } drop; }
}
`, linkTable, lab.GatewayIP, set, lab.GatewayIP, set))
}

const hostTable = "molt_chaos_host"

// isolateHost drops every packet on a host's link: the host is down as
// far as anyone else can tell.
func isolateHost(ctx context.Context, hostNS string) error {
	return nftLoad(ctx, hostNS, fmt.Sprintf(`table inet %s {
  chain out { type filter hook output priority 0; policy accept; oifname "eth0" drop; }
  chain in { type filter hook input priority 0; policy accept; iifname "eth0" drop; }
}
`, hostTable))
}

// processesIn returns the PIDs of processes named comm whose network
// namespace is ns (a lab host's: its processes are visible from here).
func processesIn(ns, comm string) ([]int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/run/netns/"+ns, &st); err != nil {
		return nil, fmt.Errorf("chaos: namespace %s: %w", ns, err)
	}
	want := fmt.Sprintf("net:[%d]", st.Ino)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && l == want {
			out = append(out, pid)
		}
	}
	return out, nil
}

// artifactSwap serves a wrong file in place of one artifact: the real one
// is renamed aside (never written to: it may be a link into the build
// cache) and put back by restore.
type artifactSwap struct {
	mu   sync.Mutex
	path string
}

func (s *artifactSwap) corrupt(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path != "" {
		return fmt.Errorf("chaos: %s is already swapped", s.path)
	}
	aside := path + ".chaos-real"
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := os.WriteFile(path, []byte("molt chaos: not the artifact whose sha256 the release names\n"), 0o644); err != nil {
		_ = os.Rename(aside, path)
		return fmt.Errorf("chaos: %w", err)
	}
	s.path = path
	return nil
}

func (s *artifactSwap) restore() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == "" {
		return nil
	}
	if err := os.Rename(s.path+".chaos-real", s.path); err != nil {
		return fmt.Errorf("chaos: restore %s: %w", s.path, err)
	}
	s.path = ""
	return nil
}
