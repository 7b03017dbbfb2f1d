package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
)

// etcd backups (docs/backup.md): the snapshots upgrades took before their
// control plane, and where each is kept.

func (c *cli) backupCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "backup", Short: "etcd backups: the snapshots taken before each upgrade's control plane"}
	list := &cobra.Command{
		Use:     "list CLUSTER",
		Short:   "List a cluster's recorded etcd backups, newest first, with the coordinator member holding each",
		Example: "  moltctl backup list lab\n  moltctl backup list lab -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := c.client().Backups(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if l.Backups == nil {
				l.Backups = []api.Backup{}
			}
			return c.print(l, func() { printBackups(c.out, l) })
		},
	}
	cmd.AddCommand(list)
	return cmd
}

// printBackups is the table of moltctl backup list: one row per
// snapshot, newest first. FILE is the path on the HOLDER member's disk:
// copy it from there (docs/backup.md, "Restore, step by step").
func printBackups(w io.Writer, l api.BackupList) {
	if len(l.Backups) == 0 {
		fmt.Fprintln(w, "no backups recorded")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TAKEN\tREVISION\tSIZE\tETCD\tFROM\tHOLDER\tSHA256\tFILE")
	for _, b := range l.Backups {
		etcd := b.EtcdVersion
		if etcd == "" {
			etcd = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s (%s)\t%s\t%s\t%s\n", b.TakenAt.UTC().Format(time.RFC3339), b.Revision, byteSize(b.Size), etcd,
			b.Node, b.Member, b.Holder, b.SHA256, b.File)
	}
	_ = tw.Flush()
}

// byteSize shows n in binary units (2.3 MiB).
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
