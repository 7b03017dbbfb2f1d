package vagrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/lab"
)

// testedMachines are the machines TestProvisioningScriptsInNspawnHosts
// boots as nspawn hosts and provisions as the Vagrantfile says, in this
// order: the first coordinator member (it bootstraps), one that joins it,
// and an agent host. The Vagrantfile then has testedCoordinators members.
var testedMachines = []string{"coord-1", "coord-2", "worker-1"}

const testedCoordinators = "2"

// sharedDst is where every VM sees the folder the Vagrantfile shares both
// ways: coord-1 publishes the CA pin and tokens there.
const sharedDst = "/opt/molt/shared"

// testedScripts are the provisioning scripts that test runs and checks.
var testedScripts = []string{"install-coordinator.sh", "provision.sh", "install-agent.sh"}

// machine is what `vagrant up` would do for one machine of the Vagrantfile,
// as testdata/dump.rb reports it.
type machine struct {
	Name     string `json:"name"`
	Networks []struct {
		Type string `json:"type"`
		IP   string `json:"ip"`
	} `json:"networks"`
	Synced       []syncedFolder `json:"synced"`
	Provisioners []provisioner  `json:"provisioners"`
}

// syncedFolder is a config.vm.synced_folder: Src on the workstation
// appears at Dst in the VM.
type syncedFolder struct {
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	Type     string `json:"type"`
	Disabled bool   `json:"disabled"`
}

// provisioner is a config.vm.provision. A shell provisioner with Path
// uploads that script and runs it as root with Args; one with Inline runs
// a command written in the Vagrantfile.
type provisioner struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Path   string   `json:"path"`
	Inline any      `json:"inline"`
	Args   []string `json:"args"`
}

// ip is the machine's private-network address.
func (m machine) ip() string {
	for _, n := range m.Networks {
		if n.Type == "private_network" {
			return n.IP
		}
	}
	return ""
}

// script is the base name of a provisioner's script.
func (p provisioner) script() string { return filepath.Base(p.Path) }

// loadVagrantfile evaluates ./Vagrantfile with env added to this process's
// environment (MOLT_* variables it reads) and returns its machines.
func loadVagrantfile(t *testing.T, env map[string]string) []machine {
	t.Helper()
	testenv.RequireBinary(t, "ruby") // installed with vagrant (make deps)
	cmd := exec.Command("ruby", "testdata/dump.rb", "Vagrantfile")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var ms []machine
	require.NoError(t, json.Unmarshal(out, &ms), string(out))
	require.NotEmpty(t, ms)
	return ms
}

func byName(t *testing.T, ms []machine, name string) machine {
	t.Helper()
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	require.FailNow(t, "no machine "+name+" in the Vagrantfile")
	return machine{}
}

// TestVagrantfileProvisionsWithTestedScripts keeps the Vagrantfile to what
// the nspawn test proves: every provisioning step is a shell script beside
// the Vagrantfile (no inline command), run with arguments, and one of the
// scripts TestProvisioningScriptsInNspawnHosts runs and checks; every such
// script runs on a machine that test provisions; and the VMs are the lab's
// topology (whose `molt-lab render` output they sync) plus coordinators.
func TestVagrantfileProvisionsWithTestedScripts(t *testing.T) {
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		small  string
		coords string // MOLT_COORDINATORS
		want   int    // coordinator members
		topo   lab.Topology
	}{
		{"full", "", "", 1, lab.FullTopology()},
		{"small", "1", "", 1, lab.SmallTopology()},
		{"full-tested", "", testedCoordinators, 2, lab.FullTopology()},
		{"small-5", "1", "5", 5, lab.SmallTopology()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := t.TempDir()
			ms := loadVagrantfile(t, map[string]string{"MOLT_LAB_SMALL": tc.small, "MOLT_COORDINATORS": tc.coords, "MOLT_SHARED": shared})

			named := map[string]bool{}
			var coordinators, urls []string
			ips := map[string]string{}
			for _, m := range ms {
				require.NotEmpty(t, m.Provisioners, "%s is never provisioned", m.Name)
				// Every VM sees the one folder shared both ways where the
				// scripts look for the CA pin and tokens; the rest is
				// synced one way (rsync).
				var sharedSeen int
				for _, f := range m.Synced {
					if f.Disabled {
						continue
					}
					if f.Dst == sharedDst {
						require.Equal(t, shared, f.Src, "%s: MOLT_SHARED", m.Name)
						require.Equal(t, "nfs", f.Type, "%s: the shared folder is written by the VMs", m.Name)
						sharedSeen++
						continue
					}
					require.Equal(t, "rsync", f.Type, "%s: synced folder %s", m.Name, f.Dst)
				}
				require.Equal(t, 1, sharedSeen, "%s: %s", m.Name, sharedDst)
				for _, p := range m.Provisioners {
					what := m.Name + ": provisioner " + p.Name
					require.Equal(t, "shell", p.Type, what)
					require.Nil(t, p.Inline, "%s is inline: make it a script in vagrant/ run with path: and args:", what)
					require.NotEmpty(t, p.Path, what)
					require.Equal(t, dir, filepath.Dir(p.Path), "%s: scripts live beside the Vagrantfile", what)
					require.Contains(t, testedScripts, p.script(),
						"%s: %s is not run by TestProvisioningScriptsInNspawnHosts; add it there (testedScripts)", what, p.script())
					require.NotEmpty(t, p.Args, what)
					named[p.script()] = true
				}
				if slices.ContainsFunc(m.Provisioners, func(p provisioner) bool { return p.script() == "install-coordinator.sh" }) {
					require.True(t, strings.HasPrefix(m.Name, "coord-"), "coordinator members run on coord-* VMs, not %s", m.Name)
					coordinators = append(coordinators, m.Name)
					urls = append(urls, "https://"+m.ip()+":7080")
					continue
				}
				ips[m.Name] = m.ip()
			}
			require.Len(t, coordinators, tc.want)

			// Members: NODE_ID IP FIRST_IP CLUSTER AGENTS, coord-1 first
			// (the one that bootstraps), every member naming it, and a
			// bootstrap token for every agent VM. Agents: every member's
			// https URL, the cluster, the node.
			first := byName(t, ms, "coord-1").ip()
			for _, m := range ms {
				for _, p := range m.Provisioners {
					switch p.script() {
					case "install-coordinator.sh":
						require.Equal(t, []string{m.Name, m.ip(), first, "lab", fmt.Sprint(len(tc.topo.Hosts))}, p.Args, m.Name)
					case "install-agent.sh":
						require.Equal(t, []string{strings.Join(urls, ","), "lab", m.Name}, p.Args, m.Name)
					}
				}
			}
			require.Equal(t, "coord-1", ms[0].Name, "coord-1 comes up first")

			// Every script the Vagrantfile names runs on a machine the nspawn
			// test provisions, and that test runs no script the file dropped.
			tested := map[string]bool{}
			for _, name := range testedMachines {
				if tc.want < 2 && name == "coord-2" {
					continue
				}
				for _, p := range byName(t, ms, name).Provisioners {
					tested[p.script()] = true
				}
			}
			for s := range named {
				require.True(t, tested[s], "%s runs only on machines the nspawn test does not boot (%v)", s, testedMachines)
			}
			for _, s := range testedScripts {
				require.True(t, named[s], "%s is tested but the Vagrantfile no longer runs it", s)
			}

			want := map[string]string{}
			for _, h := range tc.topo.Hosts {
				want[h.Name] = h.IP
			}
			require.Equal(t, want, ips, "the agent VMs are the lab topology's hosts, at its addresses")
		})
	}

	// The scripts are what Vagrant uploads and executes: a shebang, the
	// executable bit, and valid syntax for their shell.
	for _, s := range testedScripts {
		b, err := os.ReadFile(s)
		require.NoError(t, err)
		first, _, _ := strings.Cut(string(b), "\n")
		require.True(t, strings.HasPrefix(first, "#!"), "%s has no shebang", s)
		st, err := os.Stat(s)
		require.NoError(t, err)
		require.NotZero(t, st.Mode().Perm()&0o100, "%s is not executable", s)
		shell := "sh"
		if strings.HasSuffix(first, "bash") {
			shell = "bash"
		}
		out, err := exec.Command(shell, "-n", s).CombinedOutput()
		require.NoError(t, err, "%s -n %s: %s", shell, s, out)
	}
}

// TestVagrantfileSyncsTheK8sBuild: a node VM gets MOLT_K8S_VERSION's
// Kubernetes build from where make deps puts it on the workstation
// (cachedir.K8sBin: a stamped release from k8s/vSOURCE-as-vVERSION, never
// from an older compile of the same version), at the VM's
// /var/cache/molt/k8s/vVERSION/bin that provision.sh reads.
func TestVagrantfileSyncsTheK8sBuild(t *testing.T) {
	builds := t.TempDir()
	for _, b := range cachedir.K8sBuilds {
		t.Run("v"+b.Version, func(t *testing.T) {
			// The Vagrantfile leaves out a source that does not exist. An
			// old compile of a now stamped release is there too, as on a
			// machine that built it before.
			require.NoError(t, os.MkdirAll(cachedir.K8sBin(builds, b.Version), 0o755))
			require.NoError(t, os.MkdirAll(filepath.Join(builds, "k8s", "v"+b.Version, "bin"), 0o755))
			ms := loadVagrantfile(t, map[string]string{"MOLT_BUILD_CACHE": builds, "MOLT_K8S_VERSION": b.Version, "MOLT_SHARED": t.TempDir()})
			dst := "/var/cache/molt/k8s/v" + b.Version + "/bin"
			i := slices.IndexFunc(byName(t, ms, "worker-1").Synced, func(f syncedFolder) bool { return f.Dst == dst })
			require.GreaterOrEqual(t, i, 0, "worker-1 syncs %s", dst)
			require.Equal(t, cachedir.K8sBin(builds, b.Version), byName(t, ms, "worker-1").Synced[i].Src)
		})
	}
}
