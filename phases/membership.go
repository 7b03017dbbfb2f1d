package phases

import "slices"

// Membership is how a MIG pool's nodes and groups change when a result
// applies: instances molt created join the pool (their agents may then
// enroll), instances it deleted leave it (their certificates stop being
// accepted), and blue/green swaps the pool's groups. The state machine
// applies it to the cluster's spec together with the result.
type Membership struct {
	Pool   string
	Add    []Node
	Remove []string
	// Groups, when set, become the pool's groups.
	Groups []InstanceGroup
}

// Empty reports whether m changes nothing.
func (m Membership) Empty() bool { return len(m.Add) == 0 && len(m.Remove) == 0 && m.Groups == nil }

// NodeResultMembership is the membership change r makes when it applies
// to u (call it before applying r): a surge replacement created joins the
// pool, the node it replaced leaves it once deleted, an undone
// replacement leaves it.
func (u *Upgrade) NodeResultMembership(r NodeStepResult) Membership {
	n, ok := u.Node(r.Node)
	if !ok || !r.OK || r.Wait != "" || n.State != StateRunning || n.Cursor != r.Cursor || n.Attempt != r.Attempt {
		return Membership{}
	}
	p, _ := u.Pool(n.Pool)
	steps := p.steps(n.Path)
	if n.Cursor >= len(steps) {
		return Membership{}
	}
	m := Membership{Pool: p.Name}
	switch steps[n.Cursor].Kind {
	case NodeCreateReplacement:
		m.Add = []Node{{Name: n.Replacement, Zone: n.Zone}}
	case NodeDeleteInstance:
		m.Remove = []string{n.Live()}
	case NodeUndoReplacement:
		m.Remove = []string{n.Replacement}
	}
	return m
}

// PoolWorkMembership is the membership change a blue/green pool's work
// result makes (call it before applying r): green nodes join when green
// is created; blue nodes leave and the groups become green's when blue is
// deleted; green nodes leave when a rollback deleted them.
func (u *Upgrade) PoolWorkMembership(r PoolWorkResult) Membership {
	p, _, err := u.runningPool(r.Pool)
	if err != nil || !r.OK || r.Wait != "" || p.BlueGreen == nil || p.BlueGreen.Phase != r.Phase || p.BlueGreen.Attempt != r.Attempt {
		return Membership{}
	}
	bg := p.BlueGreen
	m := Membership{Pool: p.Name}
	switch r.Work {
	case WorkCreateGreen:
		for _, g := range r.Green {
			for _, n := range g.Nodes {
				m.Add = append(m.Add, Node{Name: n, Zone: g.Zone})
			}
		}
	case WorkDeleteBlue:
		for _, n := range u.PoolNodes(p) {
			m.Remove = append(m.Remove, n.Live())
		}
		m.Groups = make([]InstanceGroup, 0, len(bg.Green))
		for _, g := range bg.Green {
			m.Groups = append(m.Groups, InstanceGroup{Zone: g.Zone, Name: g.Name})
		}
	case WorkRollback:
		for _, n := range bg.GreenNodes() {
			m.Remove = append(m.Remove, n.Name)
		}
	}
	return m
}

// ApplyMembership changes the pool's nodes and groups as m says. Nodes
// already there are not added twice; removing a missing node is a no-op.
func (c *ClusterSpec) ApplyMembership(m Membership) {
	p, ok := c.Pool(m.Pool)
	if !ok || m.Empty() {
		return
	}
	// A new slice: copies of the spec may share the old one.
	nodes := make([]Node, 0, len(p.Nodes)+len(m.Add))
	for _, n := range p.Nodes {
		if !slices.Contains(m.Remove, n.Name) {
			nodes = append(nodes, n)
		}
	}
	for _, n := range m.Add {
		if !slices.ContainsFunc(nodes, func(o Node) bool { return o.Name == n.Name }) {
			nodes = append(nodes, n)
		}
	}
	p.Nodes = nodes
	if m.Groups != nil {
		p.Groups = slices.Clone(m.Groups)
	}
}
