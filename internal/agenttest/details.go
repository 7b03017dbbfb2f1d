package agenttest

import (
	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/preflight"
)

// HealthyDetails are the result details a healthy host reports for a
// preflight host check (every artifact reachable, room on /var/lib, every
// peer answering), nil for other operations: what the simulated agents of
// the coordinator's, the web view's and the mixed-version tests report.
func HealthyDetails(op api.Operation) map[string]string {
	d := map[string]string{}
	switch {
	case op.CheckArtifacts != nil:
		for _, art := range op.CheckArtifacts.Artifacts {
			d[preflight.DetailArtifactPrefix+art.Name] = preflight.DetailOK
		}
		d[preflight.DetailFreeBytesPrefix+"/var/lib"] = "100000000000"
	case op.ProbePeers != nil:
		for _, addr := range op.ProbePeers.Addresses {
			d[addr] = preflight.DetailOK
		}
	default:
		return nil
	}
	return d
}
