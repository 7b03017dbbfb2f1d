package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// inotifyLimits are the kernel's per-user inotify limits the lab needs.
// Every host's systemd, logind, dbus, containerd, agetty and kubelet, and
// the control plane, hold inotify instances of root's, all counted against
// one fs.inotify.max_user_instances: the full lab holds about 130, over
// Debian's default of 128, and a kubelet that cannot get one exits at
// start ("inotify_init: too many open files"), so its Node never becomes
// Ready again after an upgrade.
var inotifyLimits = []struct {
	path string
	min  int
}{
	{"/proc/sys/fs/inotify/max_user_instances", 8192},
	{"/proc/sys/fs/inotify/max_user_watches", 524288},
}

// raiseInotifyLimits raises each limit to its minimum when it is lower;
// it never lowers one. It reports what it changed.
func raiseInotifyLimits() ([]string, error) {
	var changed []string
	for _, l := range inotifyLimits {
		b, err := os.ReadFile(l.path)
		if err != nil {
			return changed, fmt.Errorf("%w: %v", ErrHost, err)
		}
		cur, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return changed, fmt.Errorf("%w: %s: %v", ErrHost, l.path, err)
		}
		if cur >= l.min {
			continue
		}
		if err := os.WriteFile(l.path, []byte(strconv.Itoa(l.min)), 0o644); err != nil {
			return changed, fmt.Errorf("%w: raise %s to %d: %v", ErrHost, l.path, l.min, err)
		}
		changed = append(changed, fmt.Sprintf("%s %d → %d", strings.TrimPrefix(l.path, "/proc/sys/"), cur, l.min))
	}
	return changed, nil
}
