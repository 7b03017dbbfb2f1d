package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/moltproject/molt/cloud"
)

// The book, under c.mu: naming, placement against quota and capacity,
// and keeping it in Options.File.

// key is an instance's key in the book: its name alone in a driven Cloud,
// whose names name machines.
func (c *Cloud) key(g cloud.GroupRef, name string) string {
	if c.driven() {
		return name
	}
	return g.String() + "/" + name
}

// members are g's instances, sorted by name.
func (c *Cloud) members(g cloud.GroupRef) []*instance {
	var out []*instance
	for _, in := range c.sortedInstances() {
		if in.Group == g && !in.Gone {
			out = append(out, in)
		}
	}
	return out
}

// member is g's instance name, or nil.
func (c *Cloud) member(g cloud.GroupRef, name string) *instance {
	if in, ok := c.book.Instances[c.key(g, name)]; ok && in.Group == g && !in.Gone {
		return in
	}
	return nil
}

// chooseNames picks n names for new instances of grp: "<group>-0001", …
// per group, or in a driven Cloud "<group>-1", … free in the whole Cloud.
// It returns the group's sequence number after them, for the caller to
// keep once the instances are made.
func (c *Cloud) chooseNames(grp *group, n int) ([]string, int, error) {
	var out []string
	seq := grp.Seq
	for range n {
		for {
			seq++
			var name string
			if c.driven() {
				name = fmt.Sprintf("%s-%d", grp.Ref.Name, seq)
			} else {
				name = fmt.Sprintf("%s-%04d", grp.Ref.Name, seq)
			}
			if len(name) > 63 {
				return nil, 0, c.errorf("group %s: no room for instance names of at most 63 characters: %w", grp.Ref, cloud.ErrInvalid)
			}
			_, taken := c.book.Instances[c.key(grp.Ref, name)]
			if !taken && c.opts.Reserved[name] == "" && !slices.Contains(out, name) {
				out = append(out, name)
				break
			}
		}
	}
	return out, seq, nil
}

// room refuses n more instances in zone when SyncQuota is set and the
// zone's quota cannot hold them, or when the Cloud's machines cannot.
func (c *Cloud) room(zone string, n int) error {
	if n == 0 {
		return nil
	}
	if limit := c.limit(zone); c.opts.SyncQuota && limit > 0 && c.usage(zone)+n > limit {
		return c.errorf("zone %s: %d more instances, %d of %d used: %w", zone, n, c.usage(zone), limit, cloud.ErrQuota)
	}
	if free := c.opts.Machines - len(c.book.Instances); c.opts.Machines > 0 && free < n {
		return c.errorf("%d more instances asked, %d %s left: %w", n, free, c.opts.MachinesAre, cloud.ErrQuota)
	}
	return nil
}

func (c *Cloud) add(grp *group, name string) {
	in := &instance{Name: name, Group: grp.Ref, Template: grp.Template, Status: cloud.StatusCreating, Waiting: waitUnplaced, Gen: 1, Slot: c.freeSlot()}
	c.book.Instances[c.key(grp.Ref, name)] = in
	c.place(in)
	c.wake(in)
}

// freeSlot is the lowest machine number no instance holds.
func (c *Cloud) freeSlot() int {
	if c.opts.Machines == 0 {
		return 0
	}
	used := map[int]bool{}
	for _, in := range c.book.Instances {
		used[in.Slot] = true
	}
	s := 0
	for used[s] {
		s++
	}
	return s
}

// remove deletes an instance; in a driven Cloud it is DELETING until the
// driver removed its machine.
func (c *Cloud) remove(in *instance) {
	if !c.driven() {
		delete(c.book.Instances, c.key(in.Group, in.Name))
		return
	}
	in.Status, in.Waiting = cloud.StatusDeleting, ""
	c.wake(in)
}

func (c *Cloud) limit(zone string) int {
	if l, ok := c.book.Quota[zone]; ok {
		return l
	}
	return c.opts.Quota
}

// usage counts the instances of zone that hold quota.
func (c *Cloud) usage(zone string) int {
	n := 0
	for _, in := range c.book.Instances {
		if in.Group.Zone == zone && in.Status != cloud.StatusDeleting && in.Waiting == "" {
			n++
		}
	}
	return n
}

// place checks an instance that is not placed yet against the zone's
// capacity and quota: it holds them (Waiting "") or says why not.
func (c *Cloud) place(in *instance) bool {
	if in.Waiting == "" {
		return true
	}
	zone := in.Group.Zone
	switch {
	case c.book.Stockout[zone]:
		in.Waiting = waitStockout
	case c.limit(zone) > 0 && c.usage(zone) >= c.limit(zone):
		in.Waiting = waitQuota
	default:
		in.Waiting = ""
	}
	return in.Waiting == ""
}

// finish runs a creating instance if it can be placed (without a Driver).
func (c *Cloud) finish(in *instance) {
	if creating(in) && c.place(in) {
		in.Status = cloud.StatusRunning
	}
}

func creating(in *instance) bool {
	return in.Status == cloud.StatusCreating || in.Status == cloud.StatusRecreating
}

func (c *Cloud) sortedInstances() []*instance {
	out := make([]*instance, 0, len(c.book.Instances))
	for _, in := range c.book.Instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Group.String() < out[j].Group.String()
	})
	return out
}

func (c *Cloud) instanceOf(in *instance) cloud.Instance {
	pid := ProviderID(in.Group.Zone, in.Name)
	if c.opts.ProviderID != nil {
		pid = c.opts.ProviderID(in.Group, in.Name)
	}
	out := cloud.Instance{Name: in.Name, ProviderID: pid, Template: in.Template, Status: in.Status}
	zone := in.Group.Zone
	switch {
	case in.Waiting == waitStockout:
		out.LastError = c.errorf("zone %s has no capacity: %w", zone, cloud.ErrStockout)
	case in.Waiting == waitQuota:
		out.LastError = c.errorf("zone %s: quota of %d instances used: %w", zone, c.limit(zone), cloud.ErrQuota)
	case in.Error != "":
		out.LastError = errors.New(in.Error)
	}
	return out
}

// changedLocked follows every change of the book: a driven Cloud places
// the instances that wait, if they can be now, and the book is saved.
func (c *Cloud) changedLocked() error {
	if c.driven() {
		for _, in := range c.sortedInstances() {
			if creating(in) && in.Waiting != "" && c.place(in) {
				c.wake(in)
			}
		}
	}
	c.changed.Broadcast()
	return c.save()
}

// changedLogged is changedLocked for a change no caller waits on: a
// failed save is logged, and made good by the next change's.
func (c *Cloud) changedLogged() {
	if err := c.changedLocked(); err != nil {
		c.opts.Log.Warn("save the book of the instance groups", "file", c.opts.File, "err", err)
	}
}

// Open returns a Cloud whose book is kept in opts.File: read from it
// (when it exists) and written after every change.
func Open(opts Options) (*Cloud, error) {
	c, err := Load(opts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.save(); err != nil {
		return nil, c.errorf("%v", err)
	}
	return c, nil
}

// Load returns a Cloud with the book in opts.File (empty when there is no
// file), and writes nothing: for a look at a book another process keeps.
// A file that is not such a book (an unknown field) is an error.
func Load(opts Options) (*Cloud, error) {
	c := New(opts)
	if opts.File == "" {
		return c, nil
	}
	b, err := os.ReadFile(opts.File)
	switch {
	case err == nil:
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var bk book
		if err := dec.Decode(&bk); err != nil {
			return nil, c.errorf("%s: %v", opts.File, err)
		}
		c.adopt(bk)
	case !errors.Is(err, os.ErrNotExist):
		return nil, c.errorf("%v", err)
	}
	return c, nil
}

// adopt takes a book read from the File, its missing maps made.
func (c *Cloud) adopt(bk book) {
	for k, v := range bk.Templates {
		c.book.Templates[k] = v
	}
	if bk.Groups != nil {
		c.book.Groups = bk.Groups
	}
	if bk.Instances != nil {
		c.book.Instances = bk.Instances
	}
	if bk.Requests != nil {
		c.book.Requests = bk.Requests
	}
	if bk.Quota != nil {
		c.book.Quota = bk.Quota
	}
	if bk.Stockout != nil {
		c.book.Stockout = bk.Stockout
	}
}

// save writes the book to the File (atomically: a new file renamed over
// it).
func (c *Cloud) save() error {
	if c.opts.File == "" {
		return nil
	}
	b, err := json.MarshalIndent(c.book, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.opts.File), 0o700); err != nil {
		return err
	}
	tmp := c.opts.File + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.opts.File)
}
